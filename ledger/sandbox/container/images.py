"""A task's environment made ready: an image named by tag or digest, or built from a Dockerfile
and its context once and cached by the content digest of both.

The cache key (``build_digest``) is SHA-256 over the engine's name, the image the Dockerfile's
``FROM`` resolves to here (its id), the Dockerfile's bytes and every file of the build context
(sorted by path: path, executable bit, bytes; each length-prefixed). The image is tagged
``localhost/ledger-env:<first 32 hex>`` and labelled with the whole digest, so a second attempt,
run or worker finds it and builds nothing. A Dockerfile whose ``FROM`` names an image this
machine does not have (no public registry is reachable on these machines) is built ``--from``
the base image (podman); the record says so.

What was used is ``Ready.as_data()``, the data of the ``environment.ready`` entry: image id and
digest, engine and version, build time, cached or not, and the build log's tail (bounded).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import EngineFailed, MalformedInput
from ledger.sandbox.container.engine import BASE_IMAGE, Engine
from ledger.textbound import bound_text

ENV_REPO = "localhost/ledger-env"
DIGEST_LABEL = "ledger.build-digest"
LOG_LIMIT = 4096  # characters of a build log kept in the record
BUILD_TIMEOUT_S = 1200.0
_FROM_RE = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.IGNORECASE | re.MULTILINE)
_MAX_CONTEXT_BYTES = 512 * 1024 * 1024


class ImageBuildFailed(EngineFailed):
    """A Dockerfile that did not build; ``log_tail`` is the end of the build's output."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass(frozen=True)
class ImageRequest:
    """What a task names: ``image`` (a reference), or ``dockerfile`` within ``context``."""

    image: str | None = None
    dockerfile: Path | None = None
    context: Path | None = None

    def __post_init__(self) -> None:
        if (self.image is None) == (self.dockerfile is None):
            raise MalformedInput("an environment names exactly one of an image or a Dockerfile")


@dataclass(frozen=True)
class Ready:
    """The image an attempt runs in, and how it came to be."""

    ref: str  # what the engine runs (a local tag, or the task's reference)
    image_id: str
    digest: str
    engine: str
    engine_version: str
    source: str  # "image" or "build"
    cached: bool
    seconds: float  # build or pull time (0 when cached)
    build_digest: str | None = None
    from_image: str | None = None  # the base a missing FROM was replaced by
    log_tail: str = ""

    def as_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "image": self.ref, "image_id": self.image_id, "digest": self.digest, "engine": self.engine,
            "engine_version": self.engine_version, "source": self.source, "cached": self.cached,
            "build_s": round(self.seconds, 3)}
        if self.build_digest:
            out["build_digest"] = self.build_digest
        if self.from_image:
            out["from_image"] = self.from_image
        if self.log_tail:
            out["build_log_tail"] = self.log_tail
        return out


def _context_files(context: Path) -> Iterator[tuple[str, int, Path]]:
    """(posix path, mode, absolute path) of every regular file of the build context, sorted."""
    found: list[tuple[str, int, Path]] = []
    total = 0
    for top, dirs, files in os.walk(context, followlinks=False):
        dirs.sort()
        for name in [*dirs, *files]:
            path = Path(top) / name
            st = path.lstat()
            rel = path.relative_to(context).as_posix()
            if stat.S_ISLNK(st.st_mode):
                raise MalformedInput(f"build context {context}: {rel} is a symbolic link (refused)")
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                found.append((rel, st.st_mode, path))
            elif not stat.S_ISDIR(st.st_mode):
                raise MalformedInput(f"build context {context}: {rel} is not a regular file")
    if total > _MAX_CONTEXT_BYTES:
        raise MalformedInput(f"build context {context}: {total} bytes, more than {_MAX_CONTEXT_BYTES}")
    found.sort(key=lambda item: item[0].encode("utf-8", "surrogateescape"))
    return iter(found)


def build_digest(engine_name: str, base_id: str, dockerfile: Path, context: Path) -> str:
    """The cache key of a build: hex SHA-256 (see the module docstring)."""
    digest = hashlib.sha256()

    def part(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)

    part(b"ledger-env-v1")
    part(engine_name.encode())
    part(base_id.encode())
    part(dockerfile.read_bytes())
    for rel, mode, path in _context_files(context):
        part(rel.encode("utf-8", "surrogateescape"))
        part(b"x" if mode & 0o111 else b"-")
        part(path.read_bytes())
    return digest.hexdigest()


@contextmanager
def _build_lock(key: str) -> Iterator[None]:
    """One build of a digest at a time on this machine (parallel attempts wait for the first)."""
    path = Path(tempfile.gettempdir()) / f"ledger-env-{key[:32]}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _from_image(engine: Engine, dockerfile: Path, base: str) -> tuple[str, str | None]:
    """(id of what FROM resolves to, the base it was replaced by or None)."""
    found = _FROM_RE.search(dockerfile.read_text(encoding="utf-8", errors="replace"))
    if found is None:
        raise ImageBuildFailed(f"{dockerfile.name}: no FROM line", "")
    named = found.group(1)
    if named.lower() != "scratch":
        with contextlib.suppress(EngineFailed):
            return engine.inspect_image(named)["id"], None
    if engine.name != "podman":
        return named, None  # docker pulls it (and fails clearly when it cannot)
    try:
        return engine.inspect_image(base)["id"], base
    except EngineFailed:
        raise EngineFailed(f"{dockerfile.name}: FROM {named} is not on this machine and there is no base "
                           f"image {base} to build from (`python -m ledger.sandbox.container base`)") from None


def _ready(engine: Engine, version: str, ref: str, info: dict[str, Any] | None = None, **kw: Any) -> Ready:
    info = info or engine.inspect_image(ref)
    return Ready(ref=ref, image_id=info["id"], digest=info["digest"] or info["id"], engine=engine.name,
                 engine_version=version, **kw)


def ensure_image(engine: Engine, request: ImageRequest, *, base: str = BASE_IMAGE,
                 timeout: float = BUILD_TIMEOUT_S) -> Ready:
    """The image of ``request`` on this machine: found, pulled, or built once (see the module)."""
    version = engine.version()
    if request.image is not None:
        ref = request.image
        with contextlib.suppress(EngineFailed):
            return _ready(engine, version, ref, engine.inspect_image(ref), source="image", cached=True, seconds=0.0)
        start = time.monotonic()
        pulled = engine.call(["pull", "--quiet", ref], timeout=timeout)
        if not pulled.ok:
            raise EngineFailed(f"pull of {ref} failed: {pulled.last_line()}")
        return _ready(engine, version, ref, source="image", cached=False, seconds=time.monotonic() - start)
    dockerfile, context = Path(request.dockerfile or ""), Path(request.context or "")
    if not dockerfile.is_file():
        raise MalformedInput(f"no Dockerfile {dockerfile}")
    if not context.is_dir():
        raise MalformedInput(f"build context {context} is not a folder")
    base_id, replaced = _from_image(engine, dockerfile, base)
    key = build_digest(engine.name, base_id, dockerfile, context)
    ref = f"{ENV_REPO}:{key[:32]}"
    with _build_lock(key):
        try:
            info: dict[str, Any] | None = engine.inspect_image(ref)
        except EngineFailed:
            info = None
        if info is not None and info["labels"].get(DIGEST_LABEL) == key:
            return _ready(engine, version, ref, info, source="build", cached=True, seconds=0.0, build_digest=key,
                          from_image=replaced)
        argv = ["build", "-f", str(dockerfile), "-t", ref, "--label", f"{DIGEST_LABEL}={key}"]
        if replaced:
            argv += ["--from", replaced]
        start = time.monotonic()
        built = engine.call([*argv, str(context)], timeout=timeout)
        log = bound_text(built.stdout + built.stderr, LOG_LIMIT, tail=1.0, unit="chars")[0]
        if not built.ok:
            raise ImageBuildFailed(f"build of {dockerfile.name} failed: {built.last_line()}", log)
        return _ready(engine, version, ref, source="build", cached=False, seconds=time.monotonic() - start,
                      build_digest=key, from_image=replaced, log_tail=log)
