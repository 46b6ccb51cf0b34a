"""Where the bench runs what it runs: its agents and its checks, in boxes of the Sandbox port.

    confinement(hidden, requested)   the backend ``requested`` resolves to here (``auto``:
                                     bubblewrap when it works, else ``none``) and what its boxes
                                     hide: the ledger folder, the packaged tasks
    agent_box(confine, inv, ...)     one agent call's box: what the agent runner is handed

A bench agent's box shows its program's install tree, a fresh worktree, home and scratch folder,
and the network only through the journaling proxy, to the model API endpoints the agent declares;
the ledger folder (keys, journal) is hidden. The checks (``checks.CheckFolder``) run each command
in a grading box: the answer's folder writable, no network.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.sandbox import paths, registry
from ledger.sandbox.port import AgentRequest, Box, Sandbox


@dataclass(frozen=True)
class Confinement:
    """A backend of the Sandbox port and what its boxes hide (the bench resolves it once)."""

    sandbox: Sandbox
    hidden: tuple[str, ...] = ()
    reason: str = ""

    @property
    def name(self) -> str:
        return self.sandbox.name

    def record(self) -> dict[str, Any]:
        """What ``bench.started`` says about it."""
        return {"backend": self.name, "reason": self.reason}


def confinement(hidden: Sequence[str] = (), requested: str = "auto") -> Confinement:
    """Resolve ``requested`` here; a named backend that does not work is ``NothingToRun``."""
    status = registry.resolve(requested)
    shown = [os.path.realpath(p) for p in hidden if p]
    return Confinement(status.backend,
                       tuple(dict.fromkeys([*shown, paths.packaged_tasks_dir()])), status.reason)


def _endpoints(agent: Any) -> list[dict[str, Any]]:
    """The model API endpoints the agent declares, as ``{host, port}`` records."""
    from ledger.agents.presets import parse_endpoint

    out = []
    for text in agent.profile().endpoints:
        host, port = parse_endpoint(text)
        out.append({"host": host, "port": port})
    return out


@contextlib.contextmanager
def agent_box(confine: Confinement, agent: Any, inv: Any, *, kind: str, worktree: Path,
              home: Path, scratch: Path, net_dir: Path) -> Iterator[Box]:
    """The box of ``confine``'s backend to hand ``run_agent_process`` (``box=``) for one call,
    on every backend; closed on exit."""
    from ledger.run.attestor import endpoint_allowlist
    from ledger.sandbox import net

    records = _endpoints(agent)
    box = confine.sandbox.agent_box(AgentRequest(
        worktree=worktree, home=home, scratch=scratch, argv=tuple(inv.argv),
        path_env=str(inv.env.get("PATH", os.defpath)), hidden=confine.hidden,
        harness_code=kind in ("builtin", "http"), allowlist=endpoint_allowlist(records),
        loopback_ports=tuple(net.loopback_ports(records)), net_dir=net_dir))
    try:
        yield box
    finally:
        box.close()


__all__ = ["Confinement", "agent_box", "confinement"]
