"""Parse ``key=value`` pairs separated by semicolons."""


def parse(line):
    """Parse ``'a=1; b=two'`` into ``{'a': '1', 'b': 'two'}``."""
    result = {}
    for part in line.split(";"):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"missing '=' in {part!r}")
        result[key.strip()] = value.strip()
    return result
