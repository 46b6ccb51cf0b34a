"""eval-ledger: a tamper-evident journal of AI coding agent runs, and everything derived from it."""

__version__ = "0.1.0"
