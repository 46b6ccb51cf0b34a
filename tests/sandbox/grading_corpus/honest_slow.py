#!/usr/bin/python3
"""An honest solution that is slow: 1.5 s at import and 0.1 s per call."""

open("mathx/ops.py", "w").write('''"""Interpolation and range helpers."""
import time

time.sleep(1.5)


def lerp(a, b, t):
    return a + (b - a) * t


def clamp(value, low, high):
    time.sleep(0.1)
    if low > high:
        raise ValueError("empty interval")
    return max(low, min(value, high))
''')
print("HONEST slow: clamp written; 1.5 s at import, 0.1 s per call")
