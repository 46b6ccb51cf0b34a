"""The strace log of a sandboxed agent, and whether its trace is complete.

strace runs outside the sandbox (``strace ... -- bwrap ... -- AGENT``): the tracer is in the
harness's PID namespace, so nothing inside can see or signal it, and it follows bwrap into the
namespaces. The first lines of its log are bwrap building the sandbox (opening ``/newroot/...``,
writing ``/proc/PID/uid_map``): the harness's own set-up, not the agent's activity.
``agent_lines`` keeps the log from the agent's first ``execve`` on, without any line of the
bwrap processes (they only wait and reap afterwards) nor of the harness's in-sandbox waiter
(``ledger.sandbox.limits``: the first ``/bin/sh`` exec whose script starts ``: ledger-init``).

A trace is **partial** when the tracer stopped following the agent before the agent ended
(``TraceWatch``: the agent's ``TracerPid`` went from the tracer to 0 while it still ran).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_PID = re.compile(r"^(\d+)\s")
# How strace (``-xx``: every byte of a string in hex) shows the waiter's script argument.
INIT_TAG = '"' + "".join(f"\\x{b:02x}" for b in b": ledger-init\n")


def agent_lines(lines: Iterable[str]) -> Iterator[str]:
    """The agent part of a log's lines, streamed: from the first ``execve`` of a process other
    than the first one on, without any line of the processes seen before it (bwrap's). Nothing
    when the log names no such exec (the agent never started inside)."""
    first_pid: str | None = None
    setup_pids: set[str] = set()
    waiter_seen = False
    it = iter(lines)
    for line in it:
        m = _PID.match(line)
        if m is None:
            continue
        pid = m.group(1)
        if first_pid is None:
            first_pid = pid
        if pid != first_pid and " execve(" in line:
            if INIT_TAG in line and not waiter_seen:
                waiter_seen = True  # the harness's in-sandbox waiter: set-up, not the agent
                setup_pids.add(pid)
                continue
            setup_pids.discard(pid)
            yield line
            break
        setup_pids.add(pid)
    for line in it:
        m = _PID.match(line)
        if m is None or m.group(1) not in setup_pids:
            yield line


def tracer_of(pid: int) -> int | None:
    """The ``TracerPid`` of a live process (0: not traced); None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None  # exited, not yet reaped: the tracer let go because it ended
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class TraceWatch:
    """Polled while the agent runs: remembers the tracer, flags when it lets go too early."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.tracer = 0
        self.partial = False

    def poll(self) -> None:
        now = tracer_of(self.pid)
        if now is None:  # the agent is gone: nothing to judge
            return
        if now:
            self.tracer = now
        elif self.tracer:
            self.partial = True
