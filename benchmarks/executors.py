"""Benchmark of the executors: Ray against the local process pool on the same workload.

    python benchmarks/executors.py [--json] [--attempts 20] [--slots 2]

* wall time: ``--attempts`` attempts of a ``cmd:`` agent that sleeps one second, on a small task
  with check-script tests, ``--slots`` at once, ``--trace none``; the local executor first (the
  baseline), then Ray on a private local instance (loopback only, token auth) started before the
  run and stopped after it, so the run's wall time holds neither. Overhead = ray / local - 1
  (target <= 10%).
* append latency: every ``Journal.append`` the coordinator makes while attempts run (between the
  first ``attempt.started`` and the last ``attempt.finished``), p50/p95/max in ms, for both
  executors, against the same entry appended to an idle journal (the baseline).
* cluster start-up: seconds from ``RayExecutor(...)`` to a usable instance (one warm worker per
  slot), and to shut it down.

On a shared machine, ``--rounds 3`` alternates the two executors and keeps the best wall time of
each (all samples are printed too).
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
from ledger.journal.journal import Journal  # noqa: E402
from ledger.run.coordinator import execute_run  # noqa: E402
from ledger.run.plan import RunRequest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_task import make_home  # noqa: E402


class AppendTimer:
    """Wraps ``Journal.append`` to time every call, with the entry kind."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, str]] = []  # (start, seconds, kind)
        self._orig = Journal.append

    def __enter__(self) -> AppendTimer:
        orig, samples = self._orig, self.samples

        def timed(journal: Journal, kind: str, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(journal, kind, *args, **kwargs)
            finally:
                samples.append((t0, time.perf_counter() - t0, kind))

        Journal.append = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        Journal.append = self._orig  # type: ignore[method-assign]

    def while_running(self) -> list[float]:
        starts = [t for t, _d, k in self.samples if k == "attempt.started"]
        ends = [t for t, _d, k in self.samples if k == "attempt.finished"]
        if not starts or not ends:
            return []
        lo, hi = min(starts), max(ends)
        return [d for t, d, _k in self.samples if lo <= t <= hi]


def latency(samples: list[float]) -> dict[str, Any]:
    ms = sorted(1000 * s for s in samples)
    if not ms:
        return {"count": 0}
    return {"count": len(ms), "p50_ms": round(statistics.median(ms), 3),
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3), "max_ms": round(ms[-1], 3)}


def idle_append_baseline(tmp: Path, n: int = 200) -> dict[str, Any]:
    """The same kind of entry appended to a journal with nothing else going on."""
    samples = []
    with Journal.open(tmp / "idle.db", create=True, harness=True) as journal:
        for i in range(n):
            t0 = time.perf_counter()
            journal.append("agent.output", {"attempt": "r-x/t/a/1/1", "stream": "stdout",
                                            "text": f"line {i}", "total_bytes": 7,
                                            "truncated": False}, run="r-x", task="t")
            samples.append(time.perf_counter() - t0)
    return latency(samples)


class _Deferred:
    """Hands the run a started executor and keeps its close() for later (timed apart)."""

    def __init__(self, executor: Any) -> None:
        self._executor = executor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._executor, name)

    def close(self) -> None:
        pass


def run_once(home: LedgerHome, agent: str, attempts: int, slots: int, kind: str,
             factory: Any = None) -> tuple[float, AppendTimer, Any]:
    req = RunRequest(tiers=("bench",), agents=(agent,), repeat=attempts, parallel=slots,
                     trace="none", executor=kind)
    with AppendTimer() as timer:
        t0 = time.perf_counter()
        if factory is None:
            summary = execute_run(home, req)
        else:
            summary = execute_run(home, req, executor_factory=factory)
        wall = time.perf_counter() - t0
    return wall, timer, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--attempts", type=int, default=20)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate local and ray this many times; the best wall of each counts")
    args = parser.parse_args()
    from ledger.run.executors.ray import RayExecutor

    sleeper = f"cmd:{sys.executable} -c 'import time; time.sleep(1)'"
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    appends: dict[str, list[float]] = {"local": [], "ray": []}
    outcomes: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-exec-") as tmp_name:
        tmp = Path(tmp_name)
        idle = idle_append_baseline(tmp)
        t0 = time.perf_counter()
        executor = RayExecutor(args.slots, cache_dir=tmp / "cache")
        startup = time.perf_counter() - t0
        try:
            for n in range(args.rounds):
                for kind in ("local", "ray"):
                    factory = (lambda _k, _n: _Deferred(executor)) if kind == "ray" else None
                    wall, timer, summary = run_once(make_home(tmp / f"{kind}{n}"), sleeper,
                                                    args.attempts, args.slots, kind, factory)
                    walls[kind].append(wall)
                    appends[kind].extend(timer.while_running())
                    outcomes[kind] = sorted(r.outcome for r in summary.results)
        finally:
            t1 = time.perf_counter()
            executor.close()
            shutdown = time.perf_counter() - t1
    local_wall, ray_wall = min(walls["local"]), min(walls["ray"])
    overhead = ray_wall / local_wall - 1
    result: dict[str, Any] = {
        "benchmark": "executors",
        "attempts": args.attempts,
        "slots": args.slots,
        "rounds": args.rounds,
        "agent_s": 1.0,
        "ideal_wall_s": round(args.attempts / args.slots * 1.0, 2),
        "local_wall_s": round(local_wall, 2),
        "ray_wall_s": round(ray_wall, 2),
        "local_wall_s_all": [round(w, 2) for w in walls["local"]],
        "ray_wall_s_all": [round(w, 2) for w in walls["ray"]],
        "ray_over_local": round(ray_wall / local_wall, 3),
        "overhead_pct": round(100 * overhead, 1),
        "overhead_target_pct": 10,
        "overhead_ok": overhead <= 0.10,
        "same_outcomes": outcomes["local"] == outcomes["ray"],
        "append_latency": {
            "idle_baseline": idle,
            "local_while_running": latency(appends["local"]),
            "ray_while_running": latency(appends["ray"]),
        },
        "ray_local_instance": {"slots": args.slots, "startup_s": round(startup, 2),
                               "shutdown_s": round(shutdown, 2)},
    }
    for key in ("local_while_running", "ray_while_running"):
        row = result["append_latency"][key]
        if row.get("count") and idle.get("count"):
            row["p50_vs_idle"] = round(row["p50_ms"] / idle["p50_ms"], 2)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
