"""The Sandbox backends by name, and how a requested ``--sandbox`` mode resolves on this machine.

    names()            the registered backends, in registration order: ``bwrap``, ``none``,
                       ``podman``, ``docker``
    modes()            what ``--sandbox`` and ``[run] sandbox`` accept: ``auto``, every name and
                       ``container`` (whichever container engine works here)
    get(name)          the backend (``ledger.sandbox.port.Sandbox``); an unknown name: UsageError
    resolve(requested) a ``SandboxStatus``: ``none`` is always there; a named backend that does
                       not work here is ``NothingToRun`` (exit 3) with its reason and install
                       hint; ``auto`` takes the first backend of ``AUTO`` that works, else
                       ``none`` with one line saying how to get isolation; ``container`` the
                       first engine of ``ENGINES`` that runs a container (its name is the mode)
    resolve_for(requested, environment)
                       the same for one task: a task with an ``environment`` resolves ``auto``
                       as ``container`` (bubblewrap never runs a task's image)
    is_engine(name)    whether the backend runs containers (it takes a task's image)
    bound(name, image) the backend running ``image`` (a task's ``environment.ready`` record);
                       the backend itself for one that takes no image
    register(backend)  add a backend (a module of ``ledger/sandbox/`` and one line below)

``SandboxStatus.mode`` is the backend name the run records (``[run] sandbox`` of the plan, the
``sandbox`` of a validation); attempts get their backend back with ``get(mode)`` (or
``status.backend``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.errors import NothingToRun, UsageError
from ledger.sandbox.port import Sandbox, SandboxStatus

_BACKENDS: dict[str, Sandbox] = {}
AUTO: tuple[str, ...] = ("bwrap",)  # what ``auto`` tries, in order, before ``none``
CONTAINER = "container"  # the mode meaning whichever engine of ``ENGINES`` runs a container here
ENGINES: tuple[str, ...] = ("podman", "docker")  # container backends, in the order tried


def register(backend: Sandbox) -> None:
    """Register ``backend`` under its ``name`` (a second one of the same name replaces it)."""
    if backend.name in ("", "auto"):
        raise UsageError(f"a sandbox backend cannot be named {backend.name!r}")
    _BACKENDS[backend.name] = backend


def names() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def modes() -> tuple[str, ...]:
    return ("auto", *_BACKENDS, CONTAINER)


def is_engine(name: str) -> bool:
    """Whether backend ``name`` runs containers (a task's image), as ``podman`` and ``docker``."""
    return name in ENGINES and name in _BACKENDS


def bound(name: str, image: Mapping[str, Any] | None) -> Sandbox:
    """Backend ``name``; a container backend bound to ``image`` (``environment.ready``'s data:
    ``image``, ``image_id``, ``digest``) when one is given."""
    backend = get(name)
    if image and is_engine(name):
        return backend.for_image(image)  # type: ignore[attr-defined,no-any-return]
    return backend


def get(name: str) -> Sandbox:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown sandbox {name!r}; use one of {', '.join(modes())}") from None


def _hint(backend: Sandbox) -> str:
    return str(getattr(backend, "hint", "") or "")


def _first_available(requested: str, names: Sequence[str]
                     ) -> tuple[SandboxStatus | None, list[tuple[Sandbox, str]]]:
    """``requested`` resolved as the first registered backend of ``names`` that works here (None
    when none does), and each registered one tried before it with its reason."""
    tried: list[tuple[Sandbox, str]] = []
    for name in names:
        backend = _BACKENDS.get(name)
        if backend is None:
            continue
        av = backend.available()
        if av.ok:
            return SandboxStatus(requested, name, av.reason, av.version), tried
        tried.append((backend, av.reason))
    return None, tried


def _container() -> SandboxStatus:
    """The first engine backend that runs a container here; else ``NothingToRun`` with why."""
    found, tried = _first_available(CONTAINER, ENGINES)
    if found is not None:
        return found
    hint = _hint(tried[0][0]) if tried else ""
    why = "; ".join(dict.fromkeys(reason for _b, reason in tried)) or "no engine backend is registered"
    raise NothingToRun(f"no container engine works here: {why}" + (f"; {hint}" if hint and hint not in why
                                                                   else ""))


def resolve_for(requested: str, environment: bool) -> SandboxStatus:
    """``resolve`` for one task: with an ``environment`` ``auto`` means ``container``."""
    if environment and requested == "auto":
        return resolve(CONTAINER)
    return resolve(requested)


def resolve(requested: str) -> SandboxStatus:
    """Resolve ``auto``, ``container`` or a backend name on this machine (the module docstring)."""
    if requested == CONTAINER:
        return _container()
    if requested != "auto" and requested not in _BACKENDS:
        raise UsageError(f"unknown sandbox mode {requested!r}; use one of {', '.join(modes())}")
    if requested == "none":
        return SandboxStatus(requested, "none", get("none").available().reason)
    found, tried = _first_available(requested, AUTO if requested == "auto" else (requested,))
    if found is not None:
        return found
    if requested != "auto":
        [(backend, reason)] = tried
        hint = _hint(backend)
        raise NothingToRun(f"--sandbox {requested} was requested but {reason}"
                           + (f"; {hint}" if hint else ""))
    reasons = [reason + (f"; {_hint(backend)}" if _hint(backend) else "") for backend, reason in tried]
    return SandboxStatus(requested, "none", "no isolation: " + "; ".join(reasons or ["no backend"]))


def _register_builtin() -> None:
    from ledger.sandbox.bubblewrap import BwrapSandbox
    from ledger.sandbox.container.backend import ContainerSandbox
    from ledger.sandbox.local import LocalSandbox

    register(BwrapSandbox())
    register(LocalSandbox())
    for engine in ENGINES:
        register(ContainerSandbox(engine))


_register_builtin()

__all__ = ["AUTO", "CONTAINER", "ENGINES", "SandboxStatus", "bound", "get", "is_engine", "modes", "names",
           "register", "resolve", "resolve_for"]
