from kvparse.parser import parse

__all__ = ["parse"]
