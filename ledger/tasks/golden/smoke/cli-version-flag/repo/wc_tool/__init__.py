"""Count lines, words and characters."""

__version__ = "1.2.0"
