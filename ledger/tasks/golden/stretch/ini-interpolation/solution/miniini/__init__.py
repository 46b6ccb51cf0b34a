from miniini.parser import InterpolationError, ParseError, parse

__all__ = ["InterpolationError", "ParseError", "parse"]
