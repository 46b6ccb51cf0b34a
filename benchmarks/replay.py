"""Replay speed benchmark: recomputing every view of a large run vs a bare decode of its entries.

    python benchmarks/replay.py              # human summary (about a minute, mostly the build)
    python benchmarks/replay.py --json       # the figures as one JSON object
    python benchmarks/replay.py --quick      # 200 attempts, a smoke run of a few seconds

A synthetic run of ``--attempts`` attempts (default 10,000: 20 tasks x 5 agents x 100 repeats,
50 entries each, about 500,000 entries in all, with the kinds and field shapes a real run writes)
is appended through the journal API in batches, then a view is recorded at its end. Measured, in
the same process on the same database, the median over ``--rounds`` rounds with the order of the
two workloads alternating (issue 4, "Speed"):

- ``decode``   iterate ``Journal.entries(run=..., check_canonical=False)``: read rows and decode
  every entry the way ``ledger replay`` reads them once ``verify`` passed (baseline).
- ``replay``   ``evaluators.views.replay(...)`` over that same read: the read and decode, the
  fold, the view, and the field-by-field comparison with the recorded view.
- ``ratio``    decode seconds / replay seconds (target >= 0.5: projections cost little beyond
  reading), and ``replay_s`` (target < 10 s for 10,000 attempts).
- ``fold_only``  the fold + view over entries already decoded in memory (what the evaluators
  themselves cost), and ``verify`` (``Journal.verify()``, which ``ledger replay`` runs first).
- ``stats_replay``  what ``ledger replay`` runs once its verify passed, the same call
  (``cli.report_cmds.replay_stored``): the run's structure read by kind, then every entry
  streamed from the journal through one fold, the golden view and the statistics view
  (evaluators/stats_view.py) both recomputed and compared (``stats_replay_s``,
  ``stats_ratio``: the issue 23 targets, < 10 s and >= 0.5x plain decode, apply to these).
- ``held_stats_replay``  for reference: ``evaluators.registry.replay_run(...)`` over the run's
  entries as one iterable, collected into a list first (how ``ledger replay`` read them before).
- ``raw``      for reference: the same rows decoded by ``msgpack.unpackb`` alone, with no
  envelope checks and no Entry objects (``raw_decode_s``), and replay over that decode
  (``raw_replay_s``, ``raw_ratio``).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgpack  # noqa: E402

from cli.report_cmds import replay_stored  # noqa: E402
from evaluators import stats_view  # noqa: E402
from evaluators.registry import replay_run  # noqa: E402
from evaluators.views import compute_views, recorded_view_data, replay  # noqa: E402
from ledger.journal.codec import Entry  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402

RUN_ID = "r-20261129T203000Z-bench1"
SEED = 20261129
BATCH = 50_000
TASKS = 20
AGENTS = 5
READS = 24  # fs.read entries per attempt; with the rest, 50 entries per attempt


def _tasks() -> list[dict[str, Any]]:
    tiers = ("smoke", "standard", "stretch", "adversarial")
    return [{"id": f"task-{i:02d}", "title": f"Task {i}", "tier": tiers[i % 4],
             "hash": f"{i:064x}", "max_duration_s": 120.0 + 10 * i, "max_cost_usd": 0.5 + 0.1 * i,
             "max_tokens": 200_000, "owned_files": [f"src/mod{i}.py"],
             "expected_files_modified": [f"src/mod{i}.py"]} for i in range(TASKS)]


def _attempt_items(rng: random.Random, tid: str, agent: str, repeat: int) -> Iterator[
        tuple[str, dict[str, Any], str, str]]:
    aid = f"{RUN_ID}/{tid}/{agent}/{repeat}/1"
    a = {"attempt": aid}
    ok = rng.random() < 0.6
    own = f"src/mod{int(tid[-2:])}.py"
    base = [{"id": f"tests/test_base.py::test_{k}", "outcome": "passed", "message": ""}
            for k in range(8)]
    after = [dict(t) for t in base]
    if rng.random() < 0.02:
        after[3] = {"id": after[3]["id"], "outcome": "failed", "message": "AssertionError: 2 != 3"}
    counts = {"passed": sum(t["outcome"] == "passed" for t in after),
              "failed": sum(t["outcome"] == "failed" for t in after), "error": 0, "skipped": 0}

    def t(kind: str, data: dict[str, Any]) -> tuple[str, dict[str, Any], str, str]:
        return (kind, {**a, **data}, RUN_ID, tid)

    yield t("attempt.started", {"agent": agent, "agent_spec": agent, "repeat": repeat, "try": 1,
                                "tier": "smoke", "node": "bench"})
    yield t("commitment", {"commitment": {"files": 3, "windows": 120, "digest": "ab" * 32}})
    yield t("test.baseline", {"suite": "regression", "command": ["pytest", "-q", "tests"],
                              "exit_code": 0, "passed": True, "duration_s": 0.8,
                              "counts": {"passed": 8, "failed": 0, "error": 0, "skipped": 0},
                              "tests": base})
    yield t("agent.started", {"argv": [agent, "-p", "prompt.md"], "cwd": "/tmp/wt",
                              "trace": "strace", "trace_reason": ""})
    for k in range(READS):
        path = own if k == 0 else f"src/other{k}.py"
        yield t("fs.read", {"path": path, "resolved": f"/tmp/wt/{path}", "in_worktree": True,
                            "content": "x = 1\n" * 20, "source": "strace"})
    for _ in range(4):
        yield t("fs.write", {"path": own, "resolved": f"/tmp/wt/{own}", "in_worktree": True,
                             "source": "strace"})
    for _ in range(3):
        yield t("proc.exec", {"argv": ["python", "-m", "pytest", "-q"], "path": "/usr/bin/python",
                              "source": "strace"})
    for _ in range(2):
        yield t("tool.call", {"tool": "edit", "input": {"path": own, "old": "a", "new": "b"}})
        yield t("tool.result", {"tool": "edit", "output": "ok " * 30, "is_error": False})
    for stream in ("stdout", "stderr"):
        yield t("agent.output", {"stream": stream, "text": "working... " * 40, "total_bytes": 440,
                                 "truncated": False})
    wall = rng.uniform(5.0, 150.0)
    yield t("agent.finished", {"exit_code": 0, "signal": None, "wall_s": wall,
                               "timed_out": wall > 140.0, "crashed": rng.random() < 0.01,
                               "tokens_in": 12_000, "tokens_out": 3_000,
                               "cost_usd": round(rng.uniform(0.01, 0.9), 4),
                               "cost_source": "reported", "orphans": int(rng.random() < 0.01),
                               "telemetry": True})
    for k in range(3):
        yield t("signal.result", {"index": k, "signal": {"kind": "command", "command": "true"},
                                  "passed": ok or k > 0, "detail": ""})
    hidden_failed = 0 if ok else 2
    yield t("test.result", {"suite": "hidden", "command": ["pytest", "-q", "tests_hidden"],
                            "exit_code": 0 if ok else 1, "passed": ok, "duration_s": 0.5,
                            "counts": {"passed": 4 - hidden_failed, "failed": hidden_failed,
                                       "error": 0, "skipped": 0},
                            "tests": [{"id": f"tests_hidden/test_h.py::t{k}",
                                       "outcome": "failed" if k < hidden_failed else "passed",
                                       "message": "AssertionError" if k < hidden_failed else ""}
                                      for k in range(4)]})
    yield t("test.result", {"suite": "regression", "command": ["pytest", "-q", "tests"],
                            "exit_code": 0 if counts["failed"] == 0 else 1,
                            "passed": counts["failed"] == 0, "duration_s": 0.8, "counts": counts,
                            "tests": after})
    yield t("diff", {"files": [{"path": own, "status": "modified", "added": 6, "removed": 2}],
                     "patch": f"--- a/{own}\n+++ b/{own}\n" + "+    y = compute(x)\n" * 6,
                     "truncated": False, "conflict_markers": False, "apply_failed": False})
    yield t("judge.verdict", {"judge": "offline", "version": "1.0.0",
                              "scores": {"completeness": 5 if ok else 2, "accuracy": 5 if ok else 1,
                                         "actionability": 4, "no_hallucinations": 5},
                              "raw": "{}", "notes": []})
    yield t("attempt.finished", {"status": "completed", "error": None})


def build(path: Path, attempts: int) -> tuple[int, float]:
    """Write the synthetic run; return (entries, seconds)."""
    rng = random.Random(SEED)
    tasks = _tasks()
    agents = [f"agent{k}" for k in range(AGENTS)]
    repeats = max(1, -(-attempts // (TASKS * AGENTS)))
    t0 = time.perf_counter()
    with Journal.open(path, create=True, synchronous="NORMAL", harness=True) as j:
        j.append("run.started", {"harness_version": "bench", "config": {
            "tiers": ["smoke", "standard", "stretch", "adversarial"],
            "task_ids": [x["id"] for x in tasks], "agents": agents, "repeat": repeats,
            "parallel": 1, "timeout_s": None, "trace": "auto", "executor": "local"},
            "tasks": tasks, "agents": [{"name": a, "spec": a, "kind": "cli", "version": "1"}
                                       for a in agents]}, run=RUN_ID)
        batch: list[tuple[str, dict[str, Any], str, str]] = []
        n = 0
        for r in range(1, repeats + 1):
            for tsk in tasks:
                for agent in agents:
                    if n >= attempts:
                        break
                    n += 1
                    batch.extend(_attempt_items(rng, tsk["id"], agent, r))
                    if len(batch) >= BATCH:
                        j.append_many(batch)
                        batch = []
        if batch:
            j.append_many(batch)
        j.append("run.finished", {"status": "finished", "attempts": n, "completed": n},
                 run=RUN_ID)
        j.append("view.recorded", recorded_view_data(j.entries(run=RUN_ID), RUN_ID), run=RUN_ID)
        j.append("view.recorded", {"evaluator": stats_view.EVALUATOR_NAME,
                                   "version": stats_view.EVALUATOR_VERSION,
                                   "view": stats_view.stats_of(j.entries(run=RUN_ID), RUN_ID)},
                 run=RUN_ID)
        size = j.size
    return size, time.perf_counter() - t0


class _Timer:
    """Wall and CPU seconds of a block (CPU time is steadier on a shared machine)."""

    def __enter__(self) -> _Timer:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def _raw_entries(j: Journal) -> Iterator[Entry]:
    for _seq, body in j.store.rows(run=RUN_ID):
        o = msgpack.unpackb(body, raw=False, strict_map_key=True)
        yield Entry(o["seq"], o["ts"], o["run"], o["task"], o["kind"], o["data"], bytes(body))


def _one_round(j: Journal, k: int) -> tuple[dict[str, _Timer], bool]:
    """Time each workload once; the order alternates between rounds."""
    timers: dict[str, _Timer] = {}
    reproduced = True

    def decode() -> None:
        with _Timer() as t:
            for _ in j.entries(run=RUN_ID, check_canonical=False):
                pass
        timers["decode"] = t

    def replay_journal() -> None:
        nonlocal reproduced
        with _Timer() as t:
            reproduced = replay(j.entries(run=RUN_ID, check_canonical=False),
                                RUN_ID).reproduced and reproduced
        timers["replay"] = t

    def stats_replay() -> None:
        nonlocal reproduced
        with _Timer() as t:
            result = replay_stored(j, RUN_ID, stop=j.size)
            reproduced = (result.reproduced and reproduced
                          and {v.evaluator for v in result.views} == {"golden", "stats"})
        timers["stats_replay"] = t

    def held_stats_replay() -> None:
        nonlocal reproduced
        with _Timer() as t:
            result = replay_run(j.entries(run=RUN_ID, check_canonical=False), RUN_ID)
            reproduced = (result.reproduced and reproduced
                          and {v.evaluator for v in result.views} == {"golden", "stats"})
        timers["held_stats_replay"] = t

    def raw_decode() -> None:
        with _Timer() as t:
            for _ in _raw_entries(j):
                pass
        timers["raw_decode"] = t

    def raw_replay() -> None:
        nonlocal reproduced
        with _Timer() as t:
            reproduced = replay(_raw_entries(j), RUN_ID).reproduced and reproduced
        timers["raw_replay"] = t

    order = [decode, replay_journal, stats_replay, held_stats_replay, raw_decode, raw_replay]
    for fn in order if k % 2 == 0 else order[::-1]:
        fn()
    return timers, reproduced


def measure(attempts: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        db = Path(tmp) / "journal.db"
        size, build_s = build(db, attempts)
        results: list[dict[str, _Timer]] = []
        reproduced = True
        with Journal.open(db, readonly=True) as j:
            for k in range(rounds):
                timers, ok = _one_round(j, k)
                results.append(timers)
                reproduced = reproduced and ok
            entries = list(j.entries(run=RUN_ID))
            with _Timer() as fold_t:
                views = compute_views(entries, RUN_ID)
            del entries
            verify_error = None
            with _Timer() as verify_t:
                try:
                    j.verify()
                except Exception as exc:  # report, do not lose the replay figures
                    verify_error = f"{type(exc).__name__}: {exc}"
        db_bytes = db.stat().st_size

    def med(name: str, cpu: bool = False) -> float:
        return statistics.median(r[name].cpu if cpu else r[name].wall for r in results)

    dec, rep = med("decode"), med("replay")
    dec_cpu, rep_cpu = med("decode", True), med("replay", True)
    raw_dec, raw_rep = med("raw_decode"), med("raw_replay")
    srep, srep_cpu = med("stats_replay"), med("stats_replay", True)
    raw_dec_cpu, raw_rep_cpu = med("raw_decode", True), med("raw_replay", True)
    return {
        "benchmark": "replay",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "attempts": views["counts"]["attempts"],
        "entries": size,
        "rounds": rounds,
        "build_s": round(build_s, 3),
        "db_bytes": db_bytes,
        "decode_s": round(dec, 3),
        "decode_cpu_s": round(dec_cpu, 3),
        "decode_entries_per_s": round(size / dec),
        "replay_s": round(rep, 3),
        "replay_cpu_s": round(rep_cpu, 3),
        "replay_entries_per_s": round(size / rep),
        "ratio": round(dec / rep, 3),
        "ratio_cpu": round(dec_cpu / rep_cpu, 3),
        "ratio_target": 0.5,
        "replay_target_s": 10.0,
        "stats_replay_s": round(srep, 3),
        "stats_replay_cpu_s": round(srep_cpu, 3),
        "stats_ratio": round(dec / srep, 3),
        "stats_ratio_cpu": round(dec_cpu / srep_cpu, 3),
        "held_stats_replay_s": round(med("held_stats_replay"), 3),
        "held_stats_replay_cpu_s": round(med("held_stats_replay", True), 3),
        "fold_only_s": round(fold_t.wall, 3),
        "fold_only_cpu_s": round(fold_t.cpu, 3),
        "verify_s": round(verify_t.wall, 3) if verify_error is None else None,
        "verify_error": verify_error,
        "raw_decode_s": round(raw_dec, 3),
        "raw_decode_cpu_s": round(raw_dec_cpu, 3),
        "raw_replay_s": round(raw_rep, 3),
        "raw_replay_cpu_s": round(raw_rep_cpu, 3),
        "raw_ratio": round(raw_dec / raw_rep, 3),
        "raw_ratio_cpu": round(raw_dec_cpu / raw_rep_cpu, 3),
        "reproduced": reproduced,
        "score": views["score"],
        "meets_targets": (dec / rep >= 0.5 and rep < 10.0 and dec / srep >= 0.5
                          and srep < 10.0 and reproduced),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--attempts", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200 attempts, 1 round")
    args = ap.parse_args(argv)
    attempts, rounds = (200, 1) if args.quick else (args.attempts, args.rounds)
    out = measure(attempts, rounds)
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print(f"{out['attempts']} attempts, {out['entries']} entries (built in {out['build_s']} s)")
        print(f"decode {out['decode_s']} s, replay {out['replay_s']} s, ratio {out['ratio']} "
              f"(target >= 0.5), replay target < 10 s; fold only {out['fold_only_s']} s, "
              f"verify {out['verify_s']} s; with the statistics view: replay "
              f"{out['stats_replay_s']} s, ratio {out['stats_ratio']}; "
              f"reproduced: {out['reproduced']}")
    return 0 if out["meets_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
