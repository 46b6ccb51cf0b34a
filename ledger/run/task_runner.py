"""The command runner ``ledger tasks`` gets: task commands in boxes of the Sandbox port.

``ledger.tasks`` imports nothing that confines (``ledger.tasks.runner``); this module is the
``Confinement`` its callers pass in, built on ``ledger.sandbox`` (every command gets a fresh
grading box of the resolved backend, closed when the command ends):

    task_confinement(mode)       ``auto`` or a backend name, resolved as ``ledger run
                                 --sandbox`` resolves it (a named backend that cannot work here:
                                 ``NothingToRun``, exit 3); ``none``: ``ledger.tasks.runner.PLAIN``
    .graded(root, task)          ``tasks validate``: the grading box ``ledger run`` grades in: the
                                 command's folder, ``root/.home`` and ``root/.tmp`` writable,
                                 the task folder and the packaged tasks hidden, no network
    .isolated(root, readable)    ``tasks mine`` and the importers: ``root`` writable (a
                                 throw-away folder), ``readable`` read-only, no network
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.sandbox import registry
from ledger.sandbox.paths import hidden_paths, outside_system
from ledger.sandbox.port import GradingRequest, Sandbox
from ledger.tasks.checks import run_command
from ledger.tasks.runner import PLAIN, Confinement, scratch_dir

if TYPE_CHECKING:
    from ledger.tasks.model import Task

Request = Callable[[Sequence[str], Path, str], GradingRequest]  # (argv, cwd, PATH) -> request


class BoxRunner:
    """Each command in a fresh grading box of ``backend`` (``ledger.tasks.runner.CommandRunner``)."""

    confined = True

    def __init__(self, backend: Sandbox, root: Path, request: Request, *,
                 solution_scratch: Path | None = None) -> None:
        self.backend = backend
        self.name = backend.name
        self.root = root
        self._request = request
        self.solution_scratch = solution_scratch

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
            output: Path | None = None) -> tuple[int, float, bool]:
        for folder in (self.root / ".home", scratch_dir(self.root)):
            folder.mkdir(exist_ok=True)
        request = self._request(argv, Path(cwd), env.get("PATH", os.defpath))
        box = self.backend.grading_box(request)
        try:
            confined = box.command(argv, env)
            return run_command(confined.argv, cwd=Path(cwd), env=confined.env, timeout=timeout,
                               output=output, pass_fds=confined.pass_fds,
                               preexec=confined.preexec)
        finally:
            box.close()


def task_programs(task: Task) -> list[str]:
    """Test programs a task names by absolute path outside the system folders (an imported
    task's virtualenv interpreter): the grading box must be able to read their tree."""
    return outside_system((task.test_command if task.graded_by_ids else task.hidden_test_command,
                           task.regression_command))


class BoxConfinement:
    """The ``ledger.tasks.runner.Confinement`` of one Sandbox backend."""

    def __init__(self, backend: Sandbox) -> None:
        self.backend = backend
        self.name = backend.name

    def graded(self, root: Path, task: Task) -> BoxRunner:
        root = Path(root).resolve()
        hidden = tuple(hidden_paths(task.root))
        programs = tuple(task_programs(task))

        def request(argv: Sequence[str], cwd: Path, path_env: str) -> GradingRequest:
            return GradingRequest(worktree=cwd, home=root / ".home", scratch=scratch_dir(root),
                                  hidden=hidden, path_env=path_env, programs=programs)

        return BoxRunner(self.backend, root, request, solution_scratch=scratch_dir(root))

    def isolated(self, root: Path, readable: Sequence[Path] = ()) -> BoxRunner:
        root = Path(root).resolve()
        shown = tuple(str(Path(p).resolve()) for p in readable)

        def request(argv: Sequence[str], cwd: Path, path_env: str) -> GradingRequest:
            return GradingRequest(worktree=root, home=root / ".home", scratch=scratch_dir(root),
                                  cwd=cwd, path_env=path_env, programs=tuple(outside_system([argv])),
                                  readable=shown)

        return BoxRunner(self.backend, root, request)


def task_confinement(mode: str) -> Confinement:
    """The confinement of ``ledger tasks`` commands for ``--sandbox mode`` (module docstring)."""
    status = registry.resolve(mode)
    if status.mode == "none":
        return PLAIN
    return BoxConfinement(status.backend)


__all__ = ["BoxConfinement", "BoxRunner", "task_confinement", "task_programs"]
