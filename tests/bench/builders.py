"""Synthetic bench entries for the pure leaderboard tests (no journal, no processes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evaluators import bench_judge as jd

RUN = "b-20261129T120000Z-abcdef"


def dims(c: int, a: int, x: int, n: int) -> dict[str, int]:
    return {"completeness": c, "accuracy": a, "actionability": x, "no_hallucinations": n}


@dataclass(frozen=True)
class E:
    seq: int
    ts: int
    run: str | None
    kind: str
    data: dict[str, Any]
    task: str | None = "bench"


@dataclass
class RunBuilder:
    agents: tuple[str, ...] = ("claude", "codex")
    options: dict[str, Any] = field(default_factory=dict)
    judges: tuple[str, ...] = ("gemini",)
    run: str = RUN
    entries: list[E] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.add("run.started", {"config": {"kind": "bench"}, "tasks": [], "agents": []})
        self.add("bench.started", {
            "version": "1.0.0", "mode": "default", "task_source": "user", "task_hash": "ab" * 32,
            "task_snapshot": "Write add()", "options": {"with_tests": False, **self.options},
            "agents": [{"name": a, "spec": a} for a in self.agents],
            "judges": [{"name": j, "spec": j} for j in self.judges], "judge_fallback": False,
            "seed": 42, "project": "/p"})

    def add(self, kind: str, data: dict[str, Any], run: str | None = None) -> E:
        e = E(len(self.entries), 1_800_000_000_000_000_000 + len(self.entries), run or self.run,
              kind, data)
        self.entries.append(e)
        return e

    def response(self, agent: str, round_name: str = "code", status: str = "ok",
                 text: str = "```python\n# FILE: s.py\ndef f():\n    return 1\n```\nSELF_EVAL_SUMMARY: 18/20",
                 wall_s: float = 10.0, cost: float | None = 0.01, cost_source: str = "reported",
                 tokens: tuple[int | None, int | None] = (100, 50),
                 tokens_source: str = "reported") -> None:
        self.add("bench.response", {
            "agent": agent, "round": round_name, "status": status, "text": text,
            "wall_s": wall_s, "cost_usd": cost, "cost_source": cost_source,
            "tokens_in": tokens[0], "tokens_out": tokens[1], "tokens_source": tokens_source,
            "exit_code": 0 if status == "ok" else None, "error": None if status == "ok" else status})

    def judge(self, judge: str, order: list[str], scores: dict[str, dict[str, int] | None] | None = None,
              round_name: str = "code", pass_name: str = "primary", raw: str | None = None,
              status: str = "ok") -> None:
        call = f"{round_name}/{pass_name}/{judge}"
        labels = dict(zip(jd.labels(len(order)), order, strict=True))
        self.add("bench.judge_prompt", {"call": call, "judge": judge, "round": round_name,
                                        "pass": pass_name, "order": order, "labels": labels,
                                        "truncated": dict.fromkeys(order, False)})
        if raw is None:
            by_label = {lab: (scores or {}).get(agent) for lab, agent in labels.items()}
            raw = json.dumps({lab: s for lab, s in by_label.items() if s is not None})
        self.add("bench.judge_raw", {"call": call, "judge": judge, "round": round_name,
                                     "pass": pass_name, "status": status, "text": raw,
                                     "wall_s": 1.0, "cost_usd": 0.001})
