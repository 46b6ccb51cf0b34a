"""An agent's model API endpoints, resolved on this node just before it starts: every host at
once, ``RESOLVE_TIMEOUT_S`` in all; a failure or a timeout is recorded, never waited out."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RESOLVE_TIMEOUT_S = 2.0  # for all of an agent's endpoints together
MAX_ADDRESSES = 32  # per endpoint host

Resolver = Callable[[str, int], Sequence[str]]  # (host, port) -> addresses; raises on failure


def system_resolver(host: str, port: int) -> list[str]:
    """The node's resolver (``getaddrinfo``, TCP): every address, IPv4 and IPv6."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def static_resolver(table: Mapping[str, Sequence[str]], host: str, port: int) -> list[str]:
    """A fixed host table (``functools.partial(static_resolver, {...})``: tests, pinned nodes);
    a host it lacks fails like an unknown name."""
    if host not in table:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return list(table[host])


def _address(text: Any) -> str | None:
    """An address in the form strace prints it (no IPv6 zone); None when it is none."""
    try:
        addr = ipaddress.ip_address(str(text).split("%", 1)[0])
    except ValueError:
        return None
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return None if addr.is_unspecified else addr.compressed


def resolve_endpoints(declared: Sequence[str], *, resolver: Resolver | None = None,
                      timeout: float = RESOLVE_TIMEOUT_S) -> list[dict[str, Any]]:
    """``[{host, port, addresses, error}]`` for the declared endpoints, resolved all at once.

    Each host is looked up in a daemon thread; whatever has not answered ``timeout`` seconds after
    the start is recorded as timed out and left behind, so a dead resolver costs ``timeout`` at
    most. A wildcard (``*.domain``) names no single host: it is recorded unresolved.
    """
    from ledger.agents.presets import parse_endpoint

    resolve = resolver or system_resolver
    wanted = list(dict.fromkeys(parse_endpoint(e) for e in declared))
    results: dict[int, tuple[list[str], str | None]] = {}
    lock = threading.Lock()

    def work(i: int, host: str, port: int) -> None:
        try:
            found = [a for a in (_address(x) for x in resolve(host, port)) if a]
            outcome = (list(dict.fromkeys(found))[:MAX_ADDRESSES],
                       None if found else "no address")
        except Exception as exc:  # gaierror, OSError, a resolver's own failure
            outcome = ([], f"{type(exc).__name__}: {exc}"[:200])
        with lock:
            results[i] = outcome

    threads = []
    for i, (host, port) in enumerate(wanted):
        if host.startswith("*."):
            results[i] = ([], "a wildcard is matched by name only; not resolved")
            continue
        thread = threading.Thread(target=work, args=(i, host, port), daemon=True,
                                  name=f"resolve-{host}")
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return [
            {"host": host, "port": port,
             "addresses": results.get(i, ([], None))[0],
             "error": results[i][1] if i in results else f"timed out after {timeout:g} s"}
            for i, (host, port) in enumerate(wanted)
        ]


def agent_endpoints(agent: Any) -> tuple[str, ...]:
    """The model API hosts the agent declares it may reach (``AgentProfile.endpoints``)."""
    return tuple(agent.profile().endpoints)
