from rangeutil.span import inclusive_range

__all__ = ["inclusive_range"]
