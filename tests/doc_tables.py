"""Read the entry-kind tables of the docs, so tests can check that every written field is documented."""

from __future__ import annotations

import re
from pathlib import Path


def documented_fields(doc: Path, kind_pattern: str = r"[a-z_.]+") -> dict[str, set[str]]:
    """kind -> data fields named in backticks (outside brackets) in the doc's `| kind | fields |` rows."""
    out: dict[str, set[str]] = {}
    row = re.compile(r"\|\s*`(" + kind_pattern + r")`\s*\|(.*)\|\s*$")
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = row.match(line)
        if not m:
            continue
        depth, fields, spec, i = 0, set(), m.group(2), 0
        while i < len(spec):
            c = spec[i]
            if c in "{[(":
                depth += 1
            elif c in "}])":
                depth -= 1
            elif c == "`" and depth == 0:
                j = spec.index("`", i + 1)
                fields.add(spec[i + 1:j])
                i = j
            i += 1
        out[m.group(1)] = fields
    return out
