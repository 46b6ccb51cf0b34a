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
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import UsageError
from ledger.sandbox import paths, registry
from ledger.sandbox.port import AgentRequest, Sandbox


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


def _runner_policy(box: Any) -> Any:
    """The policy ``run_agent_process`` confines an agent by: it starts bubblewrap over it
    itself, so only the bubblewrap backend's boxes qualify (until the agent runner takes a
    ``Box``); None for any other backend."""
    return box.policy if type(box).__module__ == "ledger.sandbox.bubblewrap" else None


@contextlib.contextmanager
def agent_box(confine: Confinement, agent: Any, inv: Any, *, kind: str, worktree: Path,
              home: Path, scratch: Path, net_dir: Path) -> Iterator[tuple[Any, Any]]:
    """``(invocation, sandbox)`` to hand ``run_agent_process`` for one call, the box closed on
    exit. ``sandbox`` is the box's policy (what the agent runner takes today), None for a backend
    that confines nothing; a backend whose boxes the agent runner cannot take is refused."""
    from ledger.run.attestor import endpoint_allowlist
    from ledger.sandbox import net
    from ledger.sandbox.attempt_boxes import sandbox_env

    records = _endpoints(agent)
    box = confine.sandbox.agent_box(AgentRequest(
        worktree=worktree, home=home, scratch=scratch, argv=tuple(inv.argv),
        path_env=str(inv.env.get("PATH", os.defpath)), hidden=confine.hidden,
        harness_code=kind in ("builtin", "http"), allowlist=endpoint_allowlist(records),
        loopback_ports=tuple(net.loopback_ports(records)), net_dir=net_dir))
    try:
        if not box.isolated:
            yield inv, None
            return
        policy = _runner_policy(box)
        if policy is None:
            raise UsageError(f"the bench cannot run agents in the {confine.name} sandbox yet "
                             "(the agent runner takes a bubblewrap box's policy only); use "
                             "--sandbox auto or --sandbox none")
        env = sandbox_env(inv.env, home=home, scratch=scratch)
        argv = list(inv.argv)
        if box.proxy is not None:  # the agent reaches its endpoints through the forwarder
            argv, port = net.forwarder_command(sys.executable, net_dir / "proxy.sock",
                                               net.loopback_ports(records), argv)
            env.update(net.proxy_env(port))
        yield dataclasses.replace(inv, argv=tuple(argv), env=env), policy
    finally:
        box.close()


__all__ = ["Confinement", "agent_box", "confinement"]
