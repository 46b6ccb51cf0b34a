"""Greetings."""


def greet(name=None):
    """Return a friendly greeting for ``name`` ("world" when no name is given)."""
    name = (name or "").strip() or "world"
    return f"Hello, {name}!"
