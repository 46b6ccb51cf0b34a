"""A small INI parser."""


class ParseError(ValueError):
    """A line that is not a section, an assignment, a comment or blank."""


def parse(text):
    """``{section: {key: value}}`` from INI text; keys before any section go in ""."""
    data = {"": {}}
    section = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            data.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ParseError(f"line {number}: expected key = value")
        data[section][key.strip()] = value.strip()
    return data
