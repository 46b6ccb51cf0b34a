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

``StartStatus`` tells a sandbox that never ran its command (bubblewrap could not apply the policy,
or could not execute the program inside) from a command that ran and failed: bwrap's
``--json-status-fd`` gets an ``exit-code`` record only once the command inside has run and ended;
a sandbox that failed to start exits 1 without one, its reason on stderr (``bwrap: ...``).
``check_start(policy)`` starts a policy with a trivial command, the same way (``ledger run``'s
pre-flight does so through the port: ``ledger.sandbox.preflight``).

``probe_bwrap()`` checks once per process that bubblewrap works with these exact flags; the
``bwrap`` backend of the Sandbox port (``ledger.sandbox.bubblewrap``) builds its boxes on this
module, and ``ledger.sandbox.registry.resolve`` turns ``--sandbox`` into a backend.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from ledger.errors import UsageError
from ledger.sandbox.policy import SANDBOX_GID, SANDBOX_UID, SandboxPolicy
from ledger.sandbox.port import SandboxStatus
from ledger.spawn import read_available

HOSTNAME = "ledger-sandbox"
INSTALL_HINT = ("install bubblewrap for isolation (Debian/Ubuntu: apt-get install bubblewrap; "
                "Fedora: dnf install bubblewrap)")


def _depth_key(path: str) -> tuple[int, str]:
    return (path.rstrip("/").count("/"), path)


def bwrap_command(policy: SandboxPolicy, argv: Sequence[str], *, program: str | None = None,
                  extra: Sequence[str] = (), init: Sequence[str] = ()) -> list[str]:
    """The full command line that runs ``argv`` inside ``policy``'s sandbox.

    ``extra`` is inserted before ``--`` (the network module binds its socket there); ``init``
    runs ``argv`` inside (``ledger.sandbox.limits``: the rlimits, and the attempt's waiter).
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
    cmd += ["--remount-ro", "/", "--chdir", policy.cwd, *extra, "--", *init, *argv]
    return cmd


# --------------------------------------------------------------------------- start failures

START_MESSAGE_LIMIT = 500  # bytes of bwrap's own message kept for ``sandbox.failed``
BACKEND = "bwrap"


class StartStatus:
    """One sandbox start, watched through bwrap's ``--json-status-fd`` (module docstring).

    ``args()`` go before ``--`` (``bwrap_command(..., extra=...)``), ``pass_fds`` to ``Popen``;
    ``started()`` once the process is started (closes the harness's write end); ``failure(rc,
    stderr)`` after it ended: bwrap's message when the sandbox never ran its command, else None.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)

    def args(self) -> list[str]:
        return ["--json-status-fd", str(self._w)]

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._w,) if self._w >= 0 else ()

    def started(self) -> None:
        if self._w >= 0:
            os.close(self._w)
            self._w = -1

    def _records(self) -> bytes:
        return read_available(self._r, 1 << 16)

    def failure(self, returncode: int | None, stderr: str) -> str | None:
        """bwrap's message when the sandbox never ran its command (exit 1, no ``exit-code``
        record, a ``bwrap:`` line first on stderr), else None. Closes the status pipe."""
        self.started()
        try:
            records = self._records()
        finally:
            self.close()
        if returncode != 1 or b'"exit-code"' in records:
            return None
        lines = [ln.strip() for ln in stderr.splitlines()
                 if ln.strip() and not ln.startswith("strace: ")]  # the tracer's own warnings
        if not lines or not lines[0].startswith("bwrap: "):
            return None
        return start_message(lines[0])

    def close(self) -> None:
        self.started()
        if self._r >= 0:
            os.close(self._r)
            self._r = -1


def start_message(text: str, limit: int = START_MESSAGE_LIMIT) -> str:
    """bwrap's message, one line, bounded (the caller redacts it)."""
    line = " ".join(text.split())
    raw = line.encode("utf-8", "replace")
    if len(raw) <= limit:
        return line
    return raw[:limit].decode("utf-8", "ignore") + "..."


def check_start(policy: SandboxPolicy, *, program: str | None = None,
                timeout: float = 20.0) -> str | None:
    """Start ``policy``'s sandbox with a trivial command; bwrap's message when it cannot start
    (the pre-flight of ``ledger run``), None when it can."""
    status = StartStatus()
    argv = bwrap_command(policy, ["/bin/sh", "-c", ":"], program=program, extra=status.args())
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              pass_fds=status.pass_fds, cwd=policy.cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        status.close()
        return start_message(f"bwrap: could not start the sandbox: {exc}")
    return status.failure(proc.returncode, proc.stderr.decode("utf-8", "replace"))


# --------------------------------------------------------------------------- availability


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
    """Resolve ``auto | bwrap | none`` on this machine (``ledger.sandbox.registry.resolve``)."""
    from ledger.sandbox.registry import resolve

    return resolve(requested)
