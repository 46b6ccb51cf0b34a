"""Parse ``key=value`` pairs separated by semicolons; values may be double-quoted."""


def _quoted(line, i):
    """Read a quoted value starting after the opening quote at ``i``; return (value, next)."""
    out = []
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in "\"\\":
            out.append(line[i + 1])
            i += 2
        elif ch == '"':
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    raise ValueError("unterminated quote")


def parse(line):
    """Parse ``'a=1; b="x;y"'`` into ``{'a': '1', 'b': 'x;y'}``."""
    result = {}
    i, n = 0, len(line)
    while i < n:
        end = line.find(";", i)
        eq = line.find("=", i)
        if end == -1:
            end = n
        segment = line[i:end]
        if not segment.strip():
            i = end + 1
            continue
        if eq == -1 or eq > end:
            raise ValueError(f"missing '=' in {segment.strip()!r}")
        key = line[i:eq].strip()
        if not key:
            raise ValueError("empty key")
        j = eq + 1
        while j < n and line[j] in " \t":
            j += 1
        if j < n and line[j] == '"':
            value, j = _quoted(line, j + 1)
            end = line.find(";", j)
            if end == -1:
                end = n
            if line[j:end].strip():
                raise ValueError(f"text after the closing quote of {key!r}")
        else:
            value = line[eq + 1 : end].strip()
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
        i = end + 1
    return result
