"""Benchmark of the sandbox: what isolation adds per attempt, and parallel speed-up with it.

    python benchmarks/sandbox.py [--json] [--attempts 12]

* added cost: ``noop`` on the bench task (check-script tests), ``--parallel 1 --trace none``,
  once with ``--sandbox none`` and once with ``--sandbox bwrap``, interleaved in rounds so load
  on the machine hits both alike. Per attempt, the wall time from ``attempt.started`` to
  ``attempt.finished`` (journal timestamps): the sandbox's cost is every bwrap start (agent,
  each test command), the fresh grading tree and the harness-owned copy of ``.git``, so the
  whole attempt is compared. Reported: both medians and their difference (target <= 50 ms), and
  the harness overhead as ``benchmarks/run.py`` defines it (wall minus agent and test time).
* in process: the same ``noop`` attempt run by ``run_attempt`` directly in this process,
  alternating ``none`` and ``bwrap`` attempt by attempt (no executor, no coordinator), so the
  difference is the sandbox's alone; medians and their difference.
* speed-up: a sleep-1s ``cmd:`` agent, ``--sandbox bwrap``, ``--parallel 2`` vs ``--parallel 1``
  wall time (target >= 1.7).

Without a working bubblewrap the sandboxed figures are skipped with the probe's reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.home import LedgerHome  # noqa: E402
from ledger.run.coordinator import execute_run  # noqa: E402
from ledger.run.plan import RunRequest  # noqa: E402
from ledger.sandbox import probe_bwrap  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent))
from bench_task import attempt_times, make_home  # noqa: E402


def _run(home: LedgerHome, agent: str, attempts: int, parallel: int,
         sandbox: str) -> tuple[str, float]:
    req = RunRequest(tiers=("bench",), agents=(agent,), repeat=attempts, parallel=parallel,
                     trace="none", sandbox=sandbox)
    t0 = time.perf_counter()
    summary = execute_run(home, req)
    return summary.run_id, time.perf_counter() - t0


def _per_attempt(home: LedgerHome, run_id: str) -> list[dict[str, float]]:
    _items, per = attempt_times(home, run_id, require_completed=True)
    return [{"wall_ms": 1000 * (p["end"] - p["start"]),
             "overhead_ms": 1000 * (p["end"] - p["start"] - p["agent"] - p["tests"])}
            for p in per.values()]


def in_process(home: LedgerHome, pairs: int) -> dict[str, Any]:
    """``run_attempt`` alternating none/bwrap: median wall ms of each and the difference."""
    from ledger.run.attempt import run_attempt
    from ledger.run.contracts import AttemptPlan
    from ledger.tasks.loader import load_tasks

    task = load_tasks(["bench"], overrides=home.golden_dir)[0]

    def once(mode: str, i: int) -> float:
        plan = AttemptPlan(
            run_id="bench", attempt_id=f"bench/{task.id}/noop/{i}/1", task_root=str(task.root),
            task_id=task.id, agent_spec="noop", repeat=i, try_no=1, timeout_s=60, trace="none",
            config={"tier": task.tier, "task_hash": task.hash, "commitment_key": bytes(32),
                    "sandbox": mode, "sandbox_hidden": [str(home.path)]})
        t0 = time.perf_counter()
        run_attempt(plan, lambda _e: None)
        return 1000 * (time.perf_counter() - t0)

    once("none", 0)
    once("bwrap", 0)  # warm: imports, the bwrap probe
    times: dict[str, list[float]] = {"none": [], "bwrap": []}
    for i in range(1, pairs + 1):
        for mode in (("none", "bwrap") if i % 2 else ("bwrap", "none")):
            times[mode].append(once(mode, i))
    med = {m: statistics.median(v) for m, v in times.items()}
    return {"pairs": pairs, "wall_ms_median_none": round(med["none"], 1),
            "wall_ms_median_sandbox": round(med["bwrap"], 1),
            "added_ms_median": round(med["bwrap"] - med["none"], 1),
            "added_ok": med["bwrap"] - med["none"] <= 50}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--attempts", type=int, default=12, help="noop attempts per mode")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per mode")
    parser.add_argument("--sleepers", type=int, default=8, help="sleep-1s attempts per run")
    args = parser.parse_args()
    ok, reason, version = probe_bwrap()
    result: dict[str, Any] = {"benchmark": "sandbox", "bwrap": version}
    if not ok:
        result["skipped"] = reason
        _print(result, args.json)
        return
    rows: dict[str, list[dict[str, float]]] = {"none": [], "bwrap": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-sandbox-") as tmp:
        home = make_home(Path(tmp))
        result["noop_in_process"] = in_process(home, args.attempts)
        _run(home, "noop", 1, 1, "bwrap")  # warm caches (bwrap probe, imports) outside the figures
        per_round = max(1, args.attempts // args.rounds)
        for _ in range(args.rounds):
            for mode in ("none", "bwrap"):
                run_id, _wall = _run(home, "noop", per_round, 1, mode)
                rows[mode] += _per_attempt(home, run_id)
        sleeper = f"cmd:{sys.executable} -c 'import time; time.sleep(1)'"
        _r1, wall1 = _run(home, sleeper, args.sleepers, 1, "bwrap")
        _r2, wall2 = _run(home, sleeper, args.sleepers, 2, "bwrap")
    med = {m: statistics.median(r["wall_ms"] for r in rows[m]) for m in rows}
    over = {m: statistics.median(r["overhead_ms"] for r in rows[m]) for m in rows}
    added = med["bwrap"] - med["none"]
    result.update({
        "noop": {
            "attempts_per_mode": len(rows["none"]),
            "wall_ms_median_none": round(med["none"], 1),
            "wall_ms_median_sandbox": round(med["bwrap"], 1),
            "added_ms_median": round(added, 1),
            "ratio_sandbox_vs_none": round(med["bwrap"] / med["none"], 3),
            "harness_overhead_ms_median_none": round(over["none"], 1),
            "harness_overhead_ms_median_sandbox": round(over["bwrap"], 1),
            "added_target_ms": 50,
            "added_ok": added <= 50,
        },
        "sleep1s_sandbox": {
            "attempts": args.sleepers,
            "parallel1_wall_s": round(wall1, 2),
            "parallel2_wall_s": round(wall2, 2),
            "speedup": round(wall1 / wall2, 2),
            "speedup_target": 1.7,
            "speedup_ok": wall1 / wall2 >= 1.7,
        },
    })
    _print(result, args.json)


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
