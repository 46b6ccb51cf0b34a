#!/usr/bin/python3
"""An honest solution whose code prints a lot: 2 MB to stdout and to stderr whenever the
package is imported (every suite and the signal)."""

open("mathx/ops.py", "w").write('''"""Interpolation and range helpers."""
import sys

sys.stdout.write("chatter " * 250_000)
sys.stderr.write("noise " * 330_000)


def lerp(a, b, t):
    return a + (b - a) * t


def clamp(value, low, high):
    if low > high:
        raise ValueError("empty interval")
    return max(low, min(value, high))
''')
print("HONEST prints-a-lot: clamp written; the module prints about 4 MB on import")
