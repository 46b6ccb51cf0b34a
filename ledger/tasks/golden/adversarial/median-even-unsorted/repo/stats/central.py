"""Measures of central tendency."""


def mean(values):
    """The arithmetic mean of ``values``."""
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """The middle value of ``values`` (the mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("median of an empty sequence")
    return values[len(values) // 2]
