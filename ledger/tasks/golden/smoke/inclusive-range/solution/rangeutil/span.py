"""Ranges that include their end."""


def inclusive_range(start, stop, step=1):
    """Numbers from ``start`` to ``stop``, both ends included."""
    if step == 0:
        raise ValueError("step must not be zero")
    return list(range(start, stop + (1 if step > 0 else -1), step))
