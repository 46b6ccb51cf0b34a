"""Starting a child process without losing a stop: a stop signal (cancel, ``--resume``'s Ctrl-C)
that lands while ``subprocess.Popen(..., preexec_fn=...)`` forks is raised after the fork.

    with spawning(): proc = Popen(...)     every spawn with a preexec_fn
    defer_stop(raise_later)                a stop handler's first question: True while spawning

CPython runs Python at-fork callbacks in the parent when a ``preexec_fn`` is given, and an
exception a signal handler raises inside one is printed and lost, so a cancelled attempt would go
on. Both ``ledger.tasks.checks.run_command`` and the agent runner spawn through here.

    wait_exit(proc, timeout)               Popen.wait(timeout) without its 50 ms polling
    read_available(fd, limit)              what a child's non-blocking pipe holds now, bounded
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any


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




def wait_exit(proc: subprocess.Popen[Any], timeout: float) -> int:
    """``proc.wait(timeout=timeout)`` that returns as soon as the child exits.

    With a timeout, ``Popen.wait`` polls, sleeping up to 50 ms between looks, so every command
    a harness waits on ended on average ~25 ms before the harness noticed. Here a pidfd (Linux
    5.3 and later) wakes the caller when the child exits; elsewhere it is ``Popen.wait``. Raises
    ``subprocess.TimeoutExpired`` as ``Popen.wait`` does (the child is left running)."""
    import math
    import os
    import select
    import time

    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (or the child is already reaped)
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(math.ceil(max(0.0, min(deadline - time.monotonic(), 3600.0)) * 1000)):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout)
        return proc.wait()
    finally:
        os.close(fd)


def read_available(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes that the non-blocking ``fd`` holds now (``b""``: empty or closed)."""
    data = b""
    while len(data) < limit:
        try:
            chunk = os.read(fd, min(1 << 16, limit - len(data)))
        except OSError:  # BlockingIOError (nothing more now) included
            break
        if not chunk:
            break
        data += chunk
    return data


__all__ = ["defer_stop", "read_available", "spawning", "wait_exit"]
