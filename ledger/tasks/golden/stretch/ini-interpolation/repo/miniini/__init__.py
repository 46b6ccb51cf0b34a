from miniini.parser import ParseError, parse

__all__ = ["ParseError", "parse"]
