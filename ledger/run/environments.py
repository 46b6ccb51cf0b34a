"""Task environments of a run: which sandbox backend each task runs in, and each task's image
made ready once, before any attempt (docs/ENVIRONMENTS.md).

    task_backends(tasks, requested)   {task id: backend name}; ``auto`` is bubblewrap (or none)
                                      for tasks without an ``environment`` and the container
                                      engine for tasks with one; a task with an environment and
                                      no engine that works here is ``NothingToRun`` (exit 3, how
                                      to install)
    prepare(tasks, backends, allow)   {task id: ``TaskEnvironment``}: the image of every task that
                                      runs in a container, built or pulled once (the cache of
                                      ``ledger.sandbox.container.images``), or why it could not be
                                      (``failed``: the task's attempts end as harness errors, the
                                      other tasks run)

The coordinator journals each ``TaskEnvironment`` (``entry()``: ``environment.ready`` or
``environment.failed``) after ``run.started`` and before the first attempt; the attempt gets
``ready`` as its ``image`` setting and runs in that image id, whose digest its boxes record.

A task whose environment names the digest it was validated with (``environment.digest``) whose
image now has another digest is refused (``TaskError``,
exit 2) unless ``allow_image_change``; the record says it was allowed (``image_changed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import EngineFailed, MalformedInput, NothingToRun, TaskError
from ledger.tasks.model import Task

READY, FAILED = "environment.ready", "environment.failed"


@dataclass(frozen=True)
class TaskEnvironment:
    """One task's image as the run made it ready, or why it could not (``error``)."""

    task_id: str
    backend: str
    ready: Mapping[str, Any] | None = None  # ``images.Ready.as_data()`` (+ image_changed)
    error: str | None = None  # one line: the build or pull that failed
    log_tail: str = ""

    @property
    def failed(self) -> bool:
        return self.ready is None

    def entry(self) -> tuple[str, dict[str, Any]]:
        """(kind, data) of the entry the coordinator journals for this task."""
        if self.ready is not None:
            return READY, {"backend": self.backend, **self.ready}
        data: dict[str, Any] = {"backend": self.backend, "error": self.error}
        if self.log_tail:
            data["build_log_tail"] = self.log_tail
        return FAILED, data


def task_backends(tasks: Sequence[Task], requested: str) -> dict[str, str]:
    """The backend of each task (see the module docstring). ``requested``: ``--sandbox``."""
    from ledger.sandbox import registry

    with_env = [t for t in tasks if t.environment is not None]
    plain = registry.resolve(requested).mode if len(with_env) < len(tasks) else None
    engine: str | None = None
    if with_env:
        try:
            status = registry.resolve_for(requested, environment=True)
        except NothingToRun as exc:
            names = ", ".join(t.id for t in with_env[:5]) + (" ..." if len(with_env) > 5 else "")
            raise NothingToRun(f"task(s) {names} run in their environment: {exc}") from None
        engine = status.mode
    out: dict[str, str] = {}
    for task in tasks:
        mode = engine if task.environment is not None and engine is not None else plain
        if task.environment is not None and not registry.is_engine(str(mode)) and "container" in task.needs:
            raise NothingToRun(f"task {task.id} needs a container and --sandbox {requested} runs none: "
                               "use --sandbox auto, container, podman or docker")
        out[task.id] = str(mode)
    return out


def _request(task: Task) -> Any:
    from ledger.sandbox.container.images import ImageRequest

    env = task.environment
    assert env is not None
    if env.image:
        return ImageRequest(image=env.image)
    return ImageRequest(dockerfile=task.root / str(env.dockerfile),
                        context=task.root / str(env.context or "."))


def validated_digest(task: Task, validated_dir: Path | None) -> str | None:
    """The image digest of the last passing ``ledger tasks validate`` of exactly this task
    (``ledger.tasks.validations.validated_image``), or None (never validated in its image)."""
    if validated_dir is None:
        return None
    from ledger.tasks.validations import validated_image

    found = validated_image(validated_dir, task)
    digest = found.get("digest") if found else None
    return str(digest) if digest else None


def _one(task: Task, backend: str, allow_image_change: bool, validated_dir: Path | None) -> TaskEnvironment:
    from ledger.sandbox.container import engine as engines
    from ledger.sandbox.container.images import ImageBuildFailed, ensure_image

    found = engines.find_engine(backend)
    if found is None:
        raise NothingToRun(f"task {task.id}: {backend} is not on PATH; {engines.INSTALL_HINT}")
    try:
        ready = ensure_image(found, _request(task)).as_data()
    except ImageBuildFailed as exc:
        return TaskEnvironment(task.id, backend, error=str(exc), log_tail=exc.log_tail)
    except (EngineFailed, MalformedInput) as exc:
        return TaskEnvironment(task.id, backend, error=str(exc))
    expected = validated_digest(task, validated_dir)
    if expected is not None and expected not in (ready["digest"], ready["image_id"]):
        if not allow_image_change:
            raise TaskError(f"task {task.id}: its image is {ready['digest']}, not {expected} it was "
                            "validated with (refused; --allow-image-change runs it, and records that)")
        ready = {**ready, "image_changed": {"validated": expected, "allowed": True}}
    return TaskEnvironment(task.id, backend, ready=ready)


def prepare(tasks: Sequence[Task], backends: Mapping[str, str], *, allow_image_change: bool = False,
            validated_dir: Path | None = None) -> dict[str, TaskEnvironment]:
    """Every containerised task's image made ready (see the module docstring); in task order."""
    from ledger.sandbox import registry

    out: dict[str, TaskEnvironment] = {}
    for task in tasks:
        backend = backends.get(task.id, "none")
        if task.environment is not None and registry.is_engine(backend):
            out[task.id] = _one(task, backend, allow_image_change, validated_dir)
    return out


__all__ = ["FAILED", "READY", "TaskEnvironment", "prepare", "task_backends", "validated_digest"]
