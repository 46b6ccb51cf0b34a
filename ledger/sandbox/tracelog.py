"""The strace log of a sandboxed agent, and whether its trace is complete.

strace runs outside the sandbox (``strace ... -- bwrap ... -- AGENT``): the tracer is in the
harness's PID namespace, so nothing inside can see or signal it, and it follows bwrap into the
namespaces. The first lines of its log are bwrap building the sandbox (opening ``/newroot/...``,
writing ``/proc/PID/uid_map``): the harness's own set-up, not the agent's activity.
``strip_setup`` keeps the log from the agent's first ``execve`` on, without any line of the
bwrap processes (they only wait and reap afterwards).

A trace is **partial** when the tracer stopped following the agent before the agent ended
(``TraceWatch``: the agent's ``TracerPid`` went from the tracer to 0 while it still ran).
"""

from __future__ import annotations

import re
from pathlib import Path

_PID = re.compile(rb"^(\d+)\s")


def strip_setup(log_path: Path, out_path: Path) -> bool:
    """Write the agent part of ``log_path`` to ``out_path``; False when the log names no exec
    (then ``out_path`` is empty: the agent never started inside)."""
    try:
        lines = log_path.read_bytes().splitlines(keepends=True)
    except OSError:
        out_path.write_bytes(b"")
        return False
    first_pid: bytes | None = None
    setup_pids: set[bytes] = set()
    cut: int | None = None
    for i, line in enumerate(lines):
        m = _PID.match(line)
        if m is None:
            continue
        pid = m.group(1)
        if first_pid is None:
            first_pid = pid
        if pid != first_pid and b" execve(" in line:
            cut = i
            setup_pids.discard(pid)
            break
        setup_pids.add(pid)
    if cut is None:
        out_path.write_bytes(b"")
        return False
    kept = [ln for ln in lines[cut:] if (m := _PID.match(ln)) is None or m.group(1) not in setup_pids]
    out_path.write_bytes(b"".join(kept))
    return True


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
