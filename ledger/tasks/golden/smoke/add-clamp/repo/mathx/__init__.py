"""Small numeric helpers."""

from mathx.ops import clamp, lerp

__all__ = ["clamp", "lerp"]
