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

    @property
    def outcome(self) -> str:
        if self.status != "completed":
            return self.status or "unfinished"
        if self.timed_out:
            return "timeout"
        ok = bool(self.hidden_passed) and self.signals_passed == self.signals_total
        if ok and self.regression_passed is False:
            return "regressed"
        return "passed" if ok else "failed"

    def absorb(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "agent.finished":
            self.wall_s = data.get("wall_s")
            self.cost_usd = data.get("cost_usd")
            self.timed_out = bool(data.get("timed_out"))
            self.crashed = bool(data.get("crashed"))
            self.orphans = int(data.get("orphans") or 0)
        elif kind == "signal.result":
            self.signals_total += 1
            self.signals_passed += 1 if data.get("passed") else 0
        elif kind == "test.result" and data.get("suite") == "hidden":
            self.hidden_passed = bool(data.get("passed"))
            self.hidden_counts = dict(data.get("counts") or {})
        elif kind == "test.result" and data.get("suite") == "regression":
            self.regression_passed = bool(data.get("passed"))
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
        }


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id, "status": self.status, "resumed": self.resumed,
            "attempts": [r.as_dict() for r in self.results], "checkpoint": self.checkpoint,
            "tree_size": self.tree_size, "ledger": str(self.ledger), "notes": list(self.notes),
            "next": [f"ledger report {self.run_id}", f"ledger verify {self.run_id}"],
        }
