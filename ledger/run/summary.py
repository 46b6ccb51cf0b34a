"""What a run returns to its caller: one ``AttemptResult`` per attempt and the ``RunSummary``.

Raw recorded facts, never a score (scores are the evaluators' projections of the journal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AttemptResult:
    """What the summary shows about one attempt (raw recorded facts, never a score)."""

    attempt: str
    task: str
    agent: str
    repeat: int
    try_no: int
    status: str | None = None
    error: str | None = None
    hidden_passed: bool | None = None
    hidden_counts: dict[str, int] = field(default_factory=dict)
    regression_passed: bool | None = None
    signals_passed: int = 0
    signals_total: int = 0
    wall_s: float | None = None
    cost_usd: float | None = None
    timed_out: bool = False
    crashed: bool = False
    orphans: int = 0
    attestation: str | None = None  # CLEAN | DIRTY | UNOBSERVED, None when not attested
    attestation_hash: str | None = None
    attestation_matches: int = 0
    agent_error: dict[str, Any] | None = None  # {kind, detail}: the agent never reached its model
    tokens_so_far: int = 0  # model tokens of the journaled model.response entries (HTTP agent)
    canaries_passed: int = 0  # canaries the graded code passed (attest/canary.py): never solved

    @property
    def outcome(self) -> str:
        if self.status != "completed":
            return self.status or "unfinished"
        if self.agent_error:
            return "agent_error"
        if self.timed_out:
            return "timeout"
        ok = (bool(self.hidden_passed) and self.signals_passed == self.signals_total
              and not self.canaries_passed)
        if ok and self.regression_passed is False:
            return "regressed"
        return "passed" if ok else "failed"

    def absorb(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "model.response":
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                total = usage.get("total_tokens")
                if not isinstance(total, int):
                    total = sum(v for k in ("prompt_tokens", "completion_tokens")
                                if isinstance(v := usage.get(k), int))
                self.tokens_so_far += total if isinstance(total, int) else 0
        elif kind == "agent.finished":
            self.wall_s = data.get("wall_s")
            self.cost_usd = data.get("cost_usd")
            self.timed_out = bool(data.get("timed_out"))
            self.crashed = bool(data.get("crashed"))
            self.orphans = int(data.get("orphans") or 0)
            error = data.get("agent_error")
            self.agent_error = dict(error) if isinstance(error, Mapping) else None
        elif kind == "signal.result":
            self.signals_total += 1
            self.signals_passed += 1 if data.get("passed") else 0
        elif kind == "test.result" and data.get("suite") == "hidden":
            self.hidden_passed = bool(data.get("passed"))
            self.hidden_counts = dict(data.get("counts") or {})
        elif kind == "test.result" and data.get("suite") == "regression":
            self.regression_passed = bool(data.get("passed"))
        elif kind == "canary.result":
            got = (data.get("canaries") or {}).get("passed")
            self.canaries_passed = got if isinstance(got, int) and not isinstance(got, bool) else 1
        elif kind == "attempt.finished":
            self.status = data.get("status")
            self.error = data.get("error")
        elif kind == "attestation":
            att = data.get("attestation") or {}
            self.attestation = att.get("verdict")
            self.attestation_hash = data.get("hash")
            self.attestation_matches = int(att.get("match_count") or 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt, "task": self.task, "agent": self.agent,
            "repeat": self.repeat, "try": self.try_no, "status": self.status,
            "outcome": self.outcome, "error": self.error, "hidden_passed": self.hidden_passed,
            "hidden_counts": self.hidden_counts, "regression_passed": self.regression_passed,
            "signals": [self.signals_passed, self.signals_total], "wall_s": self.wall_s,
            "cost_usd": self.cost_usd, "timed_out": self.timed_out, "crashed": self.crashed,
            "orphans": self.orphans, "attestation": self.attestation,
            "attestation_hash": self.attestation_hash,
            "attestation_matches": self.attestation_matches,
            "agent_error": self.agent_error, "canaries_passed": self.canaries_passed,
        }


@dataclass(frozen=True)
class AgentReach:
    """One agent of a run whose attempts (some or all) never reached its model."""

    agent: str
    attempts: int  # attempts of the agent that reported an agent.finished
    unreached: int  # of those, with an agent_error
    kind: str  # the agent_error kind of the first such attempt
    detail: str

    @property
    def no_work(self) -> bool:
        """No attempt of this agent did any work."""
        return self.unreached == self.attempts

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "attempts": self.attempts, "unreached": self.unreached,
                "kind": self.kind, "detail": self.detail, "no_work": self.no_work}


def agent_reach(results: list[AttemptResult]) -> list[AgentReach]:
    """Per agent (in first-seen order), the attempts that never reached a model."""
    seen: dict[str, list[AttemptResult]] = {}
    for r in results:
        if r.status is not None or r.agent_error is not None:
            seen.setdefault(r.agent, []).append(r)
    out = []
    for agent, rows in seen.items():
        bad = [r for r in rows if r.agent_error]
        if bad:
            first = bad[0].agent_error or {}
            out.append(AgentReach(agent, len(rows), len(bad), str(first.get("kind", "")),
                                  str(first.get("detail", ""))))
    return out


@dataclass
class RunSummary:
    run_id: str
    status: str  # "finished" | "interrupted"
    resumed: bool
    results: list[AttemptResult]
    checkpoint: str
    tree_size: int
    ledger: Path
    notes: list[str] = field(default_factory=list)

    @property
    def unreached(self) -> list[AgentReach]:
        """Agents with attempts that never reached their model (see ``agent_reach``)."""
        return agent_reach(self.results)

    @property
    def idle_agents(self) -> list[str]:
        """Agents none of whose attempts did any work: ``ledger run`` exits 3 when there is one."""
        return [a.agent for a in self.unreached if a.no_work]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id, "status": self.status, "resumed": self.resumed,
            "agent_errors": [a.as_dict() for a in self.unreached],
            "attempts": [r.as_dict() for r in self.results], "checkpoint": self.checkpoint,
            "tree_size": self.tree_size, "ledger": str(self.ledger), "notes": list(self.notes),
            "next": [f"ledger report {self.run_id}", f"ledger verify {self.run_id}"],
        }
