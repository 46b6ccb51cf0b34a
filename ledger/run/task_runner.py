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
    task_confinement(mode, tasks) with the tasks to validate: a task with an ``environment``
                                 runs in containers of its image (``EnvironmentConfinement``:
                                 built or found once through ``ledger.sandbox.container.images``,
                                 a fresh grading container per command); without a working
                                 engine, a task that ``needs: container`` is ``NothingToRun``
                                 (exit 3, with how to install one) and the others run as before
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import NothingToRun
from ledger.sandbox import registry
from ledger.sandbox.paths import hidden_paths, outside_system
from ledger.sandbox.port import GradingRequest, Sandbox
from ledger.tasks.checks import run_command
from ledger.tasks.runner import ENVIRONMENT_PATH, PLAIN, Confinement, scratch_dir

if TYPE_CHECKING:
    from ledger.tasks.model import Environment, Task

Request = Callable[[Sequence[str], Path, str], GradingRequest]  # (argv, cwd, PATH) -> request


class BoxRunner:
    """Each command in a fresh grading box of ``backend`` (``ledger.tasks.runner.CommandRunner``)."""

    confined = True

    def __init__(self, backend: Sandbox, root: Path, request: Request, *,
                 solution_scratch: Path | None = None,
                 environment: Mapping[str, Any] | None = None) -> None:
        self.backend = backend
        self.name = backend.name
        self.root = root
        self._request = request
        self.solution_scratch = solution_scratch
        self.environment = environment

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


class EnvironmentConfinement:
    """Tasks with an ``environment`` in containers of their image, the others through ``inner``.

    The image is made ready once per task (``images.ensure_image``: found, pulled, or built and
    cached by its build digest; a Dockerfile that does not build raises ``ImageBuildFailed``
    with the log's tail). Each command is a fresh grading container of it: the command's folder,
    ``root/.home`` and ``root/.tmp`` mounted read-write, nothing else of this host but the
    harness's interpreter tree read-only, no network; the runner's ``environment`` is the
    ``environment.ready`` data (without the build log)."""

    def __init__(self, inner: Confinement, engine: Any) -> None:
        self.inner = inner
        self.engine = engine
        self.name = inner.name

    def ready(self, env: Environment, base: Path) -> Any:
        """The image of ``env`` (its paths relative to ``base``, the task folder) made ready."""
        from ledger.sandbox.container import images

        if env.image:
            request = images.ImageRequest(image=env.image)
        else:
            dockerfile = base / str(env.dockerfile)
            request = images.ImageRequest(dockerfile=dockerfile,
                                          context=base / env.context if env.context else dockerfile.parent)
        return images.ensure_image(self.engine, request)

    def in_environment(self, root: Path, env: Environment, base: Path) -> BoxRunner:
        """Commands under ``root`` in fresh grading containers of ``env``'s image (see the class)."""
        from ledger.sandbox.container.backend import ContainerSandbox

        ready = self.ready(env, base)
        backend = ContainerSandbox(self.engine.name).for_image({"image": ready.ref, "workdir": env.workdir})
        root = Path(root).resolve()

        def request(argv: Sequence[str], cwd: Path, path_env: str) -> GradingRequest:
            return GradingRequest(worktree=cwd, home=root / ".home", scratch=scratch_dir(root),
                                  path_env=ENVIRONMENT_PATH)

        data = {k: v for k, v in ready.as_data().items() if k != "build_log_tail"}
        return BoxRunner(backend, root, request, solution_scratch=scratch_dir(root), environment=data)

    def graded(self, root: Path, task: Task) -> Any:
        if task.environment is None:
            return self.inner.graded(root, task)
        return self.in_environment(root, task.environment, task.root)

    def isolated(self, root: Path, readable: Sequence[Path] = ()) -> Any:
        return self.inner.isolated(root, readable)


def _engine_for(tasks: Sequence[Task]) -> Any:
    """The container engine when a container runs here; None when none does and no task
    ``needs: container`` (those then run as the others do); else ``NothingToRun``."""
    from ledger.sandbox.container import engine as engines

    found = engines.probe()
    if found.runs:
        return engines.find_engine(found.engine)
    needing = [t.id for t in tasks if "container" in t.needs]
    if needing:
        shown = ", ".join(needing[:5]) + (f" and {len(needing) - 5} more" if len(needing) > 5 else "")
        raise NothingToRun(f"{shown} need{'s' if len(needing) == 1 else ''} a container: {found.reason}")
    return None


def task_confinement(mode: str, tasks: Sequence[Task] = (), *, environments: str = "") -> Confinement:
    """The confinement of ``ledger tasks`` commands for ``--sandbox mode`` (module docstring).

    ``environments``: the commands will run in environments (``tasks mine --environment``,
    ``tasks import swebench --environment``): ``"required"`` is ``NothingToRun`` without a
    working engine, ``"wanted"`` uses one where it works."""
    status = registry.resolve(mode)
    inner: Confinement = PLAIN if status.mode == "none" else BoxConfinement(status.backend)
    if mode == "none" or not (environments or any(t.environment is not None for t in tasks)):
        return inner
    if environments == "required":
        from ledger.sandbox.container import engine as engines

        return EnvironmentConfinement(inner, engines.require())
    found = _engine_for(tasks)
    return inner if found is None else EnvironmentConfinement(inner, found)


__all__ = ["BoxConfinement", "BoxRunner", "EnvironmentConfinement", "task_confinement", "task_programs"]
