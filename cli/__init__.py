"""Thin click commands over the library."""
