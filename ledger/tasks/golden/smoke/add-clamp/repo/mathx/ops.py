"""Interpolation and range helpers."""


def lerp(a, b, t):
    """Linear interpolation between ``a`` and ``b`` at ``t`` (0..1)."""
    return a + (b - a) * t


def clamp(value, low, high):
    """Limit ``value`` to the closed interval [low, high]."""
    raise NotImplementedError("clamp is not written yet")
