"""The processes of one attempt, found through ``/proc`` and swept.

A process belongs to the attempt when it carries the attempt's marker in its environment
(``LEDGER_ATTEMPT=<attempt id>#<nonce>``, inherited by every descendant, including ones that
called ``setsid`` or double-forked), is still in the agent's process group or session, or is
traced by the attempt's strace (strace follows every descendant). ``kill_attempt_processes``
SIGKILLs them until none is left. In a sandbox the in-namespace waiter (``Waiter``, the harness
side of ``Enforcement.init_script``) counts and kills what the agent left in its PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

MARKER_ENV = "LEDGER_ATTEMPT"
_PF_EXITING = 0x4  # the kernel's per-task flag (include/linux/sched.h): the task is exiting


class ProcStat(NamedTuple):
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # when the process started, in clock ticks since boot


def parse_proc_stat(raw: bytes) -> ProcStat | None:
    """The fields of ``/proc/PID/stat`` the harness uses, or None.

    A process that has already begun to exit (``PF_EXITING`` in the flags field: it runs no more
    code of its own and is about to become a zombie) has state ``"X"``, like one that is gone:
    it is neither killed nor counted as an orphan.
    """
    tail = raw[raw.rfind(b")") + 2:].split()
    if len(tail) < 20:
        return None
    try:
        st = ProcStat(tail[0].decode(), int(tail[1]), int(tail[2]), int(tail[3]), int(tail[19]))
        flags = int(tail[6])
    except (UnicodeDecodeError, ValueError):
        return None
    return st._replace(state="X") if flags & _PF_EXITING else st


def _proc_stat(pid: int) -> ProcStat | None:
    """``parse_proc_stat`` of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return parse_proc_stat(raw)


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return False
    return marker in env.split(b"\0")


def _cmdline_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


def _tracer_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def attempt_processes(marker: str, group: int, exclude: Iterable[int] = (),
                      tracers: Iterable[int] = (), born: int = 0) -> list[int]:
    """Live (non-zombie) processes of an attempt.

    A process belongs to the attempt if it carries the marker in its environment, is in the
    agent's process group or session, or is traced by one of ``tracers`` (the attempt's strace,
    which follows every descendant, even one that scrubbed its environment and called setsid).
    ``born``: the agent's start time (``ProcStat.start``); a process that started before it
    cannot descend from it and is passed over without reading its environment.
    """
    needle = f"{MARKER_ENV}={marker}".encode()
    tracer_set = set(tracers)
    skip = set(exclude) | tracer_set | {os.getpid()}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in skip:
            continue
        st = _proc_stat(pid)
        if st is None or st.state in ("Z", "X", "x") or st.start < born:
            continue
        if st.pgrp == group or st.session == group or _has_marker(pid, needle) or (
                tracer_set and _tracer_of(pid) in tracer_set):
            found.append(pid)
    return found


def started_at(pid: int) -> int:
    """``ProcStat.start`` of a process (0 when it is gone: then nothing is passed over)."""
    st = _proc_stat(pid)
    return st.start if st is not None else 0


def kill_attempt_processes(marker: str, group: int, exclude: Iterable[int] = (),
                           rounds: int = 50, tracers: Iterable[int] = (), born: int = 0) -> int:
    """SIGKILL every process of the attempt until none is left; return how many were killed.
    ``born``: see ``attempt_processes``."""
    killed: set[int] = set()
    tracers = tuple(tracers)
    for _ in range(rounds):
        alive = attempt_processes(marker, group, exclude, tracers, born)
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.01)
    return len(killed)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


def _is_tracer(pid: int, needle: bytes) -> bool:
    """A live (not zombie) process whose command line names the log ``needle``."""
    if not _cmdline_has(pid, needle):
        return False
    st = _proc_stat(pid)
    return st is not None and st.state not in ("Z", "X", "x")


def tracers_of(log_path: Path) -> list[int]:
    needle = str(log_path).encode()
    me = os.getpid()
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and int(name) != me and _is_tracer(int(name), needle)]


def wait_tracer(log_path: Path, pids: Iterable[int] | None = None, timeout: float = 5.0) -> None:
    """Wait until the tracer has written its log and exited (SIGKILL after ``timeout``).

    ``pids``: the tracers found after the agent ended (they exist from before the agent started);
    only those are watched, instead of reading every process's command line each round.
    """
    needle = str(log_path).encode()
    left = list(pids) if pids is not None else tracers_of(log_path)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if _is_tracer(pid, needle)]
        if left:
            time.sleep(0.002)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _ns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _inner_pid(pid: int) -> int | None:
    """A process's pid in its innermost PID namespace (``NSpid``), or None when gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
    except (OSError, ValueError, IndexError):
        return None
    return None


class Waiter:
    """The harness side of the in-sandbox waiter (``Enforcement.init_script``): reads its
    ``ledger-init exit PID RC`` line; ``namespace`` (the box's ``namespace``) names the PID
    namespace the agent ran in, where what it left is counted."""

    def __init__(self, status_fd: int | None,
                 namespace: Callable[[], tuple[int, str] | None] | None = None) -> None:
        self.fd = status_fd
        self._namespace = namespace if namespace is not None else (lambda: None)
        self.buf = bytearray()
        self.exited = False
        self.released = False
        self.inner: int | None = None

    def feed(self, chunk: bytes) -> None:
        if self.exited or len(self.buf) > 4096:
            return
        self.buf += chunk
        m = re.search(rb"ledger-init exit (\d+) (\d+)\n", self.buf)
        if m is not None:
            self.exited = True
            self.inner = int(m.group(1))

    def count_and_kill(self, rounds: int = 50) -> int:
        """Processes alive in the namespace besides its init and the waiter: counted, killed."""
        ns = self._namespace()
        if ns is None:
            return 0
        init, name = ns
        found: set[int] = set()
        for _ in range(rounds):
            alive = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == init or _ns_of(int(entry)) != name:
                    continue
                inner = _inner_pid(int(entry))
                if inner is not None and inner not in (1, self.inner):
                    alive.append(int(entry))
            if not alive:
                break
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            found.update(alive)
            time.sleep(0.005)
        return len(found)


__all__ = ["MARKER_ENV", "ProcStat", "Waiter", "attempt_processes", "kill_attempt_processes",
           "parse_proc_stat", "signal_group", "started_at", "tracers_of", "wait_tracer"]
