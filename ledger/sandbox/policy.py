"""What a sandbox shows: a typed policy, built from the attempt's folders and recorded as data.

    SandboxPolicy
        writable    folders bound read-write at their own path (worktree, fresh home, scratch)
        readable    folders and files bound read-only at their own path (system, interpreter,
                    the agent's install tree, the harness code a built-in agent runs)
        symlinks    top-level system links recreated as links (``/bin -> usr/bin`` on merged-usr)
        masked      paths inside a bound tree that the sandbox hides (an empty read-only tmpfs,
                    or ``/dev/null`` over a file): task folders, solutions, the ledger home,
                    files of ``/etc`` that only their owner may read
        network     "none" (no interface but loopback) or "proxy" (see ``ledger.sandbox.net``)

Every bind keeps its host path, so a path the agent names inside is the same path outside: the
activity trace, the scan scope and the harness's own reads after the agent all mean one file.
Nothing else of the host is visible: a fresh ``/proc`` (own PID namespace), a minimal ``/dev``,
and a read-only root. ``as_data`` is what the attestation and ``agent.started`` record.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import UsageError
from ledger.sandbox.paths import TOO_WIDE, canonical_binds, install_tree, norm, system_binds, under

SANDBOX_UID = 1000
SANDBOX_GID = 1000
_TOO_WIDE = TOO_WIDE
_norm = norm


@dataclass(frozen=True)
class SandboxPolicy:
    """One sandbox's view of the filesystem and the network (see the module docstring)."""

    cwd: str
    writable: tuple[str, ...]
    readable: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...] = ()  # (link path, target)
    masked: tuple[str, ...] = ()
    network: str = "none"  # "none" | "proxy"
    env: tuple[tuple[str, str], ...] = ()  # variables set inside (HOME, TMPDIR, proxies)
    copied_config: tuple[str, ...] = ()  # files copied into the fresh home, by their home path
    purpose: str = "agent"  # "agent" | "grading"
    sockets: tuple[str, ...] = ()  # unix sockets bound in at their path (the harness's proxy)

    def __post_init__(self) -> None:
        for p in (self.cwd, *self.writable, *self.readable, *self.masked, *self.sockets):
            if not isinstance(p, str) or not p.startswith("/"):
                raise UsageError(f"sandbox paths must be absolute, got {p!r}")
        for p in (*self.writable, *self.readable):
            if p in _TOO_WIDE:
                raise UsageError(f"refusing to bind {p} into a sandbox: it would expose the host")
        if self.network not in ("none", "proxy"):
            raise UsageError(f"sandbox network must be none or proxy, got {self.network!r}")
        if not any(under(self.cwd, w) for w in self.writable):
            raise UsageError("the sandbox's working directory must be one of its writable folders")

    def visible(self, path: str) -> bool:
        """Whether ``path`` (absolute, normalised) is shown by a bind and not masked."""
        if any(under(path, m) for m in self.masked):
            return False
        return any(under(path, b) for b in (*self.writable, *self.readable))

    def as_data(self) -> dict[str, Any]:
        return {
            "purpose": self.purpose,
            "cwd": self.cwd,
            "writable": list(self.writable),
            "readable": list(self.readable),
            "symlinks": [list(s) for s in self.symlinks],
            "masked": list(self.masked),
            "network": self.network,
            "env": sorted(k for k, _v in self.env),
            "copied_config": list(self.copied_config),
            "sockets": list(self.sockets),
            "uid": SANDBOX_UID,
            "namespaces": ["user", "pid", "mount", "ipc", "uts", "net", "cgroup"],
        }


# --------------------------------------------------------------------------- building


def private_etc_files(etc: str = "/etc") -> list[str]:
    """Entries of ``/etc`` (one level) that others may not read: hidden inside the sandbox,
    where the agent's uid maps to the host user that owns them."""
    out: list[str] = []
    try:
        with os.scandir(etc) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    continue
                if not st.st_mode & stat.S_IROTH:
                    out.append(entry.path)
    except OSError:
        return []
    return sorted(out)


@dataclass
class PolicyRequest:
    """The attempt's folders and what the agent needs; ``build_policy`` turns it into a policy."""

    cwd: Path
    writable: Sequence[Path]
    programs: Sequence[str] = ()  # argv[0] and friends: their install trees become readable
    path_env: str = ""
    readable: Sequence[str] = ()  # explicit extra read-only paths (interpreter, harness code)
    hidden: Sequence[str] = ()  # must not be visible even when inside a readable tree
    env: Sequence[tuple[str, str]] = ()
    copied_config: Sequence[str] = ()
    network: str = "none"
    purpose: str = "agent"
    extra_masked: Sequence[str] = field(default_factory=list)
    sockets: Sequence[str] = ()


def build_policy(req: PolicyRequest) -> SandboxPolicy:
    """The policy for ``req``: system read-only, the request's folders, masks over hidden paths.

    A hidden path that contains a writable folder, the working directory or a readable tree is
    an error: the sandbox could not show one without the other.
    """
    writable = [_norm(p) for p in req.writable]
    folders, links = system_binds()
    wanted = list(req.readable)
    for prog in req.programs:
        wanted += install_tree(prog, req.path_env)
    readable = canonical_binds(wanted, inside=writable)
    hidden = sorted({_norm(h) for h in req.hidden})
    for h in hidden:
        for p in (*writable, *readable):
            if under(p, h):
                raise UsageError(f"sandbox cannot hide {h}: it contains {p}, which the agent needs")
    binds = [*folders, *readable]
    masked = [h for h in hidden if any(under(h, b) for b in binds) and os.path.exists(h)]
    if "/etc" in folders:
        masked += private_etc_files()
    masked += [_norm(m) for m in req.extra_masked if os.path.exists(m)]
    # A mask inside another mask is already hidden (and could not be mounted on a read-only tmpfs).
    masked = [m for m in dict.fromkeys(masked) if not any(o != m and under(m, o) for o in masked)]
    return SandboxPolicy(
        cwd=_norm(req.cwd),
        writable=tuple(writable),
        readable=tuple([*folders, *readable]),
        symlinks=tuple(links),
        masked=tuple(dict.fromkeys(masked)),
        network=req.network,
        env=tuple(req.env),
        copied_config=tuple(req.copied_config),
        purpose=req.purpose,
        sockets=tuple(_norm(p) for p in req.sockets),
    )


__all__ = ["SANDBOX_GID", "SANDBOX_UID", "PolicyRequest", "SandboxPolicy", "build_policy",
           "install_tree", "private_etc_files", "under"]
