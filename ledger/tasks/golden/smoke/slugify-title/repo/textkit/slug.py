"""URL slugs."""


def slugify(text):
    """A URL-safe slug for ``text``."""
    return text.lower().replace(" ", "-")
