"""The one place that turns a ``SandboxPolicy`` into a bubblewrap command line, and the probe.

    bwrap --unshare-all --unshare-user --disable-userns --die-with-parent --new-session
          --uid 1000 --gid 1000 --hostname ledger-sandbox --cap-drop ALL
          --proc /proc --dev /dev
          --symlink usr/bin /bin ...            (merged /usr)
          --ro-bind P P ...                      (system, interpreter, install trees)
          --bind W W ...                         (worktree, fresh home, scratch)
          --tmpfs M --remount-ro M | --ro-bind /dev/null M    (masks)
          --remount-ro /  --chdir CWD  --  ARGV...

New user, PID, mount, IPC, UTS, cgroup and network namespaces (only loopback inside); no nested
user namespaces (so no private mount namespace either); the agent runs as uid/gid 1000 with no
capabilities. When the agent's first process exits, bwrap's init (PID 1 inside) exits and the
kernel kills every process left in the namespace; ``--die-with-parent`` does the same when the
harness dies.

``sandbox_status(mode)`` resolves ``auto | bwrap | none`` once per process: ``bwrap`` where it
cannot work is ``NothingToRun`` (exit 3); ``auto`` falls back to ``none`` with one line saying
how to get isolation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import NothingToRun, UsageError
from ledger.sandbox.policy import SANDBOX_GID, SANDBOX_UID, SandboxPolicy

SANDBOX_MODES = ("auto", "bwrap", "none")
HOSTNAME = "ledger-sandbox"
INSTALL_HINT = ("install bubblewrap for isolation (Debian/Ubuntu: apt-get install bubblewrap; "
                "Fedora: dnf install bubblewrap)")


def _depth_key(path: str) -> tuple[int, str]:
    return (path.rstrip("/").count("/"), path)


def bwrap_command(policy: SandboxPolicy, argv: Sequence[str], *, program: str | None = None,
                  extra: Sequence[str] = ()) -> list[str]:
    """The full command line that runs ``argv`` inside ``policy``'s sandbox.

    ``extra`` is inserted before ``--`` (the network module binds its socket there).
    """
    if not argv:
        raise UsageError("nothing to run in the sandbox: empty command line")
    prog = program or shutil.which("bwrap") or "bwrap"
    cmd = [prog, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
           "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
           "--hostname", HOSTNAME, "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev"]
    for link, target in policy.symlinks:
        cmd += ["--symlink", target, link]
    mounts: list[tuple[str, list[str]]] = []
    for p in policy.readable:
        mounts.append((p, ["--ro-bind", p, p]))
    for p in (*policy.writable, *policy.sockets):
        mounts.append((p, ["--bind", p, p]))
    for m in policy.masked:
        if os.path.isdir(m) and not os.path.islink(m):
            mounts.append((m, ["--perms", "0555", "--tmpfs", m, "--remount-ro", m]))
        else:
            mounts.append((m, ["--ro-bind", "/dev/null", m]))
    # Parents before children, so a mask or a nested bind lands on top of its parent's bind.
    for _path, args in sorted(mounts, key=lambda item: _depth_key(item[0])):
        cmd += args
    for name, value in policy.env:
        cmd += ["--setenv", name, value]
    cmd += ["--remount-ro", "/", "--chdir", policy.cwd, *extra, "--", *argv]
    return cmd


# --------------------------------------------------------------------------- availability


@dataclass(frozen=True)
class SandboxStatus:
    """The outcome of resolving a requested mode on this machine."""

    requested: str
    mode: str  # "bwrap" | "none"
    reason: str
    version: str | None = None

    @property
    def isolation(self) -> str:
        return "sandbox" if self.mode == "bwrap" else "none"


_lock = threading.Lock()
_probed: tuple[bool, str, str | None] | None = None


def bwrap_version(program: str) -> str | None:
    try:
        proc = subprocess.run([program, "--version"], capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = proc.stdout.decode("utf-8", "replace").split()
    return words[-1] if proc.returncode == 0 and words else None


def _probe() -> tuple[bool, str, str | None]:
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap needs Linux (this is {sys.platform})", None
    prog = shutil.which("bwrap")
    if prog is None:
        return False, "bwrap is not on PATH", None
    version = bwrap_version(prog)
    from ledger.sandbox.policy import PolicyRequest, build_policy

    with tempfile.TemporaryDirectory(prefix="ledger-probe-") as tmp:
        policy = build_policy(PolicyRequest(cwd=Path(tmp),
                                            writable=[Path(tmp)],
                                            purpose="probe"))
        argv = bwrap_command(policy, ["/bin/sh", "-c", "echo ok > probe"], program=prog)
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap probe failed: {exc}", version
        ok = proc.returncode == 0 and os.path.isfile(os.path.join(tmp, "probe"))
    if not ok:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = err[-1][:200] if err else f"exit {proc.returncode}"
        return False, f"bwrap {version or '?'} does not work here ({detail})", version
    return True, f"bubblewrap {version or '?'}", version


def probe_bwrap(*, refresh: bool = False) -> tuple[bool, str, str | None]:
    """(works, reason, version) for bubblewrap with the exact flags the harness uses (cached)."""
    global _probed
    with _lock:
        if _probed is None or refresh:
            _probed = _probe()
        return _probed


def sandbox_status(requested: str) -> SandboxStatus:
    """Resolve ``auto | bwrap | none`` on this machine (see the module docstring)."""
    if requested not in SANDBOX_MODES:
        raise UsageError(f"unknown sandbox mode {requested!r}; use one of {', '.join(SANDBOX_MODES)}")
    if requested == "none":
        return SandboxStatus(requested, "none", "isolation disabled (--sandbox none)")
    ok, reason, version = probe_bwrap()
    if ok:
        return SandboxStatus(requested, "bwrap", reason, version)
    if requested == "bwrap":
        raise NothingToRun(f"--sandbox bwrap was requested but {reason}; {INSTALL_HINT}")
    return SandboxStatus(requested, "none", f"no isolation: {reason}; {INSTALL_HINT}")
