"""Reading a tree that someone else wrote (an agent's worktree, a mined or imported task) without
reading anything of the host through it.

Every walk and read here follows one set of rules:

- entries are classified by ``lstat``: a symbolic link is a link (its target is a string, never
  followed), a directory is entered only when it is a real directory, and FIFOs, sockets and
  devices are never opened;
- a file is opened with ``O_NOFOLLOW | O_NONBLOCK`` under a parent opened the same way, one
  component at a time (``openat``), and read only when ``fstat`` of the open descriptor says it is
  a regular file: a link or a FIFO swapped in between the walk and the read is refused too;
- reads are bounded (a size cap per file, and the callers keep one per walk);
- names are bytes on disk: they come back as ``str`` with ``surrogateescape`` (so any name,
  newline, leading dash or non-UTF-8, round-trips to the same file) and ``display`` gives the form
  that goes into text (git's C-style quoting).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

FILE = "file"
LINK = "link"
DIR = "dir"
OTHER = "other"  # a FIFO, a socket or a device: listed, never opened

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)  # the caller's own folder
MAX_ENTRIES = 200_000  # a walk stops listing past this many entries (``Walk.truncated``)


@dataclass(frozen=True)
class Node:
    """One entry of a walked tree: ``rel`` is its posix path relative to the root."""

    rel: str
    kind: str  # FILE | LINK | OTHER (directories are walked, not listed)
    size: int
    mode: int
    target: str | None = None  # a link's target, as a string


@dataclass
class Walk:
    nodes: dict[str, Node]
    truncated: bool = False  # more than ``max_entries`` entries: the rest were not listed
    nested: list[str] = field(default_factory=list)  # folders below the root holding a ``.git``


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISLNK(mode):
        return LINK
    if stat.S_ISDIR(mode):
        return DIR
    return OTHER


def walk(root: Path, *, skip_names: frozenset[str] = frozenset(), skip_suffixes: tuple[str, ...] = (),
         max_entries: int = MAX_ENTRIES) -> Walk:
    """Every file, link and special entry under ``root`` (never following a link, never opening
    anything). A name in ``skip_names`` (files and folders alike: ``.git`` of a nested repository,
    or a ``.git`` file) is left out with everything below it."""
    out = Walk(nodes={})
    try:
        top = os.lstat(root)
    except OSError:
        return out
    if not stat.S_ISDIR(top.st_mode):
        return out
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: os.fsencode(e.name))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            rel = f"{prefix}{name}"
            if name == ".git" and prefix:
                out.nested.append(prefix.rstrip("/"))
            if name in skip_names or name.endswith(skip_suffixes):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = kind_of(st.st_mode)
            if kind == DIR:
                stack.append((entry.path, rel + "/"))
                continue
            if len(out.nodes) >= max_entries:
                out.truncated = True
                return out
            target = None
            if kind == LINK:
                with contextlib.suppress(OSError):
                    target = os.readlink(entry.path)
            out.nodes[rel] = Node(rel=rel, kind=kind, size=st.st_size, mode=st.st_mode, target=target)
    return out


def nested_repositories(root: Path, *, skip_names: frozenset[str] = frozenset()) -> list[str]:
    """The folders below ``root`` that hold a ``.git`` (a folder, a file or a link): nested
    repositories, or a ``.git`` file naming a repository elsewhere. Looks at entry types only (no
    ``stat`` per file, no link followed), so it is cheap enough to run before every diff."""
    found: list[str] = []
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    if entry.name == ".git":
                        if prefix:
                            found.append(prefix.rstrip("/"))
                        continue
                    if entry.name in skip_names:
                        continue
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir:
                        stack.append((entry.path, f"{prefix}{entry.name}/"))
        except OSError:
            continue
    return sorted(found)


@contextlib.contextmanager
def open_under(root: Path, rel: str) -> Iterator[int]:
    """A read-only descriptor of the regular file ``root/rel``, opened one component at a time with
    ``O_NOFOLLOW``: raises OSError when any component below ``root`` is a link, or the file is not
    regular (``root`` itself is the caller's own folder and may be reached through a link)."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise OSError(f"not a relative path inside the tree: {rel!r}")
    fds: list[int] = []
    try:
        fds.append(os.open(root, _ROOT_FLAGS))
        for part in parts[:-1]:
            fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        fd = os.open(parts[-1], _OPEN_FLAGS, dir_fd=fds[-1])
        fds.append(fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {rel!r}")
        os.set_blocking(fd, True)
        yield fd
    finally:
        for opened in reversed(fds):
            os.close(opened)


def read_under(root: Path, rel: str, limit: int) -> bytes | None:
    """The bytes of the regular file ``root/rel`` (see ``open_under``); None when it is not a
    regular file, cannot be opened, or holds more than ``limit`` bytes."""
    try:
        with open_under(root, rel) as fd:
            if os.fstat(fd).st_size > limit:
                return None
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = os.read(fd, min(1 << 16, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    return None
            return b"".join(chunks)
    except OSError:
        return None


def read_prefix(root: Path, rel: str, limit: int) -> bytes | None:
    """At most the first ``limit`` bytes of the regular file ``root/rel`` (see ``open_under``);
    None when it is not a regular file or cannot be opened."""
    try:
        with open_under(root, rel) as fd:
            chunks: list[bytes] = []
            total = 0
            while total < limit:
                chunk = os.read(fd, min(1 << 16, limit - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            return b"".join(chunks)
    except OSError:
        return None


def read_file(path: Path, limit: int) -> bytes | None:
    """``read_under`` of one path (its last component must not be a link; its parents are the
    caller's own, trusted folders)."""
    return read_under(path.parent, path.name, limit)


def links_out(root: Path) -> list[str]:
    """The relative paths of every symbolic link under ``root`` (walked without following)."""
    return sorted(rel for rel, node in walk(root).nodes.items() if node.kind == LINK)


def specials(root: Path) -> list[str]:
    """The relative paths of every FIFO, socket or device under ``root``."""
    return sorted(rel for rel, node in walk(root).nodes.items() if node.kind == OTHER)


_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
            34: '\\"', 92: "\\\\"}


def display(rel: str) -> str:
    """``rel`` as it may go into a line of text: plain when it is printable ASCII, else quoted the
    way git quotes a path (``"a\\nb"``, octal escapes for every other byte), so no name can break
    a line or forge one."""
    raw = os.fsencode(rel)
    if all(32 <= b < 127 and b not in (34, 92) for b in raw):
        return rel
    return '"' + "".join(
        _ESCAPES.get(b) or (chr(b) if 32 <= b < 127 else f"\\{b:03o}") for b in raw) + '"'


def text_name(rel: str) -> str:
    """``rel`` as a valid Unicode string (non-UTF-8 bytes become U+FFFD): for data fields."""
    return os.fsencode(rel).decode("utf-8", "replace")
