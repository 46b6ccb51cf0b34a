"""Text to tokens."""


class CalcError(ValueError):
    """A malformed expression."""


def tokenize(text):
    """Tokens of ``text``: ("num", int) and ("op", str)."""
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            tokens.append(("num", int(text[i:j])))
            i = j
        elif ch in "+-":
            tokens.append(("op", ch))
            i += 1
        else:
            raise CalcError(f"unexpected {ch!r} at {i}")
    return tokens
