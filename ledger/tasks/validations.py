"""What ``ledger tasks validate`` found, kept per task: the validation record.

``ledger tasks validate`` writes one record per task it validated to
``<ledger>/validated/<tier>/<task id>.json`` (``LedgerHome.validated_dir``), replacing the one
before (the journal is not touched: a validation is no run). A record holds:

    task_id, tier, task_hash   the task as validated (its folder's hash)
    ok                         every check passed
    sandbox                    the backend its commands ran in
    checks                     {name: passed} (details are in the command's output, not here)
    validated_at               when (ISO 8601 UTC, given by the caller: time is a parameter)
    environment                for a task validated in its environment: the ``environment.ready``
                               data of the image (``image``, ``image_id``, ``digest``, ``engine``,
                               ``build_digest``, ...) without the build log; absent otherwise

``validated_image(folder, task)`` is what ``ledger run`` compares an attempt's image against
(``--allow-image-change``): the ``environment`` of the last record of exactly this task (same
hash) that passed, else None. The image's identity is its ``digest`` (and ``image_id``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import MalformedInput

if TYPE_CHECKING:
    from ledger.tasks.model import Task
    from ledger.tasks.validate import ValidationResult

RECORD_VERSION = 1
_SAFE = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
_MAX_RECORD_BYTES = 256 * 1024


@dataclass(frozen=True)
class ValidationRecord:
    task_id: str
    tier: str
    task_hash: str
    ok: bool
    sandbox: str
    validated_at: str
    checks: dict[str, bool] = field(default_factory=dict)
    environment: dict[str, Any] | None = None

    @property
    def image_digest(self) -> str | None:
        return str(self.environment["digest"]) if self.environment and self.environment.get("digest") else None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": RECORD_VERSION, "task_id": self.task_id, "tier": self.tier,
                               "task_hash": self.task_hash, "ok": self.ok, "sandbox": self.sandbox,
                               "validated_at": self.validated_at, "checks": dict(self.checks)}
        if self.environment:
            out["environment"] = dict(self.environment)
        return out


def record_path(folder: Path, tier: str, task_id: str) -> Path:
    for part in (tier, task_id):
        if not _SAFE.match(part) or part in (".", ".."):
            raise MalformedInput(f"cannot record a validation under the name {part!r}")
    return Path(folder) / tier / f"{task_id}.json"


def record_of(result: ValidationResult, task: Task, *, at: str) -> ValidationRecord:
    env = {k: v for k, v in (result.environment or {}).items() if k != "build_log_tail"} or None
    return ValidationRecord(task_id=task.id, tier=task.tier, task_hash=task.hash, ok=result.ok,
                            sandbox=result.sandbox, validated_at=at,
                            checks={c.name: c.passed for c in result.checks}, environment=env)


def write_records(folder: Path, results: Iterable[ValidationResult], tasks: Iterable[Task], *,
                  at: str) -> list[Path]:
    """Write (replace) the record of every result whose task is in ``tasks``; the paths written."""
    by_id = {t.id: t for t in tasks}
    written: list[Path] = []
    for result in results:
        task = by_id.get(result.task_id)
        if task is None:
            continue
        path = record_path(folder, task.tier, task.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(record_of(result, task, at=at).as_dict(), indent=2, sort_keys=True) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=".record-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
        written.append(path)
    return written


def _parse(data: Mapping[str, Any], where: Path) -> ValidationRecord:
    try:
        env = data.get("environment")
        return ValidationRecord(
            task_id=str(data["task_id"]), tier=str(data["tier"]), task_hash=str(data["task_hash"]),
            ok=data["ok"] is True, sandbox=str(data["sandbox"]), validated_at=str(data["validated_at"]),
            checks={str(k): v is True for k, v in dict(data.get("checks") or {}).items()},
            environment=dict(env) if isinstance(env, Mapping) else None)
    except (KeyError, TypeError, ValueError):
        raise MalformedInput(f"{where}: not a validation record") from None


def read_record(folder: Path, task: Task) -> ValidationRecord | None:
    """The last record of ``task``'s tier and id (whatever its hash), or None when there is none."""
    path = record_path(folder, task.tier, task.id)
    try:
        if path.is_symlink() or path.stat().st_size > _MAX_RECORD_BYTES:
            raise MalformedInput(f"{path}: not a validation record (a link, or too large)")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedInput(f"{path}: not a validation record") from None
    if not isinstance(data, dict):
        raise MalformedInput(f"{path}: not a validation record")
    return _parse(data, path)


def validated_image(folder: Path, task: Task) -> dict[str, Any] | None:
    """The ``environment`` data of the last passing validation of exactly ``task`` (its hash), or
    None (never validated in its environment, failed, or the task changed since)."""
    record = read_record(folder, task)
    if record is None or not record.ok or record.task_hash != task.hash:
        return None
    return record.environment


__all__ = ["RECORD_VERSION", "ValidationRecord", "read_record", "record_of", "record_path",
           "validated_image", "write_records"]
