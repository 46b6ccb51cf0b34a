"""File opens of a sandbox, captured by the kernel without stopping the processes (fanotify).

    rec = MountRecorder()                       fanotify_init: a notification group, no queue limit
    ... bwrap ... --block-fd R ... (its child sets up every mount, then blocks reading R) ...
    child = wait_blocked(bwrap_pid, R)          the sandbox's namespace, every mount made
    rec.mark_namespace(child)                   a mount mark on each of the sandbox's mounts
    os.write(W, b"x")                           the command starts
    rec.start()  ...  rec.drain()               FileOpen records, read in a thread as they come
    rec.stop()

strace's stop per ``openat`` (60-90 us here, even with ``--seccomp-bpf``) is the capture's floor:
a walk over 20k files runs 4x slower traced. fanotify queues an event in the kernel at each open
and close and lets the process go on; a thread of the harness reads the queue a few milliseconds
behind. What it gives, per event: the mask (``FAN_OPEN``, ``FAN_OPEN_EXEC``, ``FAN_CLOSE_WRITE``:
the file was open for writing, ``FAN_CLOSE_NOWRITE``: open read-only), the process id (in the
harness's PID namespace) and an open descriptor of the file, whose path is read back.

**Scope: mount marks.** bwrap builds the sandbox's mounts in a mount namespace of its own; they
are new mount objects that only the sandbox's processes reach. A ``FAN_MARK_MOUNT`` mark on each
of them (reached as ``/proc/CHILD/root/MOUNTPOINT`` while bwrap's child waits on ``--block-fd``,
after its last mount and before the command) reports every open through the sandbox's mounts, by
any process in it: a ``CLONE_UNTRACED`` child, ``io_uring``, ``open_by_handle_at`` included, and
nothing of the host. ``/proc``, ``/dev`` and ``/sys`` are not marked (pseudo files, never
recorded). The sandbox cannot add a mount afterwards (no capabilities, no nested user namespace:
``--disable-userns``), so no open escapes the marks.

**Paths.** A descriptor of a file in another mount namespace reads back (``/proc/self/fd``)
relative to its mount's root; ``statx(STATX_MNT_ID)`` names the mount, and the path is its mount
point in the sandbox plus that relative path (calibrated per mount when it is marked: the mount
root's own read-back is cut off). A file deleted since has its path with `` (deleted)`` removed.

**What it cannot give.** Failed opens (nothing was opened), the open flags (only read-only or
writable, from the close), ``argv`` of an exec, connects, renames, unlinks and clone flags: those
stay with strace (``ledger.agents.strace``). Events for the same file by the same process merge
in the queue while unread (their masks add up): counts of repeated opens are not exact.

**Complete or not.** The group has no queue limit (``FAN_UNLIMITED_QUEUE``, root); should the
kernel still drop events, a ``FAN_Q_OVERFLOW`` event says so and ``overflowed`` is set: the
capture is incomplete and the caller must not call the attempt observed.

``fanotify_status()`` checks once per process whether this works here (Linux, root with
``CAP_SYS_ADMIN``, ``fanotify_init`` and a mount mark permitted); ``LEDGER_CAPTURE_FANOTIFY=off``
turns it off (diagnostics, benchmarks), and callers fall back to strace alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import select
import struct
import sys
import threading
import time
from dataclasses import dataclass

ENV = "LEDGER_CAPTURE_FANOTIFY"  # "off": never use fanotify (diagnostics, benchmarks)

FAN_CLOEXEC = 0x01
FAN_NONBLOCK = 0x02
FAN_CLASS_NOTIF = 0x00
FAN_UNLIMITED_QUEUE = 0x10
FAN_MARK_ADD = 0x01
FAN_MARK_MOUNT = 0x10
FAN_ACCESS = 0x01
FAN_MODIFY = 0x02
FAN_CLOSE_WRITE = 0x08
FAN_CLOSE_NOWRITE = 0x10
FAN_OPEN = 0x20
FAN_OPEN_EXEC = 0x1000
FAN_Q_OVERFLOW = 0x4000
FAN_ONDIR = 0x40000000
FAN_NOFD = -1
EVENTS = FAN_OPEN | FAN_OPEN_EXEC | FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE | FAN_ONDIR
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_STATX_MNT_ID = 0x1000
_STATX_MNT_ID_OFFSET = 144  # struct statx: __u64 stx_mnt_id
_META = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata
_READ_SIZE = 1 << 18
_PSEUDO_MOUNTS = ("/proc", "/dev", "/sys")
_DELETED = b" (deleted)"
# read(2) by architecture, for telling bwrap's child blocked on --block-fd (/proc/PID/syscall)
_READ_NR = {"x86_64": 0, "aarch64": 63, "riscv64": 63, "ppc64le": 3, "s390x": 3, "i686": 3}


class FanotifyError(OSError):
    """fanotify refused (not permitted here, or the sandbox went away before it was marked)."""


@dataclass(frozen=True)
class FileOpen:
    """One queued event: the file's path in the sandbox, the process, what happened to it."""

    ts: float  # when the harness read the event (unix seconds; a few ms after the open)
    pid: int  # in the harness's PID namespace
    path: bytes
    mask: int

    @property
    def read(self) -> bool:
        """Open read-only (closed without write access), or run (an exec opens read-only)."""
        return bool(self.mask & (FAN_CLOSE_NOWRITE | FAN_OPEN_EXEC))

    @property
    def written(self) -> bool:
        return bool(self.mask & FAN_CLOSE_WRITE)

    @property
    def directory(self) -> bool:
        """A folder was opened (listed): ``FAN_ONDIR``."""
        return bool(self.mask & FAN_ONDIR)


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        lib.fanotify_init.restype = ctypes.c_int
        lib.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                      ctypes.c_char_p]
        lib.fanotify_mark.restype = ctypes.c_int
        lib.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                              ctypes.c_void_p]
        lib.statx.restype = ctypes.c_int
        _libc = lib
    return _libc


def _error(what: str) -> FanotifyError:
    err = ctypes.get_errno()
    return FanotifyError(err, f"{what}: {os.strerror(err)}")


def _init() -> int:
    if not sys.platform.startswith("linux"):
        raise FanotifyError(0, f"fanotify needs Linux (this is {sys.platform})")
    try:
        lib = _lib()
    except (OSError, AttributeError) as exc:
        raise FanotifyError(0, f"no fanotify in this C library: {exc}") from None
    flags = FAN_CLOEXEC | FAN_NONBLOCK | FAN_CLASS_NOTIF | FAN_UNLIMITED_QUEUE
    # O_NONBLOCK: the descriptor of a FIFO never blocks the reader; read-only, never O_NOATIME
    fd = lib.fanotify_init(flags, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0:
        raise _error("fanotify_init")
    return fd


def mount_id(fd: int) -> int | None:
    """The mount a descriptor's file lies on (``statx`` ``STATX_MNT_ID``)."""
    buf = ctypes.create_string_buffer(256)
    if _lib().statx(fd, b"", _AT_EMPTY_PATH, _STATX_MNT_ID, buf) != 0:
        return None
    return struct.unpack_from("=Q", buf, _STATX_MNT_ID_OFFSET)[0]


def _unescape_mountinfo(field: str) -> bytes:
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    raw = field.encode("utf-8", "surrogateescape")
    out, i = bytearray(), 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 4 <= len(raw) and raw[i + 1:i + 4].isdigit():
            out.append(int(raw[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


def namespace_mounts(pid: int) -> list[tuple[int, bytes]]:
    """(mount id, mount point) of each mount in ``pid``'s mount namespace, but the pseudo ones."""
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise FanotifyError(exc.errno or 0, f"cannot read the sandbox's mounts: {exc}") from None
    out: list[tuple[int, bytes]] = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        point = _unescape_mountinfo(parts[4])
        text = point.decode("utf-8", "replace")
        if any(text == p or text.startswith(p + "/") for p in _PSEUDO_MOUNTS):
            continue
        out.append((int(parts[0]), point))
    return out


def wait_blocked(parent: int, block_fd: int, timeout: float = 10.0) -> int:
    """The pid of ``parent``'s child once it is blocked reading ``block_fd`` (bwrap's child on
    ``--block-fd``: every mount made, the command not started). ``FanotifyError`` when ``parent``
    ends first or ``timeout`` passes."""
    nr = _READ_NR.get(platform.machine())
    own_ns = _mount_ns("self")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{parent}/task/{parent}/children", "rb") as fh:
                children = [int(c) for c in fh.read().split()]
            with open(f"/proc/{parent}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split()[:1]
        except (OSError, ValueError):
            raise FanotifyError(0, "the sandbox ended before it could be marked") from None
        if state in ([b"Z"], [b"X"]):
            raise FanotifyError(0, "the sandbox ended before it could be marked")
        for child in children:
            # bwrap's child has a mount namespace of its own; a tracer's helper (strace runs
            # before it execs bwrap) does not
            if _mount_ns(child) not in (own_ns, None) and _blocked(child, block_fd, nr):
                return child
        time.sleep(0.0005)
    raise FanotifyError(0, f"the sandbox did not reach its start within {timeout:.0f} s")


def _mount_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _blocked(pid: int, fd: int, nr: int | None) -> bool:
    try:
        with open(f"/proc/{pid}/syscall", "rb") as fh:
            fields = fh.read().split()
    except OSError:
        return False
    if len(fields) < 2 or not fields[0].lstrip(b"-").isdigit():
        return False  # "running"
    try:
        number, first = int(fields[0]), int(fields[1], 16)
    except ValueError:
        return False
    if first != fd:
        return False
    if nr is not None:
        return number == nr
    try:
        with open(f"/proc/{pid}/wchan", "rb") as fh:
            return b"pipe_read" in fh.read()
    except OSError:
        return False


class MountRecorder:
    """A fanotify group marking one sandbox's mounts, read in a thread (module docstring)."""

    def __init__(self) -> None:
        self.fd = _init()
        self.mounts: dict[int, tuple[bytes, bytes]] = {}  # mount id -> (mount point, read-back root)
        self.overflowed = False
        self.unresolved = 0  # events whose mount was not one of the marked ones
        self._events: list[FileOpen] = []
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def mark_namespace(self, pid: int) -> int:
        """Mark every (non-pseudo) mount of ``pid``'s mount namespace; how many."""
        lib = _lib()
        for mnt, point in namespace_mounts(pid):
            where = f"/proc/{pid}/root".encode() + point
            root = self._root_of(where)  # before the mark: the harness's own open is not reported
            if lib.fanotify_mark(self.fd, FAN_MARK_ADD | FAN_MARK_MOUNT, EVENTS, _AT_FDCWD,
                                 where) != 0:
                raise _error(f"fanotify_mark {point.decode('utf-8', 'replace')}")
            self.mounts[mnt] = (point.rstrip(b"/"), root)
        if not self.mounts:
            raise FanotifyError(0, "the sandbox has no mount to mark")
        return len(self.mounts)

    @staticmethod
    def _root_of(where: bytes) -> bytes:
        """How a mount's root reads back through ``/proc/self/fd`` ("/" on this kernel)."""
        try:
            dfd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return b"/"
        try:
            got = os.readlink(f"/proc/self/fd/{dfd}".encode())
        except OSError:
            return b"/"
        finally:
            os.close(dfd)
        return got if got.startswith(b"/") else b"/"

    def start(self) -> MountRecorder:
        self._thread = threading.Thread(target=self._work, name="ledger-fanotify", daemon=True)
        self._thread.start()
        return self

    def _work(self) -> None:
        try:
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            poller.register(self._stop_r, select.POLLIN)
            while True:
                ready = {fd for fd, _ev in poller.poll()}
                self._read_all()
                if self._stop_r in ready:
                    return
        except BaseException as exc:  # handed to stop(), in the caller's thread
            self._error = exc

    def _read_all(self) -> None:
        while True:
            try:
                buf = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            if not buf:
                return
            now = time.time()
            batch = self._parse(buf, now)
            with self._lock:
                self._events.extend(batch)

    def _parse(self, buf: bytes, now: float) -> list[FileOpen]:
        out: list[FileOpen] = []
        off, size = 0, len(buf)
        close = os.close
        while off + _META.size <= size:
            length, _ver, _res, _mlen, mask, efd, pid = _META.unpack_from(buf, off)
            off += max(length, _META.size)
            if mask & FAN_Q_OVERFLOW:
                self.overflowed = True
            if efd == FAN_NOFD or efd < 0:
                continue
            try:
                path = self._path(efd)
            finally:
                close(efd)
            if path is not None:
                out.append(FileOpen(now, pid, path, mask))
        return out

    def _path(self, efd: int) -> bytes | None:
        try:
            rel = os.readlink(b"/proc/self/fd/%d" % efd)
        except OSError:
            self.unresolved += 1
            return None
        mnt = mount_id(efd)
        where = self.mounts.get(mnt) if mnt is not None else None
        if where is None:
            self.unresolved += 1
            return None
        point, root = where
        if rel.endswith(_DELETED):
            rel = rel[:-len(_DELETED)]
        if root != b"/" and (rel == root or rel.startswith(root.rstrip(b"/") + b"/")):
            rel = rel[len(root.rstrip(b"/")):] or b"/"  # the mount's root itself (a folder)
        if not rel.startswith(b"/"):
            self.unresolved += 1
            return None
        return (point + rel) if rel != b"/" else (point or b"/")

    def drain(self) -> list[FileOpen]:
        """The events read since the last drain, in queue order."""
        with self._lock:
            out, self._events = self._events, []
        return out

    def stop(self) -> list[FileOpen]:
        """Read what is left in the queue, stop the thread; the events not drained yet. Call once
        every process of the sandbox has ended (their last closes are queued by then)."""
        if self._thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._stop_w, b"x")
            self._thread.join()
            self._thread = None
        else:
            self._read_all()
        if self._error is not None:
            raise self._error
        return self.drain()

    def close(self) -> None:
        if self._thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._stop_w, b"x")
            self._thread.join(5.0)
            self._thread = None
        for fd in (self.fd, self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fd = self._stop_r = self._stop_w = -1


class CommandOpens:
    """The file opens of one bubblewrap command, from its start to the end of its processes.

        opens = CommandOpens()
        argv = bwrap ... opens.args() ... -- CMD      (``--block-fd R``; pass ``opens.pass_fds``)
        proc = Popen(argv, pass_fds=opens.pass_fds)
        opens.started()                             the harness's copy of R closed
        opens.begin(proc.pid)                       marks set, the command released (always)
        ... opens.drain() ...                       the events so far
        rest = opens.finish()                       once every process of the box has ended
        opens.lost                                  None, or why the capture is incomplete
        opens.close()

    ``begin`` never raises: whatever fails (fanotify refused, the sandbox gone before it was
    marked, a mark refused) lets the command go on unmarked and sets ``lost``, so the caller
    cannot take a capture that missed opens for a complete one; so does a queue overflow or an
    event whose file could not be named.
    """

    def __init__(self) -> None:
        self._block_r, self._block_w = os.pipe()
        self._r_open = True
        self.recorder: MountRecorder | None = None
        self.lost: str | None = None

    def args(self) -> list[str]:
        return ["--block-fd", str(self._block_r)]

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._block_r,) if self._r_open else ()

    def started(self) -> None:
        if self._r_open:
            os.close(self._block_r)
            self._r_open = False

    def begin(self, pid: int, timeout: float = 10.0) -> None:
        """Mark the sandbox ``pid`` (bwrap) set up, then release its command."""
        try:
            self.recorder = MountRecorder()
            child = wait_blocked(pid, self._block_r, timeout)
            self.recorder.mark_namespace(child)
            self.recorder.start()
        except FanotifyError as exc:
            self.lost = f"fanotify capture failed: {exc.strerror or exc}"
        finally:
            self.started()
            if self._block_w >= 0:
                with contextlib.suppress(OSError):
                    os.write(self._block_w, b"x")
                os.close(self._block_w)
                self._block_w = -1

    def drain(self) -> list[FileOpen]:
        return self.recorder.drain() if self.recorder is not None else []

    def finish(self) -> list[FileOpen]:
        """The events not drained yet; sets ``lost`` on an overflow or unnamed files."""
        rec = self.recorder
        if rec is None or rec.fd < 0:
            return []
        try:
            rest = rec.stop()
        except OSError as exc:
            self.lost = self.lost or f"fanotify capture failed: {exc}"
            return []
        if rec.overflowed:
            self.lost = self.lost or "the fanotify queue overflowed (FAN_Q_OVERFLOW)"
        elif rec.unresolved:
            self.lost = self.lost or f"fanotify reported {rec.unresolved} files it could not name"
        return rest

    def close(self) -> None:
        self.started()
        if self._block_w >= 0:
            with contextlib.suppress(OSError):
                os.close(self._block_w)
            self._block_w = -1
        if self.recorder is not None:
            self.recorder.close()


_status_lock = threading.Lock()
_status: tuple[bool, str] | None = None


def fanotify_status(*, refresh: bool = False) -> tuple[bool, str]:
    """Whether this capture works here (checked once per process, cached): a group made and a
    mount mark set on the mount of a temporary folder, then dropped. ``LEDGER_CAPTURE_FANOTIFY=off``
    answers no without checking."""
    global _status
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return False, f"fanotify capture turned off ({ENV}=off)"
    with _status_lock:
        if _status is None or refresh:
            _status = _probe()
        return _status


def _probe() -> tuple[bool, str]:
    import tempfile

    try:
        fd = _init()
    except FanotifyError as exc:
        return False, f"fanotify is not permitted here ({exc.strerror or exc})"
    try:
        where = tempfile.gettempdir().encode()
        if _lib().fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_CLOSE_NOWRITE, _AT_FDCWD,
                                where) != 0:
            err = ctypes.get_errno()
            return False, f"fanotify mount marks are not permitted here ({os.strerror(err)})"
        if _READ_NR.get(platform.machine()) is None and not os.path.exists("/proc/self/wchan"):
            return False, f"cannot tell a blocked sandbox start on {platform.machine()}"
    finally:
        os.close(fd)
    return True, "fanotify mount marks available"


__all__ = ["ENV", "EVENTS", "CommandOpens", "FanotifyError", "FileOpen", "MountRecorder", "fanotify_status",
           "mount_id", "namespace_mounts", "wait_blocked"]
