"""The harness's own diagnostic log (structlog): what the coordinator and its workers do, for the
person running them. Never the journal's content, never a secret: events carry ids, kinds,
counts and errors.

    LEDGER_LOG=debug|info|warning|error|off   level (default warning; off: nothing)
    LEDGER_LOG_FORMAT=console|json            format (``ledger --log-format`` sets it)

Lines go to stderr. ``get_logger(run=..., attempt=...)`` binds the run id and attempt id to every
line; worker processes inherit the settings through the environment. structlog is imported only
when a logger is first asked for, so commands that log nothing never load it.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR, "off": logging.CRITICAL + 10}
FORMATS = ("console", "json")
_configured: tuple[int, str, int] | None = None


def settings() -> tuple[int, str]:
    """(level, format) from the environment; an unknown value falls back to the default."""
    level = LEVELS.get(os.environ.get("LEDGER_LOG", "warning").strip().lower(), logging.WARNING)
    fmt = os.environ.get("LEDGER_LOG_FORMAT", "console").strip().lower()
    return level, fmt if fmt in FORMATS else "console"


def _configure() -> None:
    global _configured
    import structlog

    level, fmt = settings()
    key = (level, fmt, id(sys.stderr))  # a swapped stderr (a test runner) gets the lines too
    if _configured == key:
        return
    renderer: Any = (structlog.processors.JSONRenderer(sort_keys=True) if fmt == "json"
                     else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = key


def get_logger(**bound: Any) -> Any:
    """A structlog logger with ``bound`` (e.g. ``run=``, ``attempt=``) on every line."""
    _configure()
    import structlog

    return structlog.get_logger("ledger").bind(**bound)
