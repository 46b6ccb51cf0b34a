"""Evaluate tokens."""

from calc.lexer import CalcError, tokenize


def evaluate(text):
    """The value of the expression ``text``."""
    tokens = tokenize(text)
    if not tokens or tokens[0][0] != "num":
        raise CalcError("expected a number")
    value = tokens[0][1]
    i = 1
    while i < len(tokens):
        op = tokens[i]
        if op[0] != "op" or i + 1 >= len(tokens) or tokens[i + 1][0] != "num":
            raise CalcError("expected an operator and a number")
        value = value + tokens[i + 1][1] if op[1] == "+" else value - tokens[i + 1][1]
        i += 2
    return value
