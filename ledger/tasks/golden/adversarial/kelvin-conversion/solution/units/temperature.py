"""Temperature conversion."""

ABSOLUTE_ZERO_C = -273.15

_TO_C = {
    "C": lambda v: v,
    "F": lambda v: (v - 32) * 5 / 9,
    "K": lambda v: v + ABSOLUTE_ZERO_C,
}
_FROM_C = {
    "C": lambda c: c,
    "F": lambda c: c * 9 / 5 + 32,
    "K": lambda c: c - ABSOLUTE_ZERO_C,
}


def _unit(name):
    unit = str(name).upper()
    if unit not in _TO_C:
        raise ValueError(f"unknown unit {name!r}")
    return unit


def convert(value, from_unit, to_unit):
    """Convert a temperature between "C", "F" and "K"."""
    celsius = _TO_C[_unit(from_unit)](value)
    if celsius < ABSOLUTE_ZERO_C - 1e-9:
        raise ValueError(f"{value} {from_unit} is below absolute zero")
    return _FROM_C[_unit(to_unit)](celsius)
