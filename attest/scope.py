"""The scope an attempt is scanned under (``ScanPolicy``): where the agent may read and
write, and which endpoints it may reach. Pure; ``attest.scan`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attest import digests as dg
from ledger.endpoints import host_allowed
from ledger.errors import MalformedInput, UsageError
from ledger.pathnames import under

DEFAULT_READ_ALLOWLIST = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                          "/proc", "/sys", "/dev")
DEFAULT_WRITE_ALLOWLIST = ("/dev/null", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/stdout",
                           "/dev/stderr", "/proc/self")

# --------------------------------------------------------------------------- scope policy


_SCOPE_KEYS = frozenset({"worktree", "read_allowlist", "write_allowlist", "network_allowlist",
                         "allow_dns"})
_SCOPE_LISTS = ("read_allowlist", "write_allowlist", "network_allowlist")


@dataclass(frozen=True)
class ScanPolicy:
    """Where the agent may read and write, and which endpoints it may reach.

    Paths are absolute and POSIX. A prefix allows itself and everything below it. The worktree's
    ancestor directories may be read (listed) but nothing else beside them. Network entries:
    ``host``, ``host:port``, ``*.domain[:port]``, ``[v6]:port`` or a CIDR block; ``allow_dns``
    lets port 53 through (resolvers), ``unix`` sockets are not network endpoints.
    """

    worktree: str
    read_allowlist: tuple[str, ...] = DEFAULT_READ_ALLOWLIST
    write_allowlist: tuple[str, ...] = DEFAULT_WRITE_ALLOWLIST
    network_allowlist: tuple[str, ...] = ()
    allow_dns: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.worktree, str) or not self.worktree.startswith("/"):
            raise UsageError("the scan policy needs the absolute worktree path")
        for name in ("read_allowlist", "write_allowlist"):
            for p in getattr(self, name):
                if not isinstance(p, str) or not p.startswith("/"):
                    raise UsageError(f"{name} entries must be absolute paths, got {p!r}")

    @classmethod
    def for_attempt(
        cls,
        *,
        worktree: str,
        home: str | None = None,
        scratch: str | None = None,
        interpreter_prefixes: Sequence[str] = (),
        network_allowlist: Sequence[str] = (),
        extra_read: Sequence[str] = (),
        extra_write: Sequence[str] = (),
        allow_dns: bool = True,
    ) -> ScanPolicy:
        """The usual policy: system and interpreter paths readable, the agent's home and scratch
        folders readable and writable."""
        own = tuple(p for p in (home, scratch) if p)
        return cls(
            worktree=dg.normalize_path(worktree),
            read_allowlist=tuple(dict.fromkeys(
                (*DEFAULT_READ_ALLOWLIST, *interpreter_prefixes, *own, *extra_read))),
            write_allowlist=tuple(dict.fromkeys((*DEFAULT_WRITE_ALLOWLIST, *own, *extra_write))),
            network_allowlist=tuple(network_allowlist),
            allow_dns=allow_dns,
        )

    def as_data(self) -> dict[str, Any]:
        return {
            "worktree": self.worktree,
            "read_allowlist": list(self.read_allowlist),
            "write_allowlist": list(self.write_allowlist),
            "network_allowlist": list(self.network_allowlist),
            "allow_dns": self.allow_dns,
        }

    @staticmethod
    def check_data(data: Any) -> None:
        """Raise MalformedInput unless ``from_data(data)`` builds a policy (without building it:
        verifying an attestation checks its scope, and only a re-scan needs the policy)."""
        if not (type(data) is dict or isinstance(data, Mapping)) or data.keys() != _SCOPE_KEYS:
            raise MalformedInput("scope must be {worktree, read_allowlist, write_allowlist, "
                                 "network_allowlist, allow_dns}")
        for name in _SCOPE_LISTS:
            value = data[name]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise MalformedInput(f"scope {name} must be a list of strings")
        worktree = data["worktree"]
        if not isinstance(data["allow_dns"], bool) or not isinstance(worktree, str):
            raise MalformedInput("scope worktree must be a string and allow_dns a bool")
        # what __post_init__ refuses, with the message from_data gives for it
        if not worktree.startswith("/"):
            raise MalformedInput("scope: the scan policy needs the absolute worktree path")
        for name in ("read_allowlist", "write_allowlist"):
            for p in data[name]:
                if not p.startswith("/"):
                    raise MalformedInput(f"scope: {name} entries must be absolute paths, got {p!r}")

    @classmethod
    def from_data(cls, data: Any) -> ScanPolicy:
        cls.check_data(data)
        try:
            return cls(worktree=data["worktree"], allow_dns=data["allow_dns"],
                       **{name: tuple(data[name]) for name in _SCOPE_LISTS})
        except UsageError as exc:  # not reached: check_data refuses what __post_init__ does
            raise MalformedInput(f"scope: {exc}") from exc

    def in_worktree(self, path: str) -> bool:
        return under(dg.normalize_path(path), self.worktree)

    def read_allowed(self, path: str) -> bool:
        norm = dg.normalize_path(path)
        if norm == "/" or under(self.worktree, norm):  # an ancestor of the worktree
            return True
        return any(under(norm, p) for p in self.read_allowlist)

    def read_allowed_below(self, folder: str) -> bool:
        """Is everything below ``folder`` readable (it lies under a read allowlist entry)?"""
        if not folder.startswith("/"):
            return False
        norm = dg.normalize_path(folder)
        return any(under(norm, p) for p in self.read_allowlist)

    def write_allowed(self, path: str) -> bool:
        norm = dg.normalize_path(path)
        return any(under(norm, p) for p in self.write_allowlist)

    def endpoint_allowed(self, host: str, port: int | None, family: str | None) -> bool:
        if family == "unix":
            return True
        if self.allow_dns and port == 53:
            return True
        return host_allowed(self.network_allowlist, host, port)


