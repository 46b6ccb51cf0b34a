"""Roman numerals (1..3999)."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(n):
    """The canonical Roman numeral for ``n``."""
    if not isinstance(n, int) or not 1 <= n <= 3999:
        raise ValueError(f"out of range: {n!r}")
    out = []
    for value, symbol in _VALUES:
        while n >= value:
            out.append(symbol)
            n -= value
    return "".join(out)


def from_roman(text):
    """The integer value of a canonical Roman numeral."""
    s = text.strip().upper()
    total, i = 0, 0
    for value, symbol in _VALUES:
        while s.startswith(symbol, i):
            total += value
            i += len(symbol)
    if not s or i != len(s) or total > 3999 or to_roman(total) != s:
        raise ValueError(f"not a canonical Roman numeral: {text!r}")
    return total
