"""Plain-text tables."""


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_table(headers, rows):
    """Render ``rows`` (sequences of values) under ``headers`` as a plain-text table."""
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} values for {len(headers)} headers")
    numeric = []
    for i in range(len(headers)):
        present = [row[i] for row in rows if row[i] is not None]
        numeric.append(bool(present) and all(_is_number(v) for v in present))
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)]
        lines.append(" | ".join(parts).rstrip())
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)
