"""Parse dates written by people."""

import datetime


def parse_date(text):
    """A ``datetime.date`` from ISO text such as ``2024-03-05``."""
    return datetime.date.fromisoformat(text.strip())
