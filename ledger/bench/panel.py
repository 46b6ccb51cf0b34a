"""Who takes part in a bench: the contestants (agent specs, or every agent CLI on PATH) and the
judge panel (named, the offline fallback, or chosen by the family rule)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluators import bench_judge as jd
from ledger.errors import NothingToRun, UsageError
from ledger.home import LedgerHome

JUDGE_CANDIDATES = ("claude", "codex", "gemini", "cursor-agent")


@dataclass
class Contestant:
    agent: Any  # ledger.run.contracts.Agent
    name: str
    spec: str
    kind: str
    version: str | None

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "kind": self.kind, "version": self.version,
                "family": jd.family_of(self.name)}


def _config_table(home: LedgerHome) -> Mapping[str, Any]:
    from ledger.run.config import load_config

    return load_config(home.config_path).agent_table()


def resolve_contestants(specs: Sequence[str], home: LedgerHome) -> tuple[list[Contestant], list[str]]:
    """Resolve agent specs (default: every agent CLI on PATH); ``(available, skipped reasons)``.

    Raises NothingToRun when no agent can run at all (exit code 2 for ``ledger bench``).
    """
    from ledger.agents import detect_cli_agents, resolve_agent

    table = _config_table(home)
    wanted: list[str] = []
    for spec in specs:
        wanted.extend(s.strip() for s in spec.split(",") if s.strip())
    if not wanted:
        wanted = detect_cli_agents()
        if not wanted:
            raise NothingToRun("no agent CLI found on PATH (claude, codex, gemini, cursor-agent, "
                               "aider); install one or name agents with --agent")
    out: list[Contestant] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for spec in wanted:
        agent = resolve_agent(spec, config=table)
        ok, reason = agent.available()
        if not ok:
            skipped.append(f"{spec}: {reason}")
            continue
        name = agent.name
        n = 2
        while name in seen:
            name, n = f"{agent.name}-{n}", n + 1
        seen.add(name)
        out.append(Contestant(agent, name, spec, agent.profile().kind, agent.version()))
    if not out:
        raise NothingToRun("no agent can run here: " + "; ".join(skipped))
    return out, skipped


def resolve_judges(specs: Sequence[str], contestants: Sequence[Contestant], home: LedgerHome
                   ) -> tuple[list[Contestant], bool, str]:
    """The judge panel, whether it is the offline fallback, and why it was chosen."""
    from ledger.agents import detect_cli_agents, resolve_agent

    table = _config_table(home)
    wanted: list[str] = []
    for spec in specs:
        wanted.extend(s.strip() for s in spec.split(",") if s.strip())
    if wanted:
        if wanted == [jd.OFFLINE_JUDGE]:
            return [], True, "--judge offline"
        if jd.OFFLINE_JUDGE in wanted:
            raise UsageError("--judge offline cannot be combined with model judges")
        panel: list[Contestant] = []
        for spec in wanted:
            agent = resolve_agent(spec, config=table)
            ok, reason = agent.available()
            if not ok:
                raise UsageError(f"judge {spec!r} cannot run here: {reason}")
            name, n = agent.name, 2
            while any(j.name == name for j in panel):
                name, n = f"{agent.name}-{n}", n + 1
            panel.append(Contestant(agent, name, spec, agent.profile().kind, agent.version()))
        return panel, False, "named with --judge"
    found = [a for a in detect_cli_agents() if a in JUDGE_CANDIDATES]
    if not found:
        return [], True, "no judge CLI on PATH"
    families = {c.name: jd.family_of(c.name) for c in contestants}
    chosen = [found[0]]
    first_family = jd.family_of(found[0])
    if any(f == first_family for f in families.values()):
        other = next((a for a in found[1:] if jd.family_of(a) != first_family), None)
        if other is not None:
            chosen.append(other)
    panel = []
    for spec in chosen:
        agent = resolve_agent(spec, config=table)
        panel.append(Contestant(agent, agent.name, spec, agent.profile().kind, agent.version()))
    return panel, False, "auto: first judge CLI on PATH, plus one of another family when needed"


__all__ = ["JUDGE_CANDIDATES", "Contestant", "resolve_contestants", "resolve_judges"]
