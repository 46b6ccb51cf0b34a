"""The Sandbox backends by name, and how a requested ``--sandbox`` mode resolves on this machine.

    names()            the registered backends, in registration order: ``bwrap``, ``none``, ...
    modes()            what ``--sandbox`` and ``[run] sandbox`` accept: ``auto`` and every name
    get(name)          the backend (``ledger.sandbox.port.Sandbox``); an unknown name: UsageError
    resolve(requested) a ``SandboxStatus``: ``none`` is always there; a named backend that does
                       not work here is ``NothingToRun`` (exit 3) with its reason and install
                       hint; ``auto`` takes the first backend of ``AUTO`` that works, else
                       ``none`` with one line saying how to get isolation
    register(backend)  add a backend (a module of ``ledger/sandbox/`` and one line below)

``SandboxStatus.mode`` is the backend name the run records (``[run] sandbox`` of the plan, the
``sandbox`` of a validation); attempts get their backend back with ``get(mode)`` (or
``status.backend``).
"""

from __future__ import annotations

from ledger.errors import NothingToRun, UsageError
from ledger.sandbox.port import Sandbox, SandboxStatus

_BACKENDS: dict[str, Sandbox] = {}
AUTO: tuple[str, ...] = ("bwrap",)  # what ``auto`` tries, in order, before ``none``


def register(backend: Sandbox) -> None:
    """Register ``backend`` under its ``name`` (a second one of the same name replaces it)."""
    if backend.name in ("", "auto"):
        raise UsageError(f"a sandbox backend cannot be named {backend.name!r}")
    _BACKENDS[backend.name] = backend


def names() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def modes() -> tuple[str, ...]:
    return ("auto", *_BACKENDS)


def get(name: str) -> Sandbox:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown sandbox {name!r}; use one of {', '.join(modes())}") from None


def _hint(backend: Sandbox) -> str:
    return str(getattr(backend, "hint", "") or "")


def resolve(requested: str) -> SandboxStatus:
    """Resolve ``auto`` or a backend name on this machine (see the module docstring)."""
    if requested != "auto" and requested not in _BACKENDS:
        raise UsageError(f"unknown sandbox mode {requested!r}; use one of {', '.join(modes())}")
    if requested == "none":
        return SandboxStatus(requested, "none", get("none").available().reason)
    if requested != "auto":
        backend = get(requested)
        av = backend.available()
        if av.ok:
            return SandboxStatus(requested, requested, av.reason, av.version)
        hint = _hint(backend)
        raise NothingToRun(f"--sandbox {requested} was requested but {av.reason}"
                           + (f"; {hint}" if hint else ""))
    reasons: list[str] = []
    for name in AUTO:
        backend = _BACKENDS.get(name)
        if backend is None:
            continue
        av = backend.available()
        if av.ok:
            return SandboxStatus(requested, name, av.reason, av.version)
        hint = _hint(backend)
        reasons.append(av.reason + (f"; {hint}" if hint else ""))
    return SandboxStatus(requested, "none", "no isolation: " + "; ".join(reasons or ["no backend"]))


def _register_builtin() -> None:
    from ledger.sandbox.bubblewrap import BwrapSandbox
    from ledger.sandbox.local import LocalSandbox

    register(BwrapSandbox())
    register(LocalSandbox())


_register_builtin()

__all__ = ["AUTO", "SandboxStatus", "get", "modes", "names", "register", "resolve"]
