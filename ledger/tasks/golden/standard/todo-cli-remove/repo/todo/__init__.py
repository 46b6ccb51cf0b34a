"""A small to-do list."""
