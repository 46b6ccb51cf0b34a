"""Parse dates written by people."""

import datetime
import re

_MONTHS = ["january", "february", "march", "april", "may", "june", "july",
           "august", "september", "october", "november", "december"]


def _month(name):
    name = name.lower()
    for number, full in enumerate(_MONTHS, 1):
        if name in (full, full[:3]):
            return number
    raise ValueError(f"unknown month {name!r}")


_PATTERNS = [
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), lambda m: (int(m[1]), int(m[2]), int(m[3]))),
    (re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})"), lambda m: (int(m[3]), int(m[2]), int(m[1]))),
    (re.compile(r"(\d{1,2}) ([A-Za-z]+) (\d{4})"), lambda m: (int(m[3]), _month(m[2]), int(m[1]))),
    (re.compile(r"([A-Za-z]+) (\d{1,2}),? (\d{4})"), lambda m: (int(m[3]), _month(m[1]), int(m[2]))),
]


def parse_date(text):
    """A ``datetime.date`` from ISO, d/m/Y, "5 March 2024" or "March 5, 2024" text."""
    s = text.strip()
    for pattern, parts in _PATTERNS:
        m = pattern.fullmatch(s)
        if m:
            year, month, day = parts(m)
            return datetime.date(year, month, day)
    raise ValueError(f"unrecognised date {text!r}")
