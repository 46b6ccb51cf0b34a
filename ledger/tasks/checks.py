"""The one process runner and signal check that both ``ledger tasks validate`` and a run use, so
a task is validated exactly the way it runs.

    run_command(argv, cwd=, env=, timeout=, output=)  its own process group, killed on every exit
                                                       path; (exit code, seconds, timed out)
    python_argv(argv)                                  ``python ...`` -> this interpreter
    signal_argv(signal)                                a command signal's argv (/bin/sh -c TEXT)
    inside(worktree, rel)                              the worktree-escape check
    check_file_signal(signal, worktree)                path_exists / file_contains, escape-checked

``SIGNAL_TIMEOUT_S`` is the run's default time limit for tests and signals (``--test-timeout``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal as _signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ledger.safefs import read_prefix
from ledger.spawn import spawning, wait_exit
from ledger.tasks.model import Signal

SIGNAL_TIMEOUT_S = 600.0
EXIT_TIMEOUT = 124  # what a timed-out command reports, as timeout(1) does
FILE_LIMIT = 16 * 1024 * 1024  # bytes of a file a file_contains signal searches
_PY_NAMES = frozenset({"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"})


def python_argv(argv: Sequence[str]) -> list[str]:
    """``python ...`` runs with the harness's own interpreter (the one with pytest)."""
    out = list(argv)
    if out and out[0] in _PY_NAMES:
        out[0] = sys.executable
    return out


def signal_argv(sig: Signal) -> list[str]:
    """The argv of a command signal: a string runs under /bin/sh, a list as given."""
    if isinstance(sig.command, str):
        return ["/bin/sh", "-c", sig.command]
    return python_argv(sig.command or ())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, _signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)


def run_command(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
    output: Path | None = None, pass_fds: Sequence[int] = (),
    preexec: Callable[[], None] | None = None,
) -> tuple[int, float, bool]:
    """Run ``argv`` as its own process group; (exit code, seconds, timed out).

    A signal death is reported as 128 + signal number, a timeout as 124, a program that cannot
    start as 127. Output goes to ``output`` (a file outside the worktree) or nowhere. The group is
    killed on every exit path. ``pass_fds``: descriptors the process inherits (the outcome
    channel's write end, ``ledger.sandbox.outcomes``; a sandbox's status pipe). ``preexec`` runs
    between fork and exec (``Enforcement.preexec``: the limits' cgroups and rlimits).
    """
    start = time.perf_counter()
    sink = open(output, "wb") if output is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc: subprocess.Popen[bytes] | None = None
        try:
            with spawning():  # a stop arriving during the fork is raised after it, not lost
                proc = subprocess.Popen(
                    list(argv), cwd=cwd if cwd.is_dir() else None, env=dict(env),
                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                    start_new_session=True, pass_fds=tuple(pass_fds), preexec_fn=preexec,
                )
        except BaseException as exc:
            if proc is not None:
                _kill_group(proc)
                raise
            if not isinstance(exc, OSError | subprocess.SubprocessError):
                raise
            if output is not None:
                Path(output).write_text(
                    f"cannot start {argv[0]}: {getattr(exc, 'strerror', None) or exc}\n")
            return 127, time.perf_counter() - start, False
        timed_out = False
        try:
            code = wait_exit(proc, timeout)  # not Popen.wait's 50 ms polling
        except subprocess.TimeoutExpired:
            timed_out = True
            code = EXIT_TIMEOUT
        finally:
            _kill_group(proc)  # also reaps anything the command left behind
        if not timed_out and code < 0:
            code = 128 - code
        return code, time.perf_counter() - start, timed_out
    finally:
        if output is not None:
            sink.close()  # type: ignore[union-attr]


def inside(worktree: Path, rel: str) -> Path | None:
    """``worktree / rel`` resolved, or None when it leaves the worktree (``..``, a symlink)."""
    target = (worktree / rel).resolve()
    root = worktree.resolve()
    return target if target == root or root in target.parents else None


def check_file_signal(sig: Signal, worktree: Path) -> tuple[bool, str]:
    """(passed, detail) of a ``path_exists`` or ``file_contains`` signal in ``worktree``."""
    target = inside(worktree, sig.path or "")
    if sig.kind == "path_exists":
        passed = target is not None and target.exists()
        return passed, "exists" if passed else ("escapes the worktree" if target is None else "missing")
    if sig.kind == "file_contains":
        if target is None:
            return False, "escapes the worktree"
        data = read_prefix(target.parent, target.name, FILE_LIMIT)  # a FIFO or device: None
        if data is None:
            return False, "missing"
        text = data.decode("utf-8", "replace")
        found = re.search(sig.pattern or "", text, re.MULTILINE) is not None
        return found, "pattern found" if found else "pattern not found"
    return False, f"unknown signal kind {sig.kind!r}"
