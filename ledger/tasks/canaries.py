"""A task's canaries on disk: the hidden test files read, mutants written, signals built.

The derivation itself is pure (``attest.canary``); this module reads a task's hidden test files,
writes the files that hold test canaries over the installed hidden tests, and turns a signal
canary into the ``Signal`` that runs it. Used by the attempt's grading (ledger/run/attempt.py)
and by ``ledger tasks validate`` (soundness).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from attest import canary as cn
from ledger.tasks.model import Signal, Task

MAX_FILE_BYTES = 512 * 1024


def unsupported(task: Task) -> str | None:
    """Why a task gets no canaries at all (None: it may)."""
    if task.hidden_tests_patch is not None or task.graded_by_ids:
        return "hidden tests are a patch graded by test ids (canaries not supported yet)"
    if task.grading is not None:
        return None  # test canaries: one more run of its command over them (grade.own_command)
    if not any("pytest" in a for a in task.hidden_test_command):
        return "the hidden test command is not pytest"
    return None


def hidden_files(task: Task) -> list[tuple[str, str]]:
    """``(path inside the hidden folder, text)`` of every hidden Python test file."""
    out: list[tuple[str, str]] = []
    root = task.tests_dir
    if not root.is_dir():
        return out
    for path in sorted(root.rglob("*.py")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            out.append((path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def derive_for(task: Task, key: bytes, *, every: bool = False) -> cn.Derived:
    """The canaries of an attempt on ``task`` under ``key`` (``every``: one per site, for
    ``tasks validate``)."""
    why = unsupported(task)
    if why is not None:
        return cn.Derived((), {}, 0, why)
    many = 10_000 if every else None
    return cn.derive(hidden_files(task), task.signals, key=key, task_hash=task.hash,
                     max_tests=many or cn.MAX_TEST_CANARIES,
                     max_signals=many or cn.MAX_SIGNAL_CANARIES, every=every)


def install(derived: cn.Derived, task: Task, worktree: Path) -> None:
    """Write the files holding test canaries over the hidden tests installed in ``worktree``."""
    folder = worktree / task.hidden_tests_dir
    for rel, text in derived.files.items():
        target = folder / rel
        if target.is_symlink():
            target.unlink()
        target.write_text(text, encoding="utf-8")


def alone(derived: cn.Derived, canary: cn.Canary) -> cn.Derived:
    """``derived`` with only ``canary``'s test copy in its file (the other copies taken out):
    ``tasks validate`` runs a task graded by its own command once per test canary."""
    text = derived.files[canary.file]
    for other in derived.tests:
        if other is not canary and other.file == canary.file:
            text = text.replace("\n\n\n" + other.code, "", 1)
    return cn.Derived((canary,), {canary.file: text}, 1, None)


MAX_VALIDATE_RUNS = 12
"""At most this many test canaries of a task graded by its own command are run by validate."""


def signal_of(canary: cn.Canary, task: Task) -> Signal:
    """The signal that runs a signal canary: its original with the mutated ``-c`` code."""
    index = int(canary.name.split(":", 1)[1])
    sig = task.signals[index]
    cmd = tuple(sig.command) if isinstance(sig.command, tuple | list) else ()
    return dataclasses.replace(sig, command=(*cmd[:2], canary.code))
