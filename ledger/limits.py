"""The limit values of an attempt, as ``ledger.toml``'s ``[limits]`` and a task's ``limits:`` set
them: pure data and its parsing. ``ledger.sandbox.limits`` enforces them (cgroups, rlimits, the
disk walk); the task loader and the run's configuration only parse them, so they import this.

    Limits          processes, memory, cpu_s, file_size, open_files, disk, disk_files, cgroups
    parse_limits    a ``[limits]`` table or ``limits:`` map checked (sizes like ``512M``)
    resolve_limits  ``DEFAULTS``, then ``ledger.toml``'s, then the task's
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ledger.errors import MalformedInput

KIB, MIB, GIB = 1024, 1024 ** 2, 1024 ** 3


@dataclass(frozen=True)
class Limits:
    """The limit values of one attempt (see the module docstring for what each bounds)."""

    processes: int = 512
    memory: int = 4 * GIB  # bytes
    cpu_s: int = 3600
    file_size: int = 1 * GIB  # bytes
    open_files: int = 4096
    disk: int = 4 * GIB  # bytes allocated under the attempt's writable folders
    disk_files: int = 200_000  # entries under them
    cgroups: bool = True  # False: rlimits only, even where cgroups could be made

    def as_data(self) -> dict[str, Any]:
        return asdict(self)


DEFAULTS = Limits()
KEYS = tuple(f.name for f in fields(Limits))
_SIZE_KEYS = frozenset({"memory", "file_size", "disk"})
_MINIMUM = {"processes": 8, "open_files": 32}  # below these nothing at all can start
_UNITS = {"": 1, "k": KIB, "kb": KIB, "kib": KIB, "m": MIB, "mb": MIB, "mib": MIB,
          "g": GIB, "gb": GIB, "gib": GIB, "t": 1024 * GIB, "tb": 1024 * GIB, "tib": 1024 * GIB}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def _value(key: str, raw: Any, where: str) -> Any:
    if key == "cgroups":
        if not isinstance(raw, bool):
            raise MalformedInput(f"{where}: cgroups must be true or false, got {raw!r}")
        return raw
    if key in _SIZE_KEYS and isinstance(raw, str):
        m = _SIZE.match(raw)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise MalformedInput(f"{where}: {key} must be a size like 512M or 4G, got {raw!r}")
        value = int(m.group(1)) * _UNITS[unit]
    elif isinstance(raw, bool) or not isinstance(raw, int):
        kind = "a size (bytes, or a string like 512M)" if key in _SIZE_KEYS else "an integer"
        raise MalformedInput(f"{where}: {key} must be {kind}, got {raw!r}")
    else:
        value = raw
    if value < _MINIMUM.get(key, 1):
        raise MalformedInput(f"{where}: {key} must be at least {_MINIMUM.get(key, 1)}, got {raw!r}")
    return value


def parse_limits(raw: Any, where: str) -> dict[str, Any]:
    """The overrides of a ``[limits]`` table or a task's ``limits:`` map, checked (unknown keys
    and bad values are a ``MalformedInput`` naming ``where`` and the key)."""
    if not isinstance(raw, Mapping):
        raise MalformedInput(f"{where}: limits must be a table of {', '.join(KEYS)}")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise MalformedInput(f"{where}: unknown limit(s) {unknown}; known: {list(KEYS)}")
    return {k: _value(k, v, where) for k, v in raw.items()}


def resolve_limits(config: Mapping[str, Any] | None = None,
                   task: Mapping[str, Any] | None = None) -> Limits:
    """``DEFAULTS``, then ``ledger.toml``'s ``[limits]``, then the task's ``limits:``."""
    return replace(DEFAULTS, **{**dict(config or {}), **dict(task or {})})


__all__ = ["DEFAULTS", "GIB", "KEYS", "KIB", "MIB", "Limits", "parse_limits", "resolve_limits"]
