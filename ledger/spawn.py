"""Starting a child process without losing a stop: a stop signal (cancel, ``--resume``'s Ctrl-C)
that lands while ``subprocess.Popen(..., preexec_fn=...)`` forks is raised after the fork.

    with spawning(): proc = Popen(...)     every spawn with a preexec_fn
    defer_stop(raise_later)                a stop handler's first question: True while spawning

CPython runs Python at-fork callbacks in the parent when a ``preexec_fn`` is given, and an
exception a signal handler raises inside one is printed and lost, so a cancelled attempt would go
on. Both ``ledger.tasks.checks.run_command`` and the agent runner spawn through here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class _Deferral:
    """The stop held back while a spawn is in progress (see the module docstring)."""

    depth = 0
    pending: Callable[[], None] | None = None


def defer_stop(raise_later: Callable[[], None]) -> bool:
    """For a stop signal's handler: True (``raise_later`` kept) while ``spawning`` is active."""
    if _Deferral.depth:
        _Deferral.pending = raise_later
        return True
    return False


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around ``subprocess.Popen(..., preexec_fn=...)``: a stop signal arriving meanwhile is
    raised when the spawn has returned (the caller kills what it started)."""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
        if not _Deferral.depth and _Deferral.pending is not None:
            pending, _Deferral.pending = _Deferral.pending, None
            pending()


__all__ = ["defer_stop", "spawning"]
