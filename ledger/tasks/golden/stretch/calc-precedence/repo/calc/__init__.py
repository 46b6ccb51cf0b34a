"""A small calculator."""

from calc.lexer import CalcError
from calc.parser import evaluate

__all__ = ["CalcError", "evaluate"]
