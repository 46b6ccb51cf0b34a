"""Hand-built journal entries for evaluator tests (no database: encode_entry only)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.journal.codec import Entry, encode_entry

RUN = "r-20261129T203000Z-1a2b3c"
T0 = 1_800_000_000_000_000_000


def task(tid: str, *, tier: str = "smoke", max_duration_s: float = 100.0,
         max_cost_usd: float = 1.0, owned: Sequence[str] = ("src/calc.py",),
         expected: Sequence[str] = ()) -> dict[str, Any]:
    return {"id": tid, "title": f"Task {tid}", "tier": tier,
            "hash": hashlib.sha256(tid.encode()).hexdigest(),
            "max_duration_s": max_duration_s, "max_cost_usd": max_cost_usd, "max_tokens": 100_000,
            "owned_files": list(owned), "expected_files_modified": list(expected)}


@dataclass
class RunBuilder:
    run: str = RUN
    entries: list[Entry] = field(default_factory=list)

    def add(self, kind: str, data: dict[str, Any], *, task: str | None = None,
            run: str | None | bool = True) -> Entry:
        seq = len(self.entries)
        e = encode_entry(seq=seq, ts=T0 + seq, kind=kind, data=data,
                         run=self.run if run is True else (run or None), task=task)
        self.entries.append(e)
        return e

    def started(self, tasks: Sequence[dict[str, Any]], agents: Sequence[str] = ("demo",),
                repeat: int = 1) -> None:
        self.add("run.started", {
            "harness_version": "0.1.0",
            "config": {"tiers": sorted({t["tier"] for t in tasks}),
                       "task_ids": [t["id"] for t in tasks], "agents": list(agents),
                       "repeat": repeat, "parallel": 1, "timeout_s": None, "trace": "auto",
                       "executor": "local"},
            "tasks": list(tasks),
            "agents": [{"name": a, "spec": a, "kind": "builtin", "version": None} for a in agents],
        })

    def finished(self, status: str = "finished") -> None:
        n = len({e.data["attempt"] for e in self.entries if e.kind == "attempt.started"})
        self.add("run.finished", {"status": status, "attempts": n, "completed": n})

    def attempt(
        self, tid: str, *, agent: str = "demo", repeat: int = 1, try_no: int = 1,
        tier: str = "smoke", status: str | None = "completed", error: str | None = None,
        wall_s: float = 10.0, cost_usd: float | None = 0.1, timed_out: bool = False,
        crashed: bool = False, orphans: int = 0, telemetry: bool = True,
        agent_finished: bool = True, trace: str = "strace",
        signals: Sequence[bool] = (True,), hidden: tuple[int, int, int] | None = (3, 0, 0),
        hidden_messages: Sequence[str] = (),
        baseline: dict[str, str] | None = None, after: dict[str, str] | None = None,
        after_messages: Sequence[str] = (),
        files: Sequence[tuple[str, int, int]] = (("src/calc.py", 3, 1),),
        patch: str | None = None, conflict_markers: bool = False, apply_failed: bool = False,
        reads: Sequence[str] = ("src/calc.py",), writes: Sequence[tuple[str, bool]] = (),
        judge: dict[str, int] | None = None, attestation: str | None = None,
        extra: Sequence[tuple[str, dict[str, Any]]] = (),
        hidden_extra: dict[str, Any] | None = None, expected_ids: Sequence[str] | None = None,
    ) -> str:
        aid = f"{self.run}/{tid}/{agent}/{repeat}/{try_no}"
        a = {"attempt": aid}
        if baseline is None:
            baseline = {"tests/test_base.py::test_one": "passed",
                        "tests/test_base.py::test_two": "passed"}
        if after is None:
            after = dict(baseline)
        self.add("attempt.started", {**a, "agent": agent, "agent_spec": agent, "repeat": repeat,
                                     "try": try_no, "tier": tier, "node": "host"}, task=tid)
        self.add("commitment", {**a, "commitment": {"digests": 0}}, task=tid)
        self.add("test.baseline", {**a, **_suite("regression", baseline, ())}, task=tid)
        if expected_ids is not None:
            self.add("grading.expected", {**a, "suite": "hidden", "source": "collected",
                                          "task_hash": "00" * 32, "count": len(expected_ids),
                                          "ids": list(expected_ids)}, task=tid)
        self.add("agent.started", {**a, "argv": ["agent"], "cwd": "/wt", "trace": trace,
                                   "trace_reason": ""}, task=tid)
        for path in reads:
            self.add("fs.read", {**a, "path": path, "resolved": f"/wt/{path}"
                                 if not path.startswith("/") else path,
                                 "in_worktree": not path.startswith("/"), "content": None,
                                 "source": "strace"}, task=tid)
        for path, inside in writes:
            self.add("fs.write", {**a, "path": path, "resolved": path if path.startswith("/")
                                  else f"/wt/{path}", "in_worktree": inside,
                                  "source": "strace"}, task=tid)
        for kind, data in extra:
            self.add(kind, {**a, **data}, task=tid)
        if agent_finished:
            self.add("agent.finished", {
                **a, "exit_code": 1 if crashed else 0, "signal": None, "wall_s": wall_s,
                "timed_out": timed_out, "crashed": crashed, "tokens_in": 100, "tokens_out": 50,
                "cost_usd": cost_usd, "cost_source": "reported" if cost_usd is not None else "none",
                "orphans": orphans, "telemetry": telemetry}, task=tid)
        for i, ok in enumerate(signals):
            self.add("signal.result", {**a, "index": i, "signal": {"kind": "command"},
                                       "passed": ok, "detail": ""}, task=tid)
        if hidden is not None:
            p, f, err = hidden
            tests = [{"id": f"tests_hidden/test_h.py::t{i}", "outcome": "passed", "message": ""}
                     for i in range(p)]
            msgs = list(hidden_messages) or [""]
            tests += [{"id": f"tests_hidden/test_h.py::f{i}", "outcome": "failed",
                       "message": msgs[i % len(msgs)]} for i in range(f)]
            tests += [{"id": f"tests_hidden/test_h.py::e{i}", "outcome": "error",
                       "message": msgs[i % len(msgs)]} for i in range(err)]
            self.add("test.result", {**a, "suite": "hidden", "command": ["pytest"],
                                     "exit_code": 0 if f + err == 0 else 1,
                                     "passed": f + err == 0, "duration_s": 1.0,
                                     "counts": {"passed": p, "failed": f, "error": err,
                                                "skipped": 0}, "tests": tests,
                                     **(hidden_extra or {})}, task=tid)
        self.add("test.result", {**a, **_suite("regression", after, after_messages)}, task=tid)
        if patch is None:
            patch = "".join(f"--- a/{p}\n+++ b/{p}\n+x = {i}\n" for i, (p, _, _) in enumerate(files))
        self.add("diff", {**a, "files": [{"path": p, "status": "modified", "added": ad,
                                          "removed": rm} for p, ad, rm in files],
                          "patch": patch, "truncated": False, "conflict_markers": conflict_markers,
                          "apply_failed": apply_failed}, task=tid)
        if judge is not None:
            self.add("judge.verdict", {**a, "judge": "test", "version": "1", "scores": judge,
                                       "raw": "", "notes": []}, task=tid)
        if status is not None:
            self.add("attempt.finished", {**a, "status": status, "error": error}, task=tid)
        if attestation is not None:  # as the coordinator does: after the attempt's last entry
            self.add("attestation", {**a, "attestation": {"verdict": attestation},
                                     "hash": "00" * 32}, task=tid)
        return aid


def _suite(suite: str, outcomes: dict[str, str], messages: Sequence[str]) -> dict[str, Any]:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    tests = []
    msgs = list(messages) or [""]
    for i, (tid, outcome) in enumerate(sorted(outcomes.items())):
        counts[outcome] += 1
        tests.append({"id": tid, "outcome": outcome,
                      "message": msgs[i % len(msgs)] if outcome in ("failed", "error") else ""})
    ok = counts["failed"] == 0 and counts["error"] == 0
    return {"suite": suite, "command": ["pytest"], "exit_code": 0 if ok else 1, "passed": ok,
            "duration_s": 1.0, "counts": counts, "tests": tests}
