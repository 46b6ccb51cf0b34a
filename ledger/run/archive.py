"""Content-addressed task archives: how a task folder travels to a machine that runs an attempt.

    coordinator: pack_task(folder) -> TaskArchive(sha256, data)       (deterministic tar)
    worker:      materialize(cache_dir, sha256, fetch) -> task folder  (verified before use)

The archive is an uncompressed POSIX tar holding one top-level folder (the task folder's name)
and, below it, exactly the files the task hash covers (``ledger.tasks.loader.iter_files``:
caches skipped, symlinks refused), in UTF-8 byte order of their paths. Every member is a regular
file with mode 0644 or 0755 (the executable bit is kept), mtime 0, owner 0:0 and no user or group
names, so the same folder gives the same bytes on any machine, whatever its clock, umask or file
system order. The archive's name is the hex SHA-256 of those bytes.

On the worker, ``materialize`` keeps one unpacked copy per hash under ``cache_dir/<sha256>/``.
Fresh bytes are hashed before anything is written; a cached copy is re-packed and re-hashed
before each use, and a copy that no longer matches (edited, truncated, a file added) is moved
aside and unpacked again. Unpacking never uses ``tarfile.extract``: members are read one by one,
and anything but a regular file at a clean relative path inside the one top folder is refused
(absolute paths, ``..``, links, devices, duplicates), even when the hash matched.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
import shutil
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ledger.errors import MalformedInput, TaskError, VerificationError

MAX_ARCHIVE_BYTES = 256 * 1024 * 1024  # a task folder larger than this is not a golden task
MAX_MEMBERS = 100_000
_CHUNK = 1024 * 1024
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class TaskArchive:
    """The bytes of one task folder's archive and their hex SHA-256 (its name)."""

    sha256: str
    data: bytes
    name: str  # the top-level folder inside the archive (the task folder's name)

    @property
    def size(self) -> int:
        return len(self.data)


# --------------------------------------------------------------------------- packing


def _check_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise TaskError(f"task folder name {name!r} cannot name an archive's top folder")
    return name


def _members(folder: Path) -> list[tuple[str, Path, int]]:
    """(relative path, absolute path, mode) of every file the task hash covers, in order."""
    from ledger.tasks.loader import iter_files

    out = []
    for rel, path in iter_files(folder):
        st = path.lstat()
        mode = 0o755 if st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH) else 0o644
        out.append((rel, path, mode))
    return out


class _HashingSink(io.RawIOBase):
    """A write-only file that hashes what is written and optionally keeps it."""

    def __init__(self, keep: bool) -> None:
        self.digest = hashlib.sha256()
        self.buffer: io.BytesIO | None = io.BytesIO() if keep else None
        self.size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data: bytes) -> int:  # type: ignore[override]
        view = memoryview(data)
        self.digest.update(view)
        if self.buffer is not None:
            self.buffer.write(view)
        self.size += len(view)
        if self.size > MAX_ARCHIVE_BYTES:
            raise TaskError(f"task folder is larger than {MAX_ARCHIVE_BYTES} bytes as an archive")
        return len(view)


def _write_tar(folder: Path, sink: IO[bytes]) -> str:
    folder = Path(folder)
    if not folder.is_dir():
        raise TaskError(f"{folder}: not a task folder")
    top = _check_name(folder.resolve().name)
    with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT,
                      encoding="utf-8") as tar:
        for rel, path, mode in _members(folder):
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.type = tarfile.REGTYPE
            info.mode = mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as fh:
                info.size = os.fstat(fh.fileno()).st_size
                tar.addfile(info, fh)
    return top


def pack_task(folder: Path) -> TaskArchive:
    """The deterministic archive of a task folder (same folder content, same bytes)."""
    sink = _HashingSink(keep=True)
    top = _write_tar(folder, sink)  # type: ignore[arg-type]
    assert sink.buffer is not None
    return TaskArchive(sha256=sink.digest.hexdigest(), data=sink.buffer.getvalue(), name=top)


def archive_digest(folder: Path) -> str:
    """The hex SHA-256 that ``pack_task(folder)`` would have, without keeping the bytes."""
    sink = _HashingSink(keep=False)
    _write_tar(folder, sink)  # type: ignore[arg-type]
    return sink.digest.hexdigest()


# --------------------------------------------------------------------------- checking and unpacking


def check_sha256(value: str) -> str:
    """A lowercase 64-hex-digit SHA-256, or MalformedInput (it names a cache directory)."""
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX:
        raise MalformedInput(f"not a hex SHA-256 archive name: {value!r}")
    return value


def verify_archive(data: bytes, sha256: str) -> None:
    """None if ``data`` hashes to ``sha256``; VerificationError ``task-archive`` otherwise."""
    computed = hashlib.sha256(data).hexdigest()
    if computed != check_sha256(sha256):
        raise VerificationError("task-archive", "task archive bytes do not match their name",
                                expected=sha256, computed=computed)


def _member_path(name: str, top: str | None) -> tuple[str, PurePosixPath]:
    """(top folder, path below it) of a member name, or MalformedInput."""
    if "\\" in name or "\x00" in name:
        raise MalformedInput(f"task archive member {name!r}: bad character in path")
    path = PurePosixPath(name)
    parts = path.parts
    if path.is_absolute() or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
        raise MalformedInput(f"task archive member {name!r}: not a clean relative path")
    if path.as_posix() != name:
        raise MalformedInput(f"task archive member {name!r}: not in canonical form")
    if top is not None and parts[0] != top:
        raise MalformedInput(f"task archive member {name!r}: outside the top folder {top!r}")
    return parts[0], PurePosixPath(*parts[1:])


def _extract(data: bytes, dest: Path) -> str:
    """Write the archive's files under ``dest``; returns the top folder name."""
    top: str | None = None
    seen: set[str] = set()
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:", encoding="utf-8") as tar:
            for member in tar:
                if not member.isreg():
                    raise MalformedInput(
                        f"task archive member {member.name!r}: only regular files are allowed")
                first, rel = _member_path(member.name, top)
                top = _check_archive_top(first) if top is None else top
                if member.name in seen:
                    raise MalformedInput(f"task archive member {member.name!r} appears twice")
                seen.add(member.name)
                if len(seen) > MAX_MEMBERS:
                    raise MalformedInput(f"task archive has more than {MAX_MEMBERS} members")
                source = tar.extractfile(member)
                if source is None:
                    raise MalformedInput(f"task archive member {member.name!r} has no data")
                target = dest / top / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o755 if member.mode & 0o111 else 0o644)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
    except tarfile.TarError as exc:
        raise MalformedInput(f"task archive is not a readable tar file: {exc}") from None
    except OSError as exc:  # a file where a folder must go, or a name already written
        raise MalformedInput(f"task archive member collides with another: {exc.filename}") from None
    if top is None:
        raise MalformedInput("task archive is empty")
    return top


def _check_archive_top(name: str) -> str:
    try:
        return _check_name(name)
    except TaskError as exc:
        raise MalformedInput(str(exc)) from None


def unpack_archive(data: bytes, sha256: str, dest: Path) -> Path:
    """Verify ``data`` against ``sha256``, unpack it into the empty or new directory ``dest``,
    and return the task folder (``dest/<top>``). The unpacked folder re-packs to the same hash."""
    verify_archive(data, sha256)
    dest.mkdir(parents=True, exist_ok=True)
    top = _extract(data, dest)
    folder = dest / top
    computed = archive_digest(folder)
    if computed != sha256:  # e.g. members out of order, or extra pax fields: not our archive
        raise VerificationError("task-archive", "unpacked task folder does not re-pack to the "
                                "archive's name (not a canonical task archive)",
                                expected=sha256, computed=computed)
    return folder


# --------------------------------------------------------------------------- the worker's cache


def _cached_folder(entry: Path, sha256: str) -> Path | None:
    """The task folder cached at ``entry`` if it still re-packs to ``sha256``, else None."""
    try:
        children = [p for p in entry.iterdir() if not p.name.startswith(".")]
    except OSError:
        return None
    if len(children) != 1 or not children[0].is_dir() or children[0].is_symlink():
        return None
    try:
        if archive_digest(children[0]) == sha256:
            return children[0]
    except (OSError, TaskError):
        pass
    return None


def _discard(path: Path) -> None:
    """Move ``path`` out of the way (atomically), then delete it."""
    aside = path.parent / f".stale-{secrets.token_hex(6)}"
    with contextlib.suppress(OSError):
        os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)


def materialize(cache_dir: Path, sha256: str, fetch: Callable[[], bytes]) -> Path:
    """The task folder for archive ``sha256``, from the cache or by unpacking ``fetch()``.

    ``fetch`` is only called on a miss (or when the cached copy no longer verifies). Safe when
    several processes do this at once for the same hash: each unpacks into a private directory
    and the first rename wins.
    """
    check_sha256(sha256)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    entry = cache_dir / sha256
    if entry.exists():
        folder = _cached_folder(entry, sha256)
        if folder is not None:
            return folder
        _discard(entry)
    data = fetch()
    if len(data) > MAX_ARCHIVE_BYTES:
        raise MalformedInput(f"task archive is larger than {MAX_ARCHIVE_BYTES} bytes")
    verify_archive(data, sha256)
    staging = cache_dir / f".unpack-{secrets.token_hex(8)}"
    try:
        top = unpack_archive(data, sha256, staging).name
        try:
            os.rename(staging, entry)
        except OSError:  # another process won the race: use its copy if it verifies
            folder = _cached_folder(entry, sha256)
            if folder is None:
                raise VerificationError("task-archive", f"cache entry {entry} appeared but does "
                                        "not verify", expected=sha256) from None
            return folder
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return entry / top


def default_cache_dir() -> Path:
    """``$LEDGER_TASK_CACHE``, else ``$XDG_CACHE_HOME/eval-ledger/tasks`` (``~/.cache`` default)."""
    explicit = os.environ.get("LEDGER_TASK_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eval-ledger" / "tasks"


__all__ = [
    "MAX_ARCHIVE_BYTES",
    "TaskArchive",
    "archive_digest",
    "check_sha256",
    "default_cache_dir",
    "materialize",
    "pack_task",
    "unpack_archive",
    "verify_archive",
]
