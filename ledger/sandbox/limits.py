"""Resource limits of every attempt (agent and grading): values, mechanism, hits.

    Limits          the values: processes, memory, cpu_s, file_size, open_files, disk, disk_files
                    (``DEFAULTS``; ``[limits]`` of ``ledger.toml``; a task's ``limits:``, which wins)
    cgroup_support  probed once per process: a writable cgroup v2 subtree with the ``pids`` and
                    ``memory`` controllers, else writable cgroup v1 ``pids`` / ``memory``
                    hierarchies, else none
    Enforcement     one process tree's limits while it runs: its cgroups (made, joined before
                    exec, read for hits, emptied and removed), its rlimits, its disk watch

Mechanisms, per limit (``as_data`` records which one each limit got):

    processes   the pids cgroup (``pids.max``, the whole tree); else ``RLIMIT_NPROC`` set inside
                the sandbox's user namespace, where it counts that namespace's processes only
                (outside one it counts every process of the real uid, so ``--sandbox none`` adds
                the uid's current count); root is exempt from ``RLIMIT_NPROC``: "none"
    memory      the memory cgroup (``memory.max`` / ``memory.limit_in_bytes`` and the swap
                limit, the whole tree); else ``RLIMIT_DATA`` per process (not ``RLIMIT_AS``:
                V8 and Go reserve address space they never touch)
    cpu_s       ``RLIMIT_CPU`` per process (SIGXCPU, then SIGKILL 5 s later)
    file_size   ``RLIMIT_FSIZE`` per process (SIGXFSZ, or EFBIG where the signal is ignored)
    open_files  ``RLIMIT_NOFILE`` per process
    disk        the attempt's writable folders (worktree, home, scratch), measured by the
    disk_files  harness while the agent runs (``DiskWatch``: a bounded walk, never following a
                link, allocated blocks and entries); over either, the agent is stopped

In the sandbox the rlimits are set by the namespace's first process (``init_script``), so they
bind the agent and everything it starts, and not bwrap or strace; with ``--sandbox none`` the
harness sets them between fork and exec. The cgroups are joined between fork and exec (so
strace and bwrap, when they wrap the agent, are in them too).

Hits (``limit.hit`` entries, ``{which, value, mechanism, detail}``) are what the kernel or the
harness can tell: the pids cgroup's refused forks, the memory cgroup's OOM kills, the disk walk,
and a process ended by SIGXCPU / SIGXFSZ (or, in the sandbox, the shell's 128+N exit status).
An rlimit the kernel enforces by an error code (EAGAIN, ENOMEM, EMFILE, EFBIG) leaves no trace
the harness can see; docs/agents.md says so.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.limits import (  # the values and their parsing (a task declares them too)
    DEFAULTS,
    GIB,
    KEYS,
    KIB,
    MIB,
    Limits,
    parse_limits,
    resolve_limits,
)
from ledger.spawn import defer_stop, spawning

# --------------------------------------------------------------------------- cgroups


@dataclass(frozen=True)
class CgroupSupport:
    """Where this process may make cgroups: ``version`` "v2" | "v1" | "none"; ``parents``
    maps a controller (``pids``, ``memory``) to the folder its child cgroups go in."""

    version: str
    parents: Mapping[str, str]
    reason: str


_probe_lock = threading.Lock()
_probed: CgroupSupport | None = None


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in parts[1].split(",") if parts[1] else [""]:
            out[ctrl] = parts[2]
    return out


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of the cgroup mounts, from /proc/self/mountinfo."""
    out = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        rparts = right.split()
        lparts = left.split()
        if len(rparts) < 3 or len(lparts) < 5 or rparts[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((lparts[4], rparts[0], set(rparts[2].split(","))))
    return out


def _try_child(parent: str, control: str) -> bool:
    """Whether a child cgroup of ``parent`` can be made and shows ``control`` (then removed)."""
    probe = os.path.join(parent, f"ledger-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(probe, control))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def _probe_cgroups() -> CgroupSupport:
    own = _own_cgroups()
    mounts = _mounts()
    for point, fstype, _opts in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = os.path.normpath(point + "/" + own[""])
        try:
            controllers = set(Path(parent, "cgroup.subtree_control").read_text().split())
        except OSError:
            continue
        if {"pids", "memory"} <= controllers and _try_child(parent, "pids.max") \
                and _try_child(parent, "memory.max"):
            return CgroupSupport("v2", {"pids": parent, "memory": parent},
                                 f"cgroup v2 at {parent}")
    parents: dict[str, str] = {}
    for point, fstype, opts in mounts:
        if fstype != "cgroup":
            continue
        for ctrl, control in (("pids", "pids.max"), ("memory", "memory.limit_in_bytes")):
            if ctrl in opts and ctrl not in parents and ctrl in own:
                parent = os.path.normpath(point + "/" + own[ctrl])
                if _try_child(parent, control):
                    parents[ctrl] = parent
    if parents:
        return CgroupSupport("v1", parents, "cgroup v1 " + ", ".join(
            f"{c} at {p}" for c, p in sorted(parents.items())))
    return CgroupSupport("none", {}, "no writable cgroup hierarchy with pids or memory")


def cgroup_support(*, refresh: bool = False) -> CgroupSupport:
    """The probe's answer (cached per process)."""
    global _probed
    with _probe_lock:
        if _probed is None or refresh:
            _probed = _probe_cgroups()
        return _probed


# --------------------------------------------------------------------------- one process tree


def _read_int(path: str, key: str | None = None) -> int:
    """A number file (``key`` None) or the value of ``key`` in a flat keyed file; 0 if absent."""
    try:
        text = Path(path).read_text()
    except OSError:
        return 0
    if key is None:
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            return 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            with contextlib.suppress(ValueError):
                return int(parts[1])
    return 0


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _uid_processes(uid: int) -> int:
    n = 0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        n += 1
    return n


def _clamp(res: int, value: int) -> int:
    """``value`` no higher than this process's hard limit of ``res`` (which cannot be raised)."""
    _soft, hard = resource.getrlimit(res)
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


CPU_GRACE_S = 5  # the hard CPU limit (SIGKILL) is this much above the soft one (SIGXCPU)
SIGNAL_HITS = {signal.SIGXCPU: "cpu_s", signal.SIGXFSZ: "file_size"}


class Enforcement:
    """The limits of one process tree (an agent's run, or one grading command).

    ``sandboxed``: the tree runs in a bwrap sandbox (its rlimits come from ``init_script``);
    otherwise ``preexec`` sets them. Use: ``preexec`` as the Popen ``preexec_fn`` (None when
    there is nothing to do between fork and exec), ``hits()`` after the run, ``close()``."""

    def __init__(self, limits: Limits, *, sandboxed: bool, label: str = "attempt",
                 support: CgroupSupport | None = None) -> None:
        self.limits = limits
        self.sandboxed = sandboxed
        self.support = support or (cgroup_support() if limits.cgroups else CgroupSupport(
            "none", {}, "cgroups turned off ([limits] cgroups = false)"))
        self.cgroups: dict[str, str] = {}  # controller -> this tree's cgroup folder
        self._closed = False
        name = f"ledger-{label}-{os.getpid()}-{secrets.token_hex(4)}"
        for ctrl in ("pids", "memory"):
            parent = self.support.parents.get(ctrl)
            if parent is None:
                continue
            path = os.path.join(parent, name)
            if path not in self.cgroups.values():
                try:
                    os.mkdir(path)
                except FileExistsError:
                    pass
                except OSError:
                    continue
            self.cgroups[ctrl] = path
        try:
            self._configure()
        except BaseException:
            self.close()
            raise
        self.mechanism = self._mechanisms()
        self._rlimits = self._rlimit_values()
        self._procs = [os.path.join(p, "cgroup.procs").encode()
                       for p in dict.fromkeys(self.cgroups.values())]

    def _configure(self) -> None:
        v2 = self.support.version == "v2"
        lim = self.limits
        if "pids" in self.cgroups:
            _write(os.path.join(self.cgroups["pids"], "pids.max"), str(lim.processes))
        if "memory" in self.cgroups:
            mem = self.cgroups["memory"]
            if v2:
                _write(os.path.join(mem, "memory.max"), str(lim.memory))
                with contextlib.suppress(OSError):
                    _write(os.path.join(mem, "memory.swap.max"), "0")
            else:
                _write(os.path.join(mem, "memory.limit_in_bytes"), str(lim.memory))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(lim.memory))

    def _mechanisms(self) -> dict[str, str]:
        v = self.support.version
        procs = f"cgroup-{v}" if "pids" in self.cgroups else (
            "none (root is exempt from RLIMIT_NPROC)" if os.geteuid() == 0 else "rlimit")
        return {
            "processes": procs,
            "memory": f"cgroup-{v}" if "memory" in self.cgroups else "rlimit-data",
            "cpu_s": "rlimit", "file_size": "rlimit", "open_files": "rlimit",
            "disk": "harness-walk", "disk_files": "harness-walk",
        }

    def _rlimit_values(self) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) the tree gets, clamped to this process's hard limits."""
        lim = self.limits
        out = [(resource.RLIMIT_CPU, lim.cpu_s, lim.cpu_s + CPU_GRACE_S),
               (resource.RLIMIT_FSIZE, lim.file_size, lim.file_size),
               (resource.RLIMIT_NOFILE, lim.open_files, lim.open_files)]
        if "memory" not in self.cgroups:
            out.append((resource.RLIMIT_DATA, lim.memory, lim.memory))
        if self.mechanism["processes"] == "rlimit":
            n = lim.processes if self.sandboxed else lim.processes + _uid_processes(os.getuid())
            out.append((resource.RLIMIT_NPROC, n, n))
        return [(res, _clamp(res, soft), _clamp(res, hard)) for res, soft, hard in out]

    def as_data(self) -> dict[str, Any]:
        """What ``agent.started`` and the attestation record: values and mechanism per limit."""
        return {"values": self.limits.as_data(), "mechanism": dict(self.mechanism),
                "cgroup": self.support.version}

    # ---- starting

    @property
    def preexec(self) -> Callable[[], None] | None:
        """Between fork and exec: join the cgroups; unsandboxed, also set the rlimits."""
        procs = list(self._procs)
        rlimits = [] if self.sandboxed else list(self._rlimits)
        if not procs and not rlimits:
            return None
        setrlimit = resource.setrlimit

        def child() -> None:
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            for res, soft, hard in rlimits:
                setrlimit(res, (soft, hard))

        return child

    def init_script(self, status_fd: int | None = None, release_fd: int | None = None) -> list[str]:
        """The argv prefix that starts a sandboxed command: ``/bin/sh`` sets the rlimits (so
        they bind the command and not bwrap or strace) and runs it. With ``status_fd`` /
        ``release_fd`` it is the attempt's waiter too: when the command exits it writes
        ``ledger-init exit PID RC`` to ``status_fd`` and waits for ``release_fd`` to close
        before it exits (and the namespace ends), so the harness can count what is left."""
        flags = {resource.RLIMIT_CPU: "-t", resource.RLIMIT_FSIZE: "-f",
                 resource.RLIMIT_NOFILE: "-n", resource.RLIMIT_DATA: "-d"}
        lines = [": ledger-init"]
        for res, soft, _hard in self._rlimits:
            if res == resource.RLIMIT_NPROC:  # bash: -u; dash: -p
                cmd = f"{{ ulimit -u {soft} 2>/dev/null || ulimit -p {soft}; }}"
            elif res == resource.RLIMIT_FSIZE:
                cmd = f"ulimit -f {max(1, soft // 512)}"
            elif res == resource.RLIMIT_DATA:
                cmd = f"ulimit -d {max(1, soft // 1024)}"
            elif res == resource.RLIMIT_CPU:  # SIGXCPU at the soft limit, SIGKILL at the hard
                cmd = f"ulimit -S -t {soft} && ulimit -H -t {_hard}"
            else:
                cmd = f"ulimit {flags[res]} {soft}"
            lines.append(f"{cmd} || {{ echo 'ledger: cannot set limit: {cmd}' >&2; exit 125; }}")
        if status_fd is None or release_fd is None:
            lines.append('exec "$@"')
        else:
            lines += ['"$@"', "rc=$?",
                      f'echo "ledger-init exit $$ $rc" > /proc/self/fd/{int(status_fd)}',
                      f"read _ < /proc/self/fd/{int(release_fd)}", 'exit "$rc"']
        return ["/bin/sh", "-c", "\n".join(lines), "ledger-init"]

    # ---- after

    def hits(self, *, exit_code: int | None = None, signal_no: int | None = None) -> list[dict[str, Any]]:
        """The limits the tree ran into, as far as the kernel tells (module docstring)."""
        out: list[dict[str, Any]] = []
        v2 = self.support.version == "v2"
        lim = self.limits
        if "pids" in self.cgroups:
            refused = _read_int(os.path.join(self.cgroups["pids"], "pids.events"), "max")
            if refused:
                out.append({"which": "processes", "value": lim.processes,
                            "mechanism": self.mechanism["processes"],
                            "detail": f"{refused} fork(s) refused"})
        if "memory" in self.cgroups:
            mem = self.cgroups["memory"]
            kills = _read_int(os.path.join(mem, "memory.events" if v2 else "memory.oom_control"),
                              "oom_kill")
            if kills:
                out.append({"which": "memory", "value": lim.memory,
                            "mechanism": self.mechanism["memory"],
                            "detail": f"{kills} process(es) killed by the OOM killer"})
        sig = signal_no
        if sig is None and self.sandboxed and exit_code is not None and exit_code > 128:
            sig = exit_code - 128  # the in-sandbox shell reports a signal death as 128+N
        which = SIGNAL_HITS.get(sig) if sig is not None else None  # type: ignore[call-overload]
        if which is not None:
            out.append({"which": which, "value": getattr(lim, which), "mechanism": "rlimit",
                        "detail": f"the command ended by {signal.Signals(sig).name}"})
        return out

    def kill_all(self, rounds: int = 50) -> int:
        """SIGKILL every process left in the tree's cgroups; how many there were."""
        killed: set[int] = set()
        for _ in range(rounds):
            alive: set[int] = set()
            for path in self._procs:
                with contextlib.suppress(OSError, ValueError):
                    alive |= {int(x) for x in Path(path.decode()).read_text().split()}
            alive.discard(os.getpid())
            if not alive:
                break
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            killed |= alive
            time.sleep(0.01)
        return len(killed)

    def close(self) -> None:
        """Empty and remove the cgroups (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if getattr(self, "_procs", None):
            self.kill_all()
        for path in dict.fromkeys(self.cgroups.values()):
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still leaving
                    time.sleep(0.01)

    def __enter__(self) -> Enforcement:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- disk


def disk_usage(roots: Sequence[str | os.PathLike[str]], *, max_bytes: int,
               max_entries: int) -> tuple[int, int, bool]:
    """(bytes allocated, entries, over) under ``roots``: a walk that never follows a link and
    stops as soon as either bound is passed (so its cost is bounded by the limit)."""
    total = entries = 0
    seen: set[tuple[int, int]] = set()
    stack = [os.fspath(r) for r in roots]
    while stack:
        folder = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                entries += 1
                if (st.st_dev, st.st_ino) not in seen:  # hard links count once
                    if st.st_nlink > 1:
                        seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
                if total > max_bytes or entries > max_entries:
                    return total, entries, True
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total, entries, False


class DiskWatch:
    """Measures the attempt's writable folders in a thread while the agent runs; ``hit`` is
    set (``limit.hit`` data) once they pass ``disk`` or ``disk_files``. A walk runs every
    ``interval`` seconds, or less often when walks are slow (never more than ~20% of a core)."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]], limits: Limits, *,
                 interval: float = 0.25) -> None:
        self.roots = [os.fspath(r) for r in roots]
        self.limits = limits
        self.interval = interval
        self.hit: dict[str, Any] | None = None
        self.walks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ledger-disk-watch", daemon=True)

    def start(self) -> DiskWatch:
        self._thread.start()
        return self

    def check(self) -> dict[str, Any] | None:
        """One walk now; the hit (also kept in ``hit``) or None."""
        lim = self.limits
        used, entries, over = disk_usage(self.roots, max_bytes=lim.disk, max_entries=lim.disk_files)
        self.walks += 1
        if over and self.hit is None:
            which = "disk" if used > lim.disk else "disk_files"
            self.hit = {"which": which, "value": getattr(lim, which), "mechanism": "harness-walk",
                        "detail": (f"more than {lim.disk} bytes allocated" if which == "disk"
                                   else f"more than {lim.disk_files} entries")
                        + " under the attempt's writable folders"}
        return self.hit

    def _loop(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            t0 = time.monotonic()
            if self.check() is not None:
                return
            wait = max(self.interval, 5 * (time.monotonic() - t0))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


__all__ = ["DEFAULTS", "GIB", "KEYS", "KIB", "MIB", "CgroupSupport", "DiskWatch", "Enforcement",
           "Limits", "cgroup_support", "defer_stop", "disk_usage", "parse_limits",
           "resolve_limits", "spawning"]
