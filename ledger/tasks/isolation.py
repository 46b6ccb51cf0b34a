"""Run the test commands of ``mine`` and the importers in the isolation sandbox when this host has
one (``ledger.sandbox``, bubblewrap): no network, the system and the interpreter read-only, only
the throw-away folder of the check writable, its own HOME and TMPDIR. Without bubblewrap they run
as ordinary processes, as ``ledger tasks validate --sandbox none`` runs them. ``graded`` runs them
in the grading sandbox of ``ledger run`` instead (``tasks validate --sandbox auto|bwrap``).

    with isolated(root):        # every validate.run_command inside runs sandboxed under root
        validate_task(task)

The switch is a context variable, so parallel validations in other threads are unaffected.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.tasks.model import Task

# (writable root, extra read-only paths) while inside ``isolated``.
_ROOT: contextvars.ContextVar[tuple[Path, tuple[str, ...]] | None] = contextvars.ContextVar(
    "ledger_tasks_sandbox", default=None)
# The task graded while inside ``graded``: commands run in the run's grading sandbox.
_GRADED: contextvars.ContextVar[tuple[Path, Task] | None] = contextvars.ContextVar(
    "ledger_tasks_grading_sandbox", default=None)


@functools.cache
def available() -> bool:
    """Whether bubblewrap works on this host (probed once per process)."""
    from ledger.sandbox import sandbox_status

    return sandbox_status("auto").mode == "bwrap"


@contextlib.contextmanager
def isolated(root: Path, *, readable: Sequence[Path] = (), enabled: bool = True) -> Iterator[bool]:
    """Within the block, task commands run sandboxed with ``root`` (a fresh folder) writable and
    ``readable`` (e.g. the task folder whose solution script runs) read-only. Yields whether they
    really are (``enabled`` and bubblewrap works)."""
    on = enabled and available()
    token = _ROOT.set((Path(root).resolve(), tuple(str(Path(p).resolve()) for p in readable)) if on else None)
    try:
        yield on
    finally:
        _ROOT.reset(token)


@contextlib.contextmanager
def graded(root: Path, task: Task) -> Iterator[None]:
    """Within the block, task commands run exactly as ``ledger run`` grades an attempt: in the
    grading sandbox (``ledger.sandbox.setup.grading_policy``) with the command's folder, and
    ``root``'s ``.home`` and ``.tmp`` writable, the task folder and the packaged tasks hidden, no
    network. The caller has resolved ``--sandbox`` to ``bwrap`` (``sandbox_status``)."""
    token = _GRADED.set((Path(root).resolve(), task))
    try:
        yield
    finally:
        _GRADED.reset(token)


@contextlib.contextmanager
def solution_for_step(task: Task) -> Iterator[Path]:
    """The folder ``$LEDGER_SOLUTION_DIR`` names for the oracle's step: the task's own
    ``solution/``, except inside ``graded``, whose sandbox hides the task folder: there, a copy in
    the sandbox's scratch folder (its regular files only: a link is refused), made for this step
    and removed when it ends, so no later step (the hidden tests, the graded code) can see it."""
    grading = _GRADED.get()
    if grading is None:
        yield task.solution_dir
        return
    import shutil
    import tempfile

    from ledger.tasks.loader import iter_files

    root, _task = grading
    tmp = scratch_dir(root)
    tmp.mkdir(parents=True, exist_ok=True)
    copy = Path(tempfile.mkdtemp(prefix="solution-", dir=tmp))
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


def scratch_dir(root: Path) -> Path:
    """The TMPDIR of sandboxed commands under ``root`` (writable inside the grading sandbox)."""
    return root / ".tmp"


def _grading_wrap(root: Path, task: Task, argv: Sequence[str], cwd: Path,
                  env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    # The very calls ledger.run.attempt._grade_isolated makes, for the same policy.
    from ledger.run.attempt import _task_programs
    from ledger.sandbox import bwrap_command
    from ledger.sandbox.setup import grading_policy, hidden_paths, sandbox_env

    home, tmp = root / ".home", scratch_dir(root)
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    policy = grading_policy(worktree=Path(cwd), home=home, scratch=tmp, hidden=hidden_paths(task.root),
                            path_env=env.get("PATH", os.defpath), programs=_task_programs(task))
    return bwrap_command(policy, list(argv)), sandbox_env(env, home=home, scratch=tmp)


def wrap(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, env) to run ``argv`` in ``cwd``: sandboxed when inside ``graded`` or ``isolated``,
    else unchanged."""
    grading = _GRADED.get()
    if grading is not None:
        return _grading_wrap(*grading, argv, cwd, env)
    current = _ROOT.get()
    if current is None:
        return list(argv), dict(env)
    root, extra = current
    from ledger.sandbox import bwrap_command
    from ledger.sandbox.policy import PolicyRequest, build_policy
    from ledger.sandbox.setup import interpreter_paths, path_dirs, sandbox_env

    home, tmp = root / ".home", root / ".tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    path_env = env.get("PATH", os.defpath)
    program = argv[0] if argv and argv[0].startswith("/") else None
    policy = build_policy(PolicyRequest(
        cwd=cwd, writable=[root], path_env=path_env,
        programs=[program] if program and not program.startswith(("/usr/", "/bin/", "/sbin/", "/lib")) else [],
        readable=[*interpreter_paths(), *path_dirs(path_env, []), *extra], network="none", purpose="grading",
    ))
    return bwrap_command(policy, list(argv)), sandbox_env(env, home=home, scratch=tmp)
