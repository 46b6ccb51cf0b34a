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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import UsageError

SANDBOX_UID = 1000
SANDBOX_GID = 1000
# The system: read-only when it is a folder, recreated when it is a symlink (merged /usr).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Folders whose presence in a bind would expose the whole host.
_TOO_WIDE = frozenset({"/", "/home", "/root", "/tmp", "/var", "/opt", "/srv", "/mnt", "/media",
                       "/run", "/proc", "/sys", "/dev"})


def _norm(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (both normalised, absolute)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


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


def system_binds() -> tuple[list[str], list[tuple[str, str]]]:
    """(read-only folders, symlinks) for the system paths present on this host."""
    folders: list[str] = []
    links: list[tuple[str, str]] = []
    for p in SYSTEM_PATHS:
        if os.path.islink(p):
            links.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            folders.append(p)
    return folders, links


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


def _venv_root(path: str) -> str | None:
    """The virtualenv holding ``path`` (a folder with ``pyvenv.cfg``), if any."""
    cur = os.path.dirname(path)
    while cur not in ("", "/"):
        if os.path.isfile(os.path.join(cur, "pyvenv.cfg")):
            return cur
        cur = os.path.dirname(cur)
    return None


def _venv_home(venv: str) -> str | None:
    """The base installation of a virtualenv (``home = .../bin`` in ``pyvenv.cfg``)."""
    try:
        text = Path(venv, "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip().startswith("/"):
            return os.path.dirname(_norm(os.path.realpath(value.strip())))
    return None


def _node_prefix(path: str) -> str | None:
    """The npm prefix or package root of a program under ``node_modules``."""
    parts = path.split("/")
    if "node_modules" not in parts:
        return None
    i = parts.index("node_modules")
    root = "/".join(parts[:i]) or "/"
    # <prefix>/lib/node_modules/... -> <prefix>
    prefix = os.path.dirname(root) if os.path.basename(root) == "lib" else root
    if prefix not in _TOO_WIDE:
        return prefix
    # Reached through a merged-/usr link (/bin/x -> ../lib/node_modules/...), the prefix is "/":
    # show the package alone (node_modules/<name> or node_modules/@scope/<name>).
    width = 3 if len(parts) > i + 2 and parts[i + 1].startswith("@") else 2
    return "/".join(parts[:i + width])


def _shebang(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def _which(name: str, path_env: str) -> str | None:
    for folder in path_env.split(os.pathsep):
        if not folder:
            continue
        cand = os.path.join(folder, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def install_tree(program: str, path_env: str, _depth: int = 0) -> list[str]:
    """The folders an agent program needs read-only: its virtualenv (and that venv's base
    installation), its npm prefix, or its own folder; then the same for the interpreter its
    ``#!`` line names (``#!/usr/bin/env node`` resolved through ``path_env``)."""
    found = program if "/" in program else _which(program, path_env)
    if found is None:
        return []
    out: list[str] = []
    hops = [_norm(found)]  # every link of a chain (bin/x -> ../lib/x -> ...) must resolve inside
    while os.path.islink(hops[-1]) and len(hops) < 40:
        hops.append(_norm(os.path.join(os.path.dirname(hops[-1]), os.readlink(hops[-1]))))
    for candidate in dict.fromkeys([*hops, _norm(os.path.realpath(found))]):
        tree = _venv_root(candidate)
        if tree is not None:
            out.append(tree)
            home = _venv_home(tree)
            if home:
                out.append(home)
            continue
        tree = _node_prefix(candidate)
        out.append(tree if tree else os.path.dirname(candidate))
    if _depth < 2:
        words = _shebang(_norm(os.path.realpath(found)))
        if words:
            interp = words[0]
            if os.path.basename(interp) == "env" and len(words) > 1:
                interp = next((w for w in words[1:] if not w.startswith("-")), "")
            if interp:
                out += install_tree(interp, path_env, _depth + 1)
    return out


def _minimal(paths: Iterable[str]) -> list[str]:
    """Drop paths below another path of the list, and the system folders (bound anyway)."""
    system = [p for p in SYSTEM_PATHS if os.path.isdir(p) and not os.path.islink(p)]
    uniq = sorted({_norm(p) for p in paths if p and os.path.exists(p)})
    out: list[str] = []
    for p in uniq:
        if any(under(p, s) for s in system):
            continue
        if any(under(p, o) for o in out):
            continue
        out.append(p)
    return out


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
    readable = [p for p in _minimal(wanted) if not any(under(p, w) for w in writable)]
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
