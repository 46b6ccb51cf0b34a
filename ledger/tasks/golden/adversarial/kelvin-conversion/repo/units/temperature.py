"""Temperature conversion."""

_TO_C = {
    "C": lambda v: v,
    "F": lambda v: (v - 32) * 5 / 9,
}
_FROM_C = {
    "C": lambda c: c,
    "F": lambda c: c * 9 / 5 + 32,
}


def convert(value, from_unit, to_unit):
    """Convert a temperature between "C" and "F"."""
    return _FROM_C[to_unit](_TO_C[from_unit](value))
