"""A small INI parser with continuation lines and ${...} interpolation."""

import re


class ParseError(ValueError):
    """A line that is not a section, an assignment, a comment or blank."""


class InterpolationError(ValueError):
    """A ${...} reference to a missing key, or a reference cycle."""


_REF = re.compile(r"\$\$|\$\{([^}]*)\}")


def _read(text):
    data = {"": {}}
    section, last_key = "", None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            last_key = None
            continue
        if raw[0] in " \t":
            if last_key is None:
                raise ParseError(f"line {number}: continuation without a value")
            data[section][last_key] += "\n" + line
            continue
        if line.startswith("[") and line.endswith("]"):
            section, last_key = line[1:-1].strip(), None
            data.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ParseError(f"line {number}: expected key = value")
        last_key = key.strip()
        data[section][last_key] = value.strip()
    return data


def _resolve(data, section, key, active):
    ident = (section, key)
    if ident in active:
        raise InterpolationError(f"reference cycle at {key}")
    if section not in data or key not in data[section]:
        name = f"{section}:{key}" if section else key
        raise InterpolationError(f"no such key: {name}")
    active = active | {ident}

    def sub(match):
        if match.group(0) == "$$":
            return "$"
        ref = match.group(1)
        if ":" in ref:
            other, _, other_key = ref.partition(":")
            if other not in data or other_key not in data[other]:
                raise InterpolationError(f"no such key: {ref}")
            return _resolve(data, other, other_key, active)
        if ref not in data[section]:
            raise InterpolationError(f"no such key: {ref}")
        return _resolve(data, section, ref, active)

    return _REF.sub(sub, data[section][key])


def parse(text):
    """``{section: {key: value}}`` from INI text; keys before any section go in ""."""
    raw = _read(text)
    return {s: {k: _resolve(raw, s, k, frozenset()) for k in keys} for s, keys in raw.items()}
