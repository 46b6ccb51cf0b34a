"""The one table renderer of the command line: aligned text columns, or a Markdown table."""

from __future__ import annotations

from collections.abc import Sequence


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], md: bool = False) -> list[str]:
    """Lines of a table: columns padded to their widest cell (trailing blanks trimmed), or with
    ``md`` a Markdown table whose cells escape ``|``."""
    if md:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return out
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    return lines
