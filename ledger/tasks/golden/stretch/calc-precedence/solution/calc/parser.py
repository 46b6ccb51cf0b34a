"""Evaluate tokens by recursive descent.

    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/") factor)*
    factor := ("+" | "-") factor | NUMBER | "(" expr ")"
"""

from calc.lexer import CalcError, tokenize


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None)

    def take(self):
        tok = self.peek()
        self.pos += 1
        return tok

    def expr(self):
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.factor()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            rhs = self.factor()
            value = value * rhs if op == "*" else value / rhs
        return value

    def factor(self):
        kind, val = self.take()
        if kind == "num":
            return val
        if (kind, val) == ("op", "-"):
            return -self.factor()
        if (kind, val) == ("op", "+"):
            return +self.factor()
        if (kind, val) == ("op", "("):
            value = self.expr()
            if self.take() != ("op", ")"):
                raise CalcError("missing ')'")
            return value
        raise CalcError("expected a number, a sign or '('")


def evaluate(text):
    """The value of the expression ``text``."""
    parser = _Parser(tokenize(text))
    value = parser.expr()
    if parser.pos != len(parser.tokens):
        raise CalcError("unexpected input after the expression")
    return value
