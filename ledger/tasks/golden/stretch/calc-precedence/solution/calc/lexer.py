"""Text to tokens."""


class CalcError(ValueError):
    """A malformed expression."""


def tokenize(text):
    """Tokens of ``text``: ("num", int | float) and ("op", str) for + - * / ( )."""
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit() or ch == ".":
            j = i
            while j < len(text) and (text[j].isdigit() or text[j] == "."):
                j += 1
            literal = text[i:j]
            if literal.count(".") > 1 or literal == ".":
                raise CalcError(f"bad number {literal!r} at {i}")
            tokens.append(("num", float(literal) if "." in literal else int(literal)))
            i = j
        elif ch in "+-*/()":
            tokens.append(("op", ch))
            i += 1
        else:
            raise CalcError(f"unexpected {ch!r} at {i}")
    return tokens
