"""The one matcher of network allowlist entries, shared by the scan (``attest.scope``) and the
journaling proxy (``ledger.sandbox.net``), so what the proxy lets through and what the scan calls
allowed can never differ. Pure.

An entry is ``host``, ``host:port``, ``[v6]:port``, ``*.suffix`` (any name below it, not the
suffix itself) or a CIDR block (``10.0.0.0/8``); without a port every port matches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def split_endpoint(entry: str) -> tuple[str, int | None]:
    """``(host, port or None)`` of an allowlist entry, lower-cased."""
    e = entry.strip().lower()
    if e.startswith("["):
        host, _, rest = e[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return host, int(port) if port.isdigit() else None
    if e.count(":") == 1:
        host, port = e.split(":")
        return host, int(port) if port.isdigit() else None
    return e, None


def host_allowed(allowlist: Iterable[str], host: str, port: int | None) -> bool:
    """Whether ``host:port`` matches an entry of ``allowlist``."""
    h = host.strip().strip("[]").lower()
    for entry in allowlist:
        ehost, eport = split_endpoint(entry)
        if eport is not None and eport != port:
            continue
        if ehost.startswith("*."):
            if h.endswith(ehost[1:]) and len(h) > len(ehost) - 1:
                return True
        elif "/" in ehost:
            try:
                if ipaddress.ip_address(h) in ipaddress.ip_network(ehost, strict=False):
                    return True
            except ValueError:
                continue
        elif ehost == h:
            return True
    return False
