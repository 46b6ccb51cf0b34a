"""How ``ledger tasks`` runs a task's commands: a runner its caller passes in.

``ledger tasks`` imports nothing that confines processes. Its callers (the CLI, through
``ledger.run.task_runner``) pass a ``Confinement``; ``PLAIN`` runs commands as ordinary
processes (``--sandbox none``, and every caller that passes nothing).

    Confinement.graded(root, task)       commands as ``ledger run`` grades (``tasks validate``)
    Confinement.isolated(root, readable) commands of untrusted sources in a throw-away folder
                                         (``tasks mine``, the importers)
    with using(runner): ...              every ``run_command`` of ``ledger.tasks.validate`` in
                                         the block goes through ``runner`` (a context variable:
                                         parallel validations in other threads are unaffected)
    with confining(confinement): ...     an entry point's confinement, for the blocks below
    confining_now()                      that confinement (``PLAIN`` outside such a block); one
                                         with ``in_environment`` runs tasks in their images
    with isolated(root, readable): ...   ``using`` the confining block's ``isolated`` runner
    current()                            the runner of the block (``PLAIN.plain()`` outside one)
    solution_for_step(task)              the folder ``$LEDGER_SOLUTION_DIR`` names for the
                                         oracle's step

A ``CommandRunner`` under ``root`` gives its commands ``root/.home`` as HOME and ``root/.tmp``
(``scratch_dir``) as TMPDIR; ``name`` is the backend it confines with (``none`` for none),
``confined`` whether it confines anything, ``solution_scratch`` the folder a solution must be
copied into to be readable to its step (None: the task's own ``solution/`` is), ``environment``
the task's environment its commands run in (the ``environment.ready`` data of the image: a
container of it per command; None: this host's programs). Inside an environment a command's
``python`` is the image's and its ``PATH`` is ``ENVIRONMENT_PATH`` (``environment_of``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.tasks import checks

if TYPE_CHECKING:
    from ledger.tasks.model import Task


ENVIRONMENT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def scratch_dir(root: Path) -> Path:
    """The TMPDIR of commands run under ``root`` (writable to them in every runner)."""
    return root / ".tmp"


class CommandRunner(Protocol):
    """Runs one command at a time: ``run`` returns (exit code, seconds, timed out) like
    ``ledger.tasks.checks.run_command`` (127: could not start, 124: timed out)."""

    name: str
    confined: bool
    solution_scratch: Path | None
    environment: Mapping[str, Any] | None

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
            output: Path | None = None) -> tuple[int, float, bool]: ...


class Confinement(Protocol):
    """Makes the runners of one ``ledger tasks`` command (see the module docstring)."""

    name: str

    def graded(self, root: Path, task: Task) -> CommandRunner: ...

    def isolated(self, root: Path, readable: Sequence[Path] = ()) -> CommandRunner: ...


class PlainRunner:
    """Ordinary processes: nothing confined, the command and its environment unchanged."""

    name = "none"
    confined = False
    solution_scratch: Path | None = None
    environment: Mapping[str, Any] | None = None

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
            output: Path | None = None) -> tuple[int, float, bool]:
        return checks.run_command(argv, cwd=cwd, env=env, timeout=timeout, output=output)


class Plain:
    """The ``Confinement`` that confines nothing (``--sandbox none``)."""

    name = "none"
    _runner = PlainRunner()

    def plain(self) -> PlainRunner:
        return self._runner

    def graded(self, root: Path, task: Task) -> PlainRunner:
        return self._runner

    def isolated(self, root: Path, readable: Sequence[Path] = ()) -> PlainRunner:
        return self._runner


PLAIN = Plain()
_CURRENT: contextvars.ContextVar[CommandRunner | None] = contextvars.ContextVar(
    "ledger_tasks_runner", default=None)


@contextlib.contextmanager
def using(runner: CommandRunner) -> Iterator[CommandRunner]:
    """Within the block, task commands run through ``runner``."""
    token = _CURRENT.set(runner)
    try:
        yield runner
    finally:
        _CURRENT.reset(token)


_CONFINING: contextvars.ContextVar[Confinement | None] = contextvars.ContextVar(
    "ledger_tasks_confinement", default=None)


@contextlib.contextmanager
def confining(confinement: Confinement) -> Iterator[Confinement]:
    """Within the block, ``isolated`` makes its runners with ``confinement``."""
    token = _CONFINING.set(confinement)
    try:
        yield confinement
    finally:
        _CONFINING.reset(token)


def confining_now() -> Confinement:
    """The confinement of the confining block (``PLAIN`` outside one)."""
    return _CONFINING.get() or PLAIN


@contextlib.contextmanager
def isolated(root: Path, readable: Sequence[Path] = ()) -> Iterator[CommandRunner]:
    """``using`` the ``isolated`` runner of the confining block's confinement (``PLAIN``'s
    outside one) under ``root``, with ``readable`` shown read-only; yields the runner."""
    confinement = _CONFINING.get() or PLAIN
    with using(confinement.isolated(root, readable)) as active:
        yield active


def current() -> CommandRunner:
    runner = _CURRENT.get()
    return runner if runner is not None else PLAIN.plain()


def environment_of(active: CommandRunner | None = None) -> Mapping[str, Any] | None:
    """The environment the runner (the block's by default) runs its commands in, or None."""
    return getattr(active if active is not None else current(), "environment", None)


@contextlib.contextmanager
def solution_for_step(task: Task) -> Iterator[Path]:
    """The folder ``$LEDGER_SOLUTION_DIR`` names for the oracle's step: the task's own
    ``solution/``, except where the runner cannot show the task folder (a graded runner hides
    it): there, a copy in the runner's ``solution_scratch`` (its regular files only: a link is
    refused), made for this step and removed when it ends, so no later step (the hidden tests,
    the graded code) can see it."""
    scratch = current().solution_scratch
    if scratch is None:
        yield task.solution_dir
        return
    from ledger.tasks.loader import iter_files

    scratch.mkdir(parents=True, exist_ok=True)
    copy = Path(tempfile.mkdtemp(prefix="solution-", dir=scratch))
    try:
        for rel, path in iter_files(task.solution_dir):
            target = copy / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target, follow_symlinks=False)
            os.chmod(target, 0o755 if os.stat(path, follow_symlinks=False).st_mode & 0o111 else 0o644)
        os.chmod(copy, 0o755)
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


__all__ = ["ENVIRONMENT_PATH", "PLAIN", "CommandRunner", "Confinement", "Plain", "PlainRunner", "confining",
           "confining_now", "current", "environment_of", "isolated", "scratch_dir", "solution_for_step", "using"]
