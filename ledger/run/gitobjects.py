"""The worktree's first commit written in-process, byte for byte what ``git init``, ``git add -A``
and ``git commit`` make of the same tree: no git process on the attempt's path.

    base = initial_commit(worktree, message="starting state", identity=GIT_IDENTITY)
    # None: the tree holds something only git itself decides; run git instead

Every attempt used to start three git processes (5-30 ms each) for a tree of a few files. This
module writes the same repository directly: loose objects (``zlib`` of ``"<type> <size>\\0"`` and
the content; the id is the SHA-1 of the uncompressed bytes), one tree object per folder (entries
``"<mode> <name>\\0<20-byte id>"``, sorted the way git sorts them: a folder's name compares with a
``/`` after it), the commit (the fixed author, committer and date, so the commit id is the one git
gives), the index (version 2, entries sorted by path, each with the file's ``lstat`` so that a
later ``git add -A`` skips unchanged files), ``HEAD``, ``refs/heads/main``, the reflog and the
``config`` of ``git init``. ``tests/run/test_gitobjects.py`` checks the commit ids against git's.

It declines (returns None, nothing written) wherever git's own rules could decide differently
from a plain walk: a ``.gitignore``, ``.gitattributes`` or ``.gitmodules`` anywhere (ignore rules,
end-of-line and filter attributes, submodules), a name git may refuse or treat specially (``.git`` in any case or with anything after it,
``git~1``, a backslash), anything that is
not a regular file, a folder or a symbolic link. The walk never follows a
link (a link is stored as its target string, mode 120000) and opens files with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_LEVEL = 1  # zlib level of the loose objects (any level reads the same; ids do not change)
_CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
           "\tlogallrefupdates = true\n")
_ZERO = "0" * 40


class _Declined(Exception):
    """The tree needs git's own rules."""


def _object(git_dir: Path, kind: bytes, data: bytes) -> bytes:
    """Write one loose object (unless it is there) and return its binary id."""
    raw = kind + b" " + str(len(data)).encode() + b"\0" + data
    oid = hashlib.sha1(raw, usedforsecurity=False).digest()
    hexid = oid.hex()
    folder = git_dir / "objects" / hexid[:2]
    path = folder / hexid[2:]
    if not path.exists():
        folder.mkdir(exist_ok=True)
        tmp = folder / f"tmp_{hexid[2:]}"
        with open(tmp, "wb") as fh:
            fh.write(zlib.compress(raw, _LEVEL))
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    return oid


def _read(path: bytes, size: int) -> bytes:
    fd = os.open(path, _READ_FLAGS)
    try:
        chunks, left = [], size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _tree(git_dir: Path, folder: bytes, rel: bytes,
          index: list[tuple[bytes, os.stat_result, int, bytes]]) -> bytes | None:
    """The tree object of ``folder`` (None: empty, git stores no empty folder); its files go to
    ``index`` as (path, lstat, mode, id)."""
    entries: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode, name + id)
    with os.scandir(folder) as it:
        items = list(it)
    for item in items:
        name = item.name
        if not rel and name == b".git":
            continue  # the repository being written (there was none before)
        low = name.lower()
        if low.startswith((b".git", b"git~")) or b"\\" in name:  # .gitignore, .git, ...
            raise _Declined(name)
        st = item.stat(follow_symlinks=False)
        path = rel + b"/" + name if rel else name
        if stat.S_ISDIR(st.st_mode):
            sub = _tree(git_dir, item.path, path, index)
            if sub is not None:
                entries.append((name + b"/", b"40000", name + b"\0" + sub))
            continue
        if stat.S_ISLNK(st.st_mode):
            mode, data = 0o120000, os.readlink(item.path)
        elif stat.S_ISREG(st.st_mode):
            mode = 0o100755 if st.st_mode & stat.S_IXUSR else 0o100644
            data = _read(item.path, st.st_size)
            if len(data) != st.st_size:
                raise _Declined(path)  # changed while it was read
        else:
            raise _Declined(path)  # a FIFO, socket or device: git's business (it skips them)
        oid = _object(git_dir, b"blob", data)
        index.append((path, st, mode, oid))
        entries.append((name, b"%o" % mode, name + b"\0" + oid))
    if not entries:
        return None
    entries.sort(key=lambda e: e[0])
    return _object(git_dir, b"tree", b"".join(m + b" " + body for _k, m, body in entries))


def _index(entries: list[tuple[bytes, os.stat_result, int, bytes]]) -> bytes:
    """A version 2 index of ``entries`` (sorted by path, git's order)."""
    out = [b"DIRC", struct.pack(">II", 2, len(entries))]
    for path, st, mode, oid in sorted(entries, key=lambda e: e[0]):
        fields = (st.st_ctime_ns // 1_000_000_000, st.st_ctime_ns % 1_000_000_000,
                  st.st_mtime_ns // 1_000_000_000, st.st_mtime_ns % 1_000_000_000, st.st_dev, st.st_ino, mode, st.st_uid,
                  st.st_gid, st.st_size)
        head = struct.pack(">10I", *(f & 0xFFFFFFFF for f in fields))
        entry = head + oid + struct.pack(">H", min(len(path), 0xFFF)) + path
        out.append(entry + b"\0" * (8 - len(entry) % 8))
    body = b"".join(out)
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def _signature(identity: Mapping[str, str], who: str) -> bytes:
    """``Name <email> 946684800 +0000`` from the fixed ``GIT_*`` identity (an ISO date)."""
    from datetime import datetime

    when = datetime.strptime(identity[f"GIT_{who}_DATE"], "%Y-%m-%dT%H:%M:%S%z")
    offset = identity[f"GIT_{who}_DATE"][-5:]
    return (f"{identity[f'GIT_{who}_NAME']} <{identity[f'GIT_{who}_EMAIL']}> "
            f"{int(when.timestamp())} {offset}").encode()


def initial_commit(worktree: Path, *, message: str, identity: Mapping[str, str],
                   branch: str = "main", exclude: str = "") -> str | None:
    """Make ``worktree/.git`` holding one commit of the worktree as it is (what ``git init -b
    BRANCH``, ``git add -A``, ``git commit -m MESSAGE`` make of it) and return the commit id;
    None (no ``.git`` left behind) when the tree needs git's own rules (module docstring)."""
    git_dir = worktree / ".git"
    if git_dir.exists() or git_dir.is_symlink():
        return None
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info"):
        (git_dir / sub).mkdir(parents=True, exist_ok=True)
    try:
        index: list[tuple[bytes, os.stat_result, int, bytes]] = []
        tree = _tree(git_dir, os.fsencode(worktree), b"", index)
    except (_Declined, OSError):
        import shutil

        shutil.rmtree(git_dir, ignore_errors=True)
        return None
    if tree is None:  # an empty tree: git's commit of it is --allow-empty's
        tree = _object(git_dir, b"tree", b"")
    author, committer = _signature(identity, "AUTHOR"), _signature(identity, "COMMITTER")
    body = (b"tree " + tree.hex().encode() + b"\nauthor " + author + b"\ncommitter " + committer
            + b"\n\n" + message.encode() + b"\n")
    commit = _object(git_dir, b"commit", body).hex()
    (git_dir / "index").write_bytes(_index(index))
    (git_dir / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    (git_dir / "config").write_text(_CONFIG)
    (git_dir / "description").write_text(
        "Unnamed repository; edit this file 'description' to name the repository.\n")
    (git_dir / "info" / "exclude").write_text(exclude)
    (git_dir / "refs" / "heads" / branch).write_text(commit + "\n")
    log = f"{_ZERO} {commit} {committer.decode()}\tcommit (initial): {message}\n"
    for ref in ("HEAD", f"refs/heads/{branch}"):
        path = git_dir / "logs" / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log)
    return commit
