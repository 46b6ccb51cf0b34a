"""Benchmark of `ledger run`: harness overhead per attempt, parallel speed-up, journal volume.

    python benchmarks/run.py [--json] [--attempts 20]

* overhead: ``noop`` on a small task (check-script tests), ``--parallel 1 --trace none``. Per
  attempt: time from ``attempt.started`` to ``attempt.finished`` (journal timestamps) minus the
  agent's own wall time and the test commands' durations (baseline, hidden, regression). The
  median is reported (target <= 100 ms), with the same-run baseline of one bare ``python -c pass``
  process spawn for scale.
* speed-up: a sleep-1s ``cmd:`` agent, 20 attempts, ``--parallel 2`` vs ``--parallel 1`` wall
  time (target >= 1.7).
* volume: journal entries and bytes per attempt for both workloads.
* traced: the five smoke tasks with the ``demo`` agent under ``--trace strace`` (skipped with a
  reason when strace does not work here). Per attempt: journal entries and bytes (targets <= 150
  and <= 150 KB), *grading time* (``grading_ms``: from ``agent.finished`` to the last
  ``test.result`` or the ``grading.trace`` after it, capture times: the graded changes applied,
  signals and suites run, the grading capture's logs parsed), measured with canaries and the
  grading capture, with canaries alone and with neither (interleaved runs), and
  *harness time*: the attempt's wall time (journal timestamps) minus the time
  the worker spent waiting on child processes (agent, tests, signals, git; measured by
  ``timing_runner.py``). With ``inspect-ai`` installed, Inspect AI's per-sample time on the same
  five tasks runs in the same process run (``inspect_side.py``) and the ratio is reported
  (target <= 2). ``--rounds N`` (default 3) runs both sides N times, interleaved, each round a
  fresh run (new workers, cold caches); the medians pool the rounds' warm attempts.
* felt harness time (same traced runs): attempt wall minus the agent's own wall time and the
  test and signal commands' durations (journal), so git, sandbox set-up, the capture and the
  attestation all count as the harness's; every attempt pooled, the cold first one included,
  against Inspect AI's sample time minus its tool time (first samples included); target <= 2.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.home import LedgerHome  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402

try:
    from ledger.run.coordinator import execute_run
    from ledger.run.plan import RunRequest
except ImportError:  # the layout before issue 16 (to measure an older commit the same way)
    from ledger.run.recorder import RunRequest, execute_run  # type: ignore[no-redef]

sys.path.append(str(Path(__file__).resolve().parent))  # after ROOT: benchmarks/attest.py must not shadow attest/
import timing_runner  # noqa: E402
from bench_task import attempt_times, make_home  # noqa: E402


def run(home: LedgerHome, agent: str, attempts: int, parallel: int) -> tuple[str, float]:
    req = RunRequest(tiers=("bench",), agents=(agent,), repeat=attempts, parallel=parallel,
                     trace="none")
    t0 = time.perf_counter()
    summary = execute_run(home, req)
    return summary.run_id, time.perf_counter() - t0


def attempt_stats(home: LedgerHome, run_id: str) -> dict[str, Any]:
    items, per = attempt_times(home, run_id)
    overhead = [1000 * (p["end"] - p["start"] - p["agent"] - p["tests"]) for p in per.values()]
    n = len(per)
    return {
        "attempts": n,
        "overhead_ms_median": round(statistics.median(overhead), 1),
        "overhead_ms_p90": round(sorted(overhead)[int(0.9 * (n - 1))], 1),
        "agent_s_median": round(statistics.median(p["agent"] for p in per.values()), 3),
        "tests_s_median": round(statistics.median(p["tests"] for p in per.values()), 3),
        "entries_per_attempt": round(len(items) / n, 1),
        "bytes_per_attempt": round(sum(len(e.raw) for e in items) / n),
    }


def _per_attempt(items: list[Any]) -> dict[str, dict[str, Any]]:
    """A run's entries folded per attempt: counts, bytes, and the capture times the rows use."""
    per: dict[str, dict[str, Any]] = {}
    for e in items:
        aid = e.data.get("attempt")
        if not isinstance(aid, str):
            continue
        p = per.setdefault(aid, {"entries": 0, "bytes": 0, "tests": 0.0, "signals": 0.0,
                                 "kinds": {}})
        p["entries"] += 1
        p["bytes"] += len(e.raw)
        p["kinds"][e.kind] = p["kinds"].get(e.kind, 0) + 1
        if e.kind == "attempt.started":
            p["start"] = e.ts / 1e9
        elif e.kind == "agent.finished":
            p["agent"] = float(e.data["wall_s"])
            p["agent_done"] = e.data.get("at")
        elif e.kind == "grading.expected":
            p["expected_at"] = e.data.get("at")
        elif e.kind in ("test.baseline", "test.result"):
            p["tests"] += float(e.data["duration_s"])
            if e.kind == "test.baseline":
                p["baseline_at"] = e.data.get("at")
            if e.kind == "test.result":
                p["graded"] = e.data.get("at")
        elif e.kind == "grading.trace":  # after the last suite: the capture's logs parsed
            p["graded"] = e.data.get("at") or p.get("graded")
        elif e.kind == "signal.result":
            p["signals"] += float(e.data.get("duration_s") or 0.0)
        elif e.kind == "attestation":
            p["verdict"] = e.data["attestation"].get("verdict")
        elif e.kind == "attempt.finished":
            p["end"] = e.ts / 1e9
            p["status"] = e.data.get("status")
            p["error"] = e.data.get("error")
    return per


def _row(aid: str, p: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
    """One attempt's row: volume, harness, felt and grading times, the harness steps."""
    intervals = timing.get("children", [])
    waited = timing_runner.union_s(intervals, p["start"], p["end"])
    wall_ms = 1000 * (p["end"] - p["start"])
    felt_ms = wall_ms - 1000 * (p.get("agent", 0.0) + p["tests"] + p["signals"])
    gits = [(s, e) for s, e, label in timing.get("commands", []) if label == "git"]
    git_ms = 1000 * timing_runner.union_s(gits, p["start"], p["end"])
    return {
        "attempt": aid.split("/")[1],
        "entries": p["entries"],
        "bytes": p["bytes"],
        "wall_ms": round(wall_ms, 1),
        "children_ms": round(1000 * waited, 1),
        "harness_ms": round(wall_ms - 1000 * waited, 1),
        # as a user feels it: only the agent's and the test and signal commands' own
        # durations are not the harness's (git, sandbox set-up, capture, attestation are)
        "felt_harness_ms": round(felt_ms, 1),
        # where the felt time goes: in the worker with no child running, git's
        # processes, and every other child the journal does not time (the signal
        # canaries, the probes of the first attempt, the wrappers' start outside the
        # commands' own durations, the collection when it outlasts the baseline)
        "felt_breakdown_ms": {
            "worker": round(wall_ms - 1000 * waited, 1),
            "git": round(git_ms, 1),
            "git_processes": len(gits),
            "other_children": round(felt_ms - (wall_ms - 1000 * waited) - git_ms, 1),
        },
        "agent_ms": round(1000 * p.get("agent", 0.0), 1),
        "tests_ms": round(1000 * p["tests"], 1),
        # grading: from the agent's end to the last suite's result (capture times):
        # applying the graded changes, the hidden tests, signals and suites
        "grading_ms": (round((p["graded"] - p["agent_done"]) / 1e6, 1)
                       if p.get("graded") and p.get("agent_done") else None),
        # the hidden ids collected before the agent (once per task and worker): from
        # the baseline's result to grading.expected
        "collect_ms": (round((p["expected_at"] - p["baseline_at"]) / 1e6, 1)
                       if p.get("expected_at") and p.get("baseline_at") else None),
        "signals_ms": round(1000 * p["signals"], 1),
        "verdict": p.get("verdict"),
        "status": p.get("status"),
        "error": p.get("error"),
        "top_kinds": dict(sorted(p["kinds"].items(), key=lambda kv: -kv[1])[:4]),
        # where the harness time goes: the longest stretches without a child process,
        # as [offset from attempt.started, length] in ms
        # harness steps in the worker: [wall ms, CPU ms]
        "steps_ms": {k: [round(1000 * w), round(1000 * c)]
                     for k, (w, c) in sorted(timing.get("phases", {}).items())},
        "largest_gaps_ms": [[round(1000 * o), round(1000 * n)] for o, n in sorted(
            timing_runner.gaps(intervals, p["start"], p["end"]), key=lambda g: -g[1])[:4]],
    }


def traced_smoke(canaries: bool = True, grading_trace: bool = True) -> dict[str, Any]:
    """The five smoke tasks, demo agent, strace: volume and harness time per attempt
    (``canaries=False``: the attempts get none; ``grading_trace=False``: their grading commands
    run without the grading capture; both off: the grading-time baseline)."""
    from ledger.agents import strace

    ok, reason = strace.strace_status()
    if not ok:
        return {"skipped": reason}
    executor_cls = _local_executor()
    defaults = executor_cls.__init__.__kwdefaults__
    old_runner = defaults["runner"]
    # One folder for the workers' timing files for the whole process: the forkserver that
    # starts the workers keeps the environment it started with, so later rounds' workers write
    # where the first round's did (attempt ids differ from run to run).
    if timing_runner.ENV not in os.environ:
        made = tempfile.mkdtemp(prefix="ledger-bench-children-")
        atexit.register(shutil.rmtree, made, ignore_errors=True)
        os.environ[timing_runner.ENV] = made
    children = Path(os.environ[timing_runner.ENV])
    with tempfile.TemporaryDirectory(prefix="ledger-bench-traced-") as tmp:
        home = LedgerHome(Path(tmp) / ".ledger")
        defaults["runner"] = "timing_runner:run_attempt"
        try:
            req = RunRequest(tiers=("smoke",), agents=("demo",), repeat=1, parallel=1,
                             trace="strace", canaries=canaries, grading_trace=grading_trace)
            t0 = time.perf_counter()
            summary = execute_run(home, req)
            wall = time.perf_counter() - t0
        finally:
            defaults["runner"] = old_runner
        with Journal.open(home.journal_path) as j:
            items = list(j.entries(run=summary.run_id))
        per = _per_attempt(items)
        rows = []
        for aid, p in sorted(per.items()):
            f = timing_runner.child_file(children, aid)
            timing = json.loads(f.read_text()) if f.exists() else {}
            rows.append(_row(aid, p, timing))
    n = len(rows)
    out: dict[str, Any] = {
        "attempts": n,
        "run_wall_s": round(wall, 2),
        "entries_per_attempt_max": max(r["entries"] for r in rows),
        "entries_per_attempt_median": statistics.median(r["entries"] for r in rows),
        "bytes_per_attempt_max": max(r["bytes"] for r in rows),
        "bytes_per_attempt_median": statistics.median(r["bytes"] for r in rows),
        "harness_ms_median": round(statistics.median(r["harness_ms"] for r in rows), 1),
        "grading_ms_median": (round(statistics.median(g), 1) if (g := [
            r["grading_ms"] for r in rows if r["grading_ms"] is not None]) else None),
        "felt_harness_ms_median": round(statistics.median(r["felt_harness_ms"] for r in rows), 1),
        "entries_target": 150,
        "bytes_target": 150_000,
        "per_attempt": rows,
    }
    out["entries_ok"] = out["entries_per_attempt_max"] <= 150
    out["bytes_ok"] = out["bytes_per_attempt_max"] <= 150_000
    return out


def _local_executor() -> Any:
    try:
        from ledger.run.executors.local import LocalExecutor  # the layout after issue 16
    except ImportError:
        from ledger.run.executor import LocalExecutor
    return LocalExecutor


def inspect_side() -> dict[str, Any]:
    """Inspect AI on the same five tasks, same machine, same run (when inspect-ai is installed)."""
    try:
        import inspect_side as side
    except ImportError as exc:  # inspect-ai missing
        return {"skipped": f"inspect-ai not installed ({exc})"}
    return side.measure()


def python_spawn_ms(n: int = 10) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(1000 * (time.perf_counter() - t0))
    return round(statistics.median(samples), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--attempts", type=int, default=20)
    parser.add_argument("--only", choices=["all", "traced"], default="all",
                        help="traced: only the strace smoke section and Inspect AI beside it")
    parser.add_argument("--rounds", type=int, default=3,
                        help="traced section: fresh runs of both sides, interleaved; the medians "
                             "pool every round's attempts (first, cold attempts excluded)")
    args = parser.parse_args()
    if args.only == "traced":
        result = {"benchmark": "run", **traced_rounds(args.rounds)}
        _print(result, args.json)
        return
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = make_home(Path(tmp))
        spawn = python_spawn_ms()
        noop_run, noop_wall = run(home, "noop", args.attempts, 1)
        noop = attempt_stats(home, noop_run)
        noop["run_wall_s"] = round(noop_wall, 2)
        noop["run_wall_per_attempt_ms"] = round(1000 * noop_wall / args.attempts, 1)
        sleeper = f"cmd:{sys.executable} -c 'import time; time.sleep(1)'"
        r1, wall1 = run(home, sleeper, args.attempts, 1)
        r2, wall2 = run(home, sleeper, args.attempts, 2)
        sleep_stats = attempt_stats(home, r2)
    result = {
        "benchmark": "run",
        "python_spawn_ms": spawn,
        "noop": noop,
        "overhead_vs_python_spawn": round(noop["overhead_ms_median"] / spawn, 2),
        "overhead_target_ms": 100,
        "overhead_ok": noop["overhead_ms_median"] <= 100,
        "sleep1s": {
            "attempts": args.attempts,
            "parallel1_wall_s": round(wall1, 2),
            "parallel2_wall_s": round(wall2, 2),
            "speedup": round(wall1 / wall2, 2),
            "speedup_target": 1.7,
            "speedup_ok": wall1 / wall2 >= 1.7,
            "entries_per_attempt": sleep_stats["entries_per_attempt"],
            "bytes_per_attempt": sleep_stats["bytes_per_attempt"],
            "overhead_ms_median_parallel2": sleep_stats["overhead_ms_median"],
        },
    }
    result.update(traced_rounds(args.rounds))
    _print(result, args.json)


def _grading_ms(runs: list[dict[str, Any]]) -> list[float]:
    return [r["grading_ms"] for t in runs for r in t.get("per_attempt", [])
            if r.get("grading_ms") is not None]


def _grading_overheads(graded: list[float], bare_runs: list[dict[str, Any]],
                       canary_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Grading time per attempt (pooled medians) with canaries and the grading capture (the
    default), with canaries alone, and with neither (the baseline), from interleaved runs; what
    canaries and capture together add, and each alone."""
    bare, canaried = _grading_ms(bare_runs), _grading_ms(canary_runs)
    if not (bare and graded):
        return {}
    base = statistics.median(bare)
    out: dict[str, Any] = {
        "grading_traced": True,
        "grading_ms_median_pooled_no_canaries_no_trace": round(base, 1),
        "grading_overhead": round(statistics.median(graded) / max(base, 0.1) - 1, 3),
        "grading_overhead_target": 0.30,
    }
    if canaried:
        mid = statistics.median(canaried)
        out["grading_ms_median_pooled_canaries_no_trace"] = round(mid, 1)
        out["canary_grading_overhead"] = round(mid / max(base, 0.1) - 1, 3)
        out["trace_grading_overhead"] = round(statistics.median(graded) / max(mid, 0.1) - 1, 3)
    out["grading_overhead_ok"] = out["grading_overhead"] <= 0.30
    return out


def traced_rounds(rounds: int) -> dict[str, Any]:
    """``rounds`` of (eval-ledger traced run, Inspect AI run), interleaved so that both sides see
    the same load; each round is a fresh run (new worker processes, cold caches, one attempt per
    task, as in one round). The harness-time medians pool the warm attempts of every round (each
    side's first attempt of a round pays its imports and first hashing: it is reported, not
    pooled); the ratio of those medians is the figure, each round's own ratio is listed too."""
    traced_runs, inspect_runs, bare_runs, canary_runs = [], [], [], []
    load_start = os.getloadavg()
    for _ in range(max(1, rounds)):
        traced_runs.append(traced_smoke())
        bare_runs.append(traced_smoke(canaries=False, grading_trace=False))
        canary_runs.append(traced_smoke(canaries=True, grading_trace=False))
        inspect_runs.append(inspect_side())
    traced, side = traced_runs[-1], inspect_runs[-1]
    out: dict[str, Any] = {"rounds": len(traced_runs), "traced": traced, "inspect": side,
                           "loadavg_start": [round(x, 2) for x in load_start],
                           "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    rows = [r for t in traced_runs for r in t.get("per_attempt", [])]
    if rows and all("felt_breakdown_ms" in r for r in rows):
        out["felt_breakdown_ms_median_pooled"] = {
            k: round(statistics.median(r["felt_breakdown_ms"][k] for r in rows), 1)
            for k in rows[0]["felt_breakdown_ms"]}
    graded = [r["grading_ms"] for r in rows if r.get("grading_ms") is not None]
    collect = [r["collect_ms"] for r in rows if r.get("collect_ms") is not None]
    out["grading_ms_median_pooled"] = round(statistics.median(graded), 1) if graded else None
    out["collect_ms_median_pooled"] = round(statistics.median(collect), 1) if collect else None
    out.update(_grading_overheads(graded, bare_runs, canary_runs))
    if "harness_ms_median" not in traced or "harness_ms_median" not in side:
        return out
    ours = [r["harness_ms"] for t in traced_runs for r in t["per_attempt"][1:]]
    theirs = [r["harness_ms"] for s in inspect_runs for r in s["per_sample"][1:]]
    mine, other = statistics.median(ours), statistics.median(theirs)
    ratio = mine / max(other, 0.1)
    out.update({
        "harness_ms_median_pooled": round(mine, 1),
        "inspect_harness_ms_median_pooled": round(other, 1),
        "harness_ms_first_attempts": [t["per_attempt"][0]["harness_ms"] for t in traced_runs],
        "inspect_harness_ms_first_samples": [s["per_sample"][0]["harness_ms"] for s in inspect_runs],
        "harness_vs_inspect_per_round": [
            round(t["harness_ms_median"] / max(s["harness_ms_median"], 0.1), 2)
            for t, s in zip(traced_runs, inspect_runs, strict=True)],
        "harness_vs_inspect": round(ratio, 2),
        "harness_vs_inspect_target": 2.0,
        "harness_vs_inspect_ok": ratio <= 2.0,
    })
    # As a user feels it: attempt wall minus the agent's wall and the test and signal commands'
    # durations (git, sandbox set-up, capture, attestation are the harness's), every attempt of
    # every round pooled, the cold first one included; against Inspect AI's sample time minus
    # its tool (exec) time, first samples included.
    felt = [r["felt_harness_ms"] for t in traced_runs for r in t["per_attempt"]]
    theirs_all = [r["harness_ms"] for s in inspect_runs for r in s["per_sample"]]
    felt_med, other_all = statistics.median(felt), statistics.median(theirs_all)
    felt_ratio = felt_med / max(other_all, 0.1)
    out.update({
        "felt_harness_ms_median_pooled": round(felt_med, 1),
        "felt_harness_ms_range": [round(min(felt), 1), round(max(felt), 1)],
        "inspect_harness_ms_median_pooled_with_first": round(other_all, 1),
        "inspect_harness_ms_range": [round(min(theirs_all), 1), round(max(theirs_all), 1)],
        "felt_vs_inspect_per_round": [
            round(statistics.median(r["felt_harness_ms"] for r in t["per_attempt"])
                  / max(statistics.median(r["harness_ms"] for r in s["per_sample"]), 0.1), 2)
            for t, s in zip(traced_runs, inspect_runs, strict=True)],
        "felt_vs_inspect": round(felt_ratio, 2),
        "felt_vs_inspect_target": 2.0,
        "felt_vs_inspect_ok": felt_ratio <= 2.0,
    })
    out["figures"] = _figures(out)
    return out


def _figures(out: dict[str, Any]) -> dict[str, Any]:
    """The three figures of issues 26 and 20 side by side, each with its same-run baseline,
    ratio and target (the keys above hold the detail)."""
    def pick(*keys: str) -> dict[str, Any]:
        return {k: out.get(k) for k in keys}

    return {
        "felt_harness_ms": pick("felt_harness_ms_median_pooled",
                                "inspect_harness_ms_median_pooled_with_first", "felt_vs_inspect",
                                "felt_vs_inspect_target", "felt_vs_inspect_ok",
                                "felt_breakdown_ms_median_pooled"),
        "harness_ms": pick("harness_ms_median_pooled", "inspect_harness_ms_median_pooled",
                           "harness_vs_inspect", "harness_vs_inspect_target",
                           "harness_vs_inspect_ok"),
        "grading_ms": pick("grading_ms_median_pooled", "grading_ms_median_pooled_canaries_no_trace",
                           "grading_ms_median_pooled_no_canaries_no_trace", "grading_overhead",
                           "canary_grading_overhead", "trace_grading_overhead",
                           "grading_overhead_target", "grading_overhead_ok"),
        "loadavg": [out.get("loadavg_start"), out.get("loadavg_end")],
    }


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
