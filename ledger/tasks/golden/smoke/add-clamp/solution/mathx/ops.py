"""Interpolation and range helpers."""


def lerp(a, b, t):
    """Linear interpolation between ``a`` and ``b`` at ``t`` (0..1)."""
    return a + (b - a) * t


def clamp(value, low, high):
    """Limit ``value`` to the closed interval [low, high]."""
    if low > high:
        raise ValueError(f"empty interval: low {low!r} > high {high!r}")
    return max(low, min(value, high))
