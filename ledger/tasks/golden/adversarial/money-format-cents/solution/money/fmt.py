"""Money formatting."""


def format_money(cents, symbol="$"):
    """``cents`` as text such as ``$1,234.56`` (negative amounts as ``-$1.05``)."""
    if not isinstance(cents, int) or isinstance(cents, bool):
        raise TypeError("cents must be an int")
    sign = "-" if cents < 0 else ""
    units, rest = divmod(abs(cents), 100)
    return f"{sign}{symbol}{units:,}.{rest:02d}"
