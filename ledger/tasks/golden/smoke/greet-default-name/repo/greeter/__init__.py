"""A tiny greeting library."""

from greeter.core import greet

__all__ = ["greet"]
