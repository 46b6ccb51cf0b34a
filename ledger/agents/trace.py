"""OS-level activity capture with ``strace -f``: the log parsed into events (the command line
and the log's text format are ``ledger.agents.strace``).

Events (see docs/VOCABULARY.md): ``fs.read`` / ``fs.write`` (from the open flags, ``creat``,
renames, unlinks, ``mkdir``, ``truncate``, links), ``fs.read.summary`` (folded reads of
interpreter and system files), ``proc.exec`` (successful ``execve``) and ``net.connect`` (every
attempt, including refused and in-progress ones), all with ``source="strace"``; where the box
reports the agent's file opens itself (``EventBuilder.opened``: fanotify, ``ledger.agents.follow``)
its ``fs.read``/``fs.write`` have ``source="fanotify"``, the same shapes. Failed opens and
execs (``ENOENT`` and friends) are skipped: nothing was read or run. Pseudo files under ``/dev``,
``/proc`` and ``/sys`` are skipped. Each path is reported once per attempt and direction (the
first time), each endpoint once, except that a read of a path the agent wrote since its last
recorded read is recorded again (its content may have changed). The log is parsed in one
streaming pass (``iter_events``): a line at a time, only the per-attempt sets of paths seen are
kept.

What a read keeps is decided **when its log line is parsed**: ``TraceFollower``
(``ledger.agents.follow``) parses the log in a thread while the agent runs, a few milliseconds behind it, and the tail once the tracer has
exited. A read shows the file as it was at that moment (a file the agent changed right after
reading it may show the new state, one it deleted at once shows none; a read after a write is
recorded again, so the last state the agent read is always there):

* inside the worktree: the first ``content_limit`` bytes of a regular text file (no NUL byte in
  its head), through the capture filter (the ground-truth redactor), as today;
* outside it: no content at all. The event keeps the path, the file's size and the SHA-256 of the
  whole file, and the file's text (its first ``scan_limit`` bytes; binary files are not scanned)
  is matched against the attempt's commitment there and then (``TraceOptions.evidence``, the
  redactor's ``evidence``): the markers of the committed digests found are kept as ``evidence``,
  nothing else. A file with evidence keeps no SHA-256 (a plain digest of ground truth would let
  anyone confirm a guessed answer);
* interpreter and system files (``/usr``, ``/lib*``, ``/etc``, ..., the Python installation and
  any ``site-packages``/``dist-packages``) without evidence fold into one ``fs.read.summary``
  event at the end of the log: the first ``FOLDED_FILES`` once each, with its SHA-256 and how many
  times it was opened; the others counted by folder (``folders``: ``FOLDERS`` folders, then their
  ``site-packages`` folder or system prefix), except a file whose path is committed
  (``TraceOptions.path_hit``), which is always listed;
* reads of worktree files the agent has not written (nor any folder above them) past the first
  ``WORKTREE_ENTRIES``: counted in the summary's ``worktree`` (starting-tree files are public;
  the scan never counts a worktree read as contamination), so that walking a large repository
  costs a few entries, not one per file;
* the attempt's private config home (``ctx.home``: the agent's own settings and credentials):
  the path only.

Whole-file digests are cached per process by (path, device, inode, size, mtime, ctime), so a
worker that runs many attempts hashes the interpreter's files once.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ledger.agents.contracts import Event
from ledger.agents.filefacts import file_facts
from ledger.agents.strace import (
    WRITE_FLAGS,
    Syscall,
    decode_array,
    decode_fd,
    decode_string,
    iter_syscalls,
    text_of,
)

CONTENT_LIMIT = 16 * 1024
CONTENT_BUDGET = 4 * 1024 * 1024  # worktree content bytes captured per attempt, all files together
WORKTREE_ENTRIES = 8  # reads of unwritten worktree files journaled one by one per attempt
FOLDED_FILES = 32  # folded (system) files listed one by one in fs.read.summary per attempt
FOLDERS = 64  # folders the other folded files are counted in (then coarser: EventBuilder._coarse)
SCAN_LIMIT = 1024 * 1024  # bytes of one file outside the worktree scanned against the commitment
_PSEUDO = ("/dev/", "/proc/", "/sys/")
_PSEUDO_EXACT = frozenset({"/dev", "/proc", "/sys"})
_SYSTEM = ("/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/bin/", "/sbin/", "/etc/",
           "/var/lib/", "/var/cache/", "/nix/store/", "/snap/")
_PACKAGES = (b"/site-packages/", b"/dist-packages/")



class Evidence(Protocol):
    """The redactor's ``evidence`` method, bound to the attempt's commitment and key: the
    markers of the committed digests found in a text ("" when none). ``tokens`` are the text's
    tokens when the caller has them (then ``text`` is only searched for markers)."""

    def __call__(self, text: str, tokens: Sequence[str] | None = None,
                 token_set: frozenset[int] | None = None, /) -> str: ...


# --- events -----------------------------------------------------------------------------------

@dataclass
class TraceOptions:
    """How one attempt's log becomes events.

    ``evidence``: the commitment scan for files outside the worktree (None: they are recorded with
    their digest but not scanned, for a caller that has no commitment). ``system_prefixes``:
    the folders whose reads fold into ``fs.read.summary`` (default: the system folders and the
    interpreter's installation; ``site-packages``/``dist-packages`` anywhere fold too).
    ``worktree_entries``: reads of worktree files the agent has not written in this attempt
    (nor any folder above them) that get an ``fs.read`` entry of their own; the rest are counted
    in the summary's ``worktree``. ``folded_files``: folded files listed one by one in the
    summary's ``files``; the rest are counted by folder (``folders``), except those whose path
    ``path_hit`` says is committed, which are always listed.
    """

    worktree: Path
    home: Path | None = None
    capture_filter: Callable[[str], str] = field(default=lambda s: s)
    evidence: Evidence | None = None
    content_limit: int = CONTENT_LIMIT
    content_budget: int = CONTENT_BUDGET
    scan_limit: int = SCAN_LIMIT
    system_prefixes: tuple[str, ...] = ()
    worktree_entries: int = WORKTREE_ENTRIES
    folded_files: int = FOLDED_FILES
    path_hit: Callable[[str], bool] | None = None


def _default_system_prefixes() -> tuple[str, ...]:
    extra = []
    for p in dict.fromkeys((sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)):
        for q in (p, os.path.realpath(p)):
            if q not in ("/", "") and not q.startswith("/tmp"):
                extra.append(q.rstrip("/") + "/")
    return tuple(dict.fromkeys(_SYSTEM + tuple(extra)))


def _join(base: bytes | None, path: bytes) -> bytes:
    if path.startswith(b"/"):
        return path
    return os.path.join(base or b"/", path)


def _is_pseudo(resolved: str) -> bool:
    return resolved in _PSEUDO_EXACT or resolved.startswith(_PSEUDO)


class EventBuilder:
    """One attempt's activity events, from its syscalls (``events``) and, where the box reports
    them itself, its file opens (``opened``), with the per-attempt state both share."""

    def __init__(self, opts: TraceOptions) -> None:
        self.opts = opts
        self.worktree = os.path.realpath(opts.worktree).encode("utf-8", "surrogateescape")
        self.home = (os.path.realpath(opts.home).encode("utf-8", "surrogateescape")
                     if opts.home is not None else None)
        self.system = tuple(p.encode() for p in (opts.system_prefixes or _default_system_prefixes()))
        self.seen: set[tuple[str, bytes]] = set()
        self.rewritten: set[bytes] = set()  # written since the last recorded read of the path
        self.folded: dict[bytes, list[Any]] = {}  # resolved -> [sha256 or None, opens]
        self.folders: dict[bytes, list[int]] = {}  # folder -> [files, opens] past folded_files
        self.in_folders: dict[bytes, bytes] = {}  # file -> the folder it is counted in
        self.written: set[bytes] = set()  # every path written in the attempt
        self.wt_entries = 0
        self.wt_counted: set[bytes] = set()  # worktree files only counted
        self.wt_reads = 0
        self.budget = opts.content_budget
        self.cwd: dict[int, bytes] = {}
        self.root_pid: int | None = None
        self.real_dirs: dict[bytes, bytes] = {}
        self.opens_source: str | None = None  # who reported the opens, when not strace

    def _under(self, path: bytes, root: bytes | None) -> bool:
        return root is not None and (path == root or path.startswith(root.rstrip(b"/") + b"/"))

    def _resolve(self, path: bytes) -> bytes:
        """Absolute, normalized, with the directory part's symlinks resolved (the file may be
        gone); directories' real paths are cached for the whole parse."""
        path = os.path.normpath(path)
        head, tail = os.path.split(path)
        real = self.real_dirs.get(head)
        if real is None:
            real = head
            with contextlib.suppress(OSError):
                real = os.path.realpath(head)
            self.real_dirs[head] = real
        return os.path.join(real, tail) if tail else real

    def _system(self, resolved: bytes) -> bool:
        return resolved.startswith(self.system) or any(p in resolved for p in _PACKAGES)

    def _content(self, resolved: bytes) -> dict[str, Any]:
        """The captured head of a worktree file (redacted by the capture filter)."""
        if self.budget <= 0:
            return {"content": None}
        try:
            st = os.stat(resolved)
            if not stat.S_ISREG(st.st_mode):
                return {"content": None}
            limit = min(self.opts.content_limit, self.budget)
            with open(resolved, "rb") as fh:
                head = fh.read(limit)
        except OSError:
            return {"content": None}
        if b"\0" in head:
            return {"content": None}
        self.budget -= len(head)
        out: dict[str, Any] = {"content": self.opts.capture_filter(
            head.decode("utf-8", "ignore" if st.st_size > len(head) else "replace"))}
        if st.st_size > len(head):
            out["truncated"] = True
            out["total_bytes"] = st.st_size
        return out

    def _outside(self, resolved: bytes) -> tuple[dict[str, Any], bool]:
        """Size, digest and commitment evidence of a file outside the worktree; and whether
        anything matched."""
        evidence_of = self.opts.evidence
        facts = file_facts(resolved, self.opts.scan_limit)
        evidence = ""
        if evidence_of is not None and facts.tokens is not None:
            evidence = evidence_of(facts.marker_text, facts.tokens, facts.token_set)
        data: dict[str, Any] = {"size": facts.size}
        if evidence:
            data["evidence"] = evidence
        else:
            data["sha256"] = facts.sha256
        if facts.scan_truncated:
            data["scan_truncated"] = True
        return data, bool(evidence)

    def _written_under(self, resolved: bytes) -> bool:
        """Was ``resolved``, or a folder above it inside the worktree, written in the attempt?"""
        path = resolved
        while True:
            if path in self.written:
                return True
            if path == self.worktree or len(path) <= len(self.worktree):
                return False
            path = path.rpartition(b"/")[0]

    def _fold(self, resolved: bytes, sha: str | None) -> None:
        """A system file read without evidence: listed (the first ``folded_files``, and any whose
        path is committed), else counted in its folder."""
        if len(self.folded) < self.opts.folded_files or (
                self.opts.path_hit is not None and self.opts.path_hit(text_of(resolved))):
            self.folded[resolved] = [sha, 1]
            return
        folder = resolved.rpartition(b"/")[0] or b"/"
        if folder not in self.folders and len(self.folders) >= FOLDERS:
            folder = self._coarse(resolved)
        self.in_folders[resolved] = folder
        counts = self.folders.setdefault(folder, [0, 0])
        counts[0] += 1
        counts[1] += 1

    def _coarse(self, resolved: bytes) -> bytes:
        """The folder a system file is counted in once ``FOLDERS`` folders are listed: its
        ``site-packages``/``dist-packages`` folder, else the system prefix it lies under."""
        for marker in _PACKAGES:
            at = resolved.find(marker)
            if at >= 0:
                return resolved[:at + len(marker) - 1]
        best = max((p for p in self.system if resolved.startswith(p)), key=len, default=b"")
        return best.rstrip(b"/") or b"/"

    def fs(self, kind: str, named: bytes, resolved: bytes, source: str = "strace") -> Event | None:
        res_text = text_of(resolved)
        if _is_pseudo(res_text):
            return None
        if kind == "fs.read":
            folded = self.folded.get(resolved)
            if folded is not None:
                folded[1] += 1
                return None
            counted_in = self.in_folders.get(resolved)
            if counted_in is not None:
                self.folders[counted_in][1] += 1
                return None
            if resolved in self.wt_counted and not self._written_under(resolved):
                self.wt_reads += 1
                return None
        key = (kind, resolved)
        if kind == "fs.write":
            self.rewritten.add(resolved)
            self.written.add(resolved)
        elif key in self.seen and resolved in self.rewritten:
            self.seen.discard(key)  # read again after a write: its content may have changed
        if kind == "fs.read":
            self.rewritten.discard(resolved)
        if key in self.seen:
            return None
        inside = self._under(resolved, self.worktree)
        data: dict[str, Any] = {
            "path": text_of(named),
            "resolved": res_text,
            "in_worktree": inside,
            "source": source,
        }
        if kind == "fs.read":
            if inside:
                if not self._written_under(resolved):
                    # a file of the starting tree: public, never contamination (scan's echo
                    # rule), and its digests are public windows the commitment leaves out
                    if self.wt_entries >= self.opts.worktree_entries:
                        self.wt_counted.add(resolved)
                        self.wt_reads += 1
                        return None
                    self.wt_entries += 1
                data.update(self._content(resolved))
            elif not self._under(resolved, self.home):
                facts, matched = self._outside(resolved)
                if not matched and self._system(resolved):
                    self._fold(resolved, facts.get("sha256"))
                    return None
                data.update(facts)
        self.seen.add(key)
        return kind, data

    def summary(self) -> Event | None:
        """The folded reads: ``files`` [[resolved, sha256 or nil, opens], ...] by path; past
        ``folded_files``, ``folders`` [[folder, files, opens], ...] by folder; and ``worktree``
        {files, reads}: the unwritten worktree files only counted. ``reads`` counts them all."""
        if not (self.folded or self.folders or self.wt_counted):
            return None
        files = [[text_of(p), sha, n] for p, (sha, n) in sorted(self.folded.items())]
        data: dict[str, Any] = {"files": files, "reads": sum(f[2] for f in files),
                                "source": self.opens_source or "strace"}
        if self.folders:
            data["folders"] = [[text_of(p), n, opens] for p, (n, opens) in sorted(self.folders.items())]
            data["reads"] += sum(opens for _n, opens in self.folders.values())
        if self.wt_counted:
            data["worktree"] = {"files": len(self.wt_counted), "reads": self.wt_reads}
            data["reads"] += self.wt_reads
        return "fs.read.summary", data

    def opened(self, path: bytes, *, read: bool, written: bool, source: str) -> list[Event]:
        """A file (or folder) open the box reported itself, by its path in the box (the kernel's:
        already resolved): ``fs.write`` when it was open for writing, then ``fs.read`` when it
        was open read-only or run. The open flags are unknown: a file open read-write is a write
        only (what can be read and written is the worktree, home and scratch, whose content the
        agent put there itself)."""
        self.opens_source = source
        resolved = os.path.normpath(path)
        out = [self.fs("fs.write", path, resolved, source) if written else None,
               self.fs("fs.read", path, resolved, source) if read else None]
        return [e for e in out if e is not None]

    def base_dir(self, sc: Syscall, fd_arg: str | None) -> bytes | None:
        if fd_arg is not None:
            _name, path = decode_fd(fd_arg)
            if path is not None:
                return path
        return self.cwd.get(sc.pid, self.worktree)

    def path_arg(self, sc: Syscall, idx: int, dirfd_idx: int | None) -> tuple[bytes, bytes] | None:
        if idx >= len(sc.args):
            return None
        named = decode_string(sc.args[idx])
        if named is None:
            return None
        base = self.base_dir(sc, sc.args[dirfd_idx] if dirfd_idx is not None
                             and dirfd_idx < len(sc.args) else None)
        return named, self._resolve(_join(base, named))

    def events(self, sc: Syscall) -> list[Event]:
        if self.root_pid is None:
            self.root_pid = sc.pid
        name = sc.name
        out: list[Event | None] = []
        if name in ("open", "openat", "openat2", "creat"):
            if not sc.ok:
                return []
            p_idx, fd_idx = (0, None) if name in ("open", "creat") else (1, 0)
            if sc.ret_path is not None and sc.ret_path.startswith(b"/"):  # -y: the kernel's path
                named_raw = decode_string(sc.args[p_idx]) if p_idx < len(sc.args) else None
                if named_raw is None:
                    return []
                named, resolved = named_raw, sc.ret_path
            else:
                named_res = self.path_arg(sc, p_idx, fd_idx)
                if named_res is None:
                    return []
                named, resolved = named_res
            if name == "creat":
                flags = "O_WRONLY|O_CREAT|O_TRUNC"
            elif name == "openat2":
                fm = re.search(r"flags=([A-Z0-9_|x]+)", sc.args[2] if len(sc.args) > 2 else "")
                flags = fm.group(1) if fm else "O_RDONLY"
            else:
                flags = sc.args[p_idx + 1] if len(sc.args) > p_idx + 1 else "O_RDONLY"
            parts = set(flags.split("|"))
            if "O_PATH" in parts:  # a location only: reads and writes nothing (open(2)); a
                return []          # later openat relative to it is traced with its own path
            writes = bool(parts.intersection(WRITE_FLAGS))
            if not writes or "O_RDWR" in parts:
                out.append(self.fs("fs.read", named, resolved))
            if writes:
                out.append(self.fs("fs.write", named, resolved))
        elif name in ("execve", "execveat"):
            if not sc.ok:
                return []
            p_idx, fd_idx, a_idx = (0, None, 1) if name == "execve" else (1, 0, 2)
            named_res = self.path_arg(sc, p_idx, fd_idx)
            if named_res is None:
                return []
            argv = decode_array(sc.args[a_idx]) if a_idx < len(sc.args) else []
            out.append(("proc.exec", {"argv": [self.opts.capture_filter(a) for a in argv],
                                      "path": text_of(named_res[1]), "source": "strace"}))
        elif name == "connect":
            ev = self.connect(sc)
            out.append(ev)
        elif name in _PATH_WRITES:
            if not sc.ok:
                return []
            for p_idx, fd_idx in _PATH_WRITES[name]:
                named_res = self.path_arg(sc, p_idx, fd_idx)
                if named_res is not None:
                    out.append(self.fs("fs.write", *named_res))
        return [e for e in out if e is not None]

    def connect(self, sc: Syscall) -> Event | None:
        if len(sc.args) < 2:
            return None
        addr = sc.args[1]
        fam = re.search(r"sa_family=(AF_[A-Z0-9]+)", addr)
        if not fam:
            return None
        host: str | None = None
        port = 0
        if fam.group(1) == "AF_INET":
            family = "inet"
            hm = re.search(r'inet_addr\(("(?:[^"\\]|\\.)*")\)', addr)
            pm = re.search(r"sin_port=htons\((\d+)\)", addr)
            host = text_of(decode_string(hm.group(1)) or b"") if hm else None
            port = int(pm.group(1)) if pm else 0
        elif fam.group(1) == "AF_INET6":
            family = "inet6"
            hm = re.search(r'inet_pton\(AF_INET6,\s*("(?:[^"\\]|\\.)*")', addr)
            pm = re.search(r"sin6_port=htons\((\d+)\)", addr)
            host = text_of(decode_string(hm.group(1)) or b"") if hm else None
            port = int(pm.group(1)) if pm else 0
        elif fam.group(1) in ("AF_UNIX", "AF_LOCAL"):
            family = "unix"
            hm = re.search(r'sun_path=(@?)("(?:[^"\\]|\\.)*")', addr)
            if hm:
                host = hm.group(1) + text_of(decode_string(hm.group(2)) or b"")
        else:
            return None
        if not host:
            return None
        key = ("net.connect", f"{family}|{host}|{port}".encode())
        if key in self.seen:
            return None
        self.seen.add(key)
        return "net.connect", {"host": host, "port": port, "family": family, "source": "strace"}


# syscall -> [(path arg index, dirfd arg index or None)] for calls that change the file system
_PATH_WRITES: dict[str, list[tuple[int, int | None]]] = {
    "rename": [(0, None), (1, None)],
    "renameat": [(1, 0), (3, 2)],
    "renameat2": [(1, 0), (3, 2)],
    "unlink": [(0, None)],
    "unlinkat": [(1, 0)],
    "rmdir": [(0, None)],
    "mkdir": [(0, None)],
    "mkdirat": [(1, 0)],
    "truncate": [(0, None)],
    "symlink": [(1, None)],
    "symlinkat": [(2, 1)],
    "link": [(1, None)],
    "linkat": [(3, 2)],
}


SKIP_FAILED = frozenset({"open", "openat", "openat2", "creat", "execve", "execveat"})


def iter_events(lines: Iterable[str], opts: TraceOptions) -> Iterator[tuple[float, Event]]:
    """Activity events, each with its strace timestamp (unix seconds), in log order, in one
    streaming pass over ``lines``; the ``fs.read.summary`` of folded reads comes last, stamped
    with the time of the last syscall."""
    builder = EventBuilder(opts)
    last = 0.0
    for sc in iter_syscalls(iter(lines), skip_failed=SKIP_FAILED):
        last = sc.ts
        for ev in builder.events(sc):
            yield sc.ts, ev
    summary = builder.summary()
    if summary is not None:
        yield last, summary


def parse_strace_lines(lines: Iterable[str], opts: TraceOptions) -> list[tuple[float, Event]]:
    """``iter_events`` as a list."""
    return list(iter_events(lines, opts))


_Builder = EventBuilder  # the grading capture's name for it (ledger/run/attempt/gradetrace.py)


def parse_strace_log(path: Path, opts: TraceOptions) -> list[tuple[float, Event]]:
    """Parse a strace log file, a line at a time (a large log never loads into memory at once)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return list(iter_events(fh, opts))
