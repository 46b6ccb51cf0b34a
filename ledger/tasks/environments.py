"""The environment folder a mined task gets (``ledger tasks mine --environment FILE``).

``FILE`` is either a Dockerfile (its name is ``Dockerfile`` or ends in ``.dockerfile``/``Dockerfile``)
or a pip requirements file (any other ``*.txt``). The task folder gets ``environment/``:

    a Dockerfile         copied as ``environment/Dockerfile``; the build context is
                         ``environment/`` (the Dockerfile alone): the worktree is mounted at run
                         time, so the image holds the tools and dependencies, not the code
    requirements.txt     ``environment/requirements.txt`` plus every local file a line of it
                         names (a wheel or sdist beside it, by relative path), and a Dockerfile
                         ``FROM python:3.11-slim`` (built ``--from`` the base image where that
                         image is absent) that installs them with pip

The context is the same for every commit mined with one ``FILE``, so the image is built once
(``ledger.sandbox.container.images`` caches by build digest). ``environment_meta`` is the task's
``environment`` field.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from ledger.errors import UsageError

_LOCAL_LINE = re.compile(r"^\s*(?:-e\s+)?(\./)?([A-Za-z0-9._+-][A-Za-z0-9._+/-]*\.(?:whl|tar\.gz|zip))\s*(?:#.*)?$")
_MAX_FILE = 64 * 1024 * 1024


def kind_of(path: Path) -> str:
    """``dockerfile`` or ``requirements`` (a ``UsageError`` for anything else)."""
    name = path.name
    if name.startswith("Dockerfile") or name.endswith((".dockerfile", "Dockerfile")):
        return "dockerfile"
    if name.endswith(".txt"):
        return "requirements"
    raise UsageError(f"--environment {path}: neither a Dockerfile nor a requirements .txt file")


def _local_files(requirements: Path) -> list[str]:
    """The relative paths of local wheels/sdists the requirements name (each must exist beside it)."""
    found: list[str] = []
    for line in requirements.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _LOCAL_LINE.match(line)
        if m is None:
            continue
        rel = PurePosixPath(m.group(2))
        if rel.is_absolute() or ".." in rel.parts:
            raise UsageError(f"--environment {requirements}: {line.strip()!r} leaves its folder")
        if not (requirements.parent / rel).is_file():
            raise UsageError(f"--environment {requirements}: {rel} is not a file beside it")
        found.append(rel.as_posix())
    return found


def write_environment(folder: Path, source: Path, *, python: str = "3.11") -> dict[str, Any]:
    """Write ``folder/environment/`` from ``source`` (module docstring); returns the ``environment``
    field of the task."""
    source = Path(source)
    if not source.is_file() or source.is_symlink():
        raise UsageError(f"--environment {source}: not a regular file")
    if source.stat().st_size > _MAX_FILE:
        raise UsageError(f"--environment {source}: larger than {_MAX_FILE} bytes")
    env = folder / "environment"
    env.mkdir(parents=True, exist_ok=True)
    if kind_of(source) == "dockerfile":
        shutil.copyfile(source, env / "Dockerfile")
        return {"dockerfile": "environment/Dockerfile", "context": "environment"}
    local = _local_files(source)
    shutil.copyfile(source, env / "requirements.txt")
    for rel in local:
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.parent / rel, env / rel)
    lines = [f"FROM python:{python}-slim", "COPY . /ledger-env/", "WORKDIR /ledger-env",
             "RUN python3 -m pip install --no-cache-dir --break-system-packages -r requirements.txt",
             "WORKDIR /app"]
    (env / "Dockerfile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"dockerfile": "environment/Dockerfile", "context": "environment"}


__all__ = ["kind_of", "write_environment"]
