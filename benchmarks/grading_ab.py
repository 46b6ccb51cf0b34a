"""Grading time per attempt, this checkout against an earlier one, interleaved in one session.

    python benchmarks/grading_ab.py --json --before DIR [--rounds 3]

DIR is a copy of an earlier commit (``git archive COMMIT | tar -x -C DIR``); both sides run with
this interpreter. Each round runs the five smoke tasks (demo agent, strace, the default sandbox)
four times, interleaved so that every side sees the same load: before and after, each with
canaries and the grading capture (``both``, the default) and with neither (``bare``), each run in
a fresh process whose ``ledger`` is that side's (``run.py``'s ``traced_smoke``, which puts its
checkout first on ``sys.path``). Reported: per side the pooled median grading time per attempt
(``agent.finished`` to the last suite's result) of each mode, the overhead ``both / bare - 1``
(target <= 0.30) pooled and per round, and ``after / before`` of ``both``; every attempt's verdict
(all must be CLEAN); the load average at each run's start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

_ONE = r"""
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import run
def main():
    import ledger
    kw = {} if sys.argv[1] == "both" else {"canaries": False, "grading_trace": False}
    load = os.getloadavg()[0]
    rows = run.traced_smoke(**kw).get("per_attempt", [])
    print(json.dumps({"ledger": os.path.dirname(ledger.__file__), "load": round(load, 2),
                      "grading_ms": [r.get("grading_ms") for r in rows],
                      "verdicts": [r.get("verdict") for r in rows]}))
if __name__ == "__main__":
    main()
"""


def _one(root: Path, mode: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _ONE, mode], cwd=root, capture_output=True,
                         text=True, timeout=1800, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sides = {"before": args.before.resolve(), "after": Path(__file__).resolve().parents[1]}
    runs: list[dict[str, Any]] = []
    for r in range(1, max(1, args.rounds) + 1):
        for mode in ("both", "bare"):
            for side, root in sides.items():
                runs.append({"round": r, "side": side, "mode": mode, **_one(root, mode)})
    result: dict[str, Any] = {"benchmark": "grading_ab", "rounds": args.rounds, "runs": runs}
    pooled: dict[str, Any] = {}
    for side in sides:
        med = {m: _median([g for x in runs if x["side"] == side and x["mode"] == m
                           for g in x["grading_ms"] if g]) for m in ("both", "bare")}
        per_round = []
        for r in range(1, args.rounds + 1):
            b, n = ([statistics.median(g for g in x["grading_ms"] if g) for x in runs
                     if x["side"] == side and x["mode"] == m and x["round"] == r]
                    for m in ("both", "bare"))
            per_round.append(round(b[0] / n[0] - 1, 3))
        pooled[side] = {"grading_ms_median_both": med["both"], "grading_ms_median_bare": med["bare"],
                        "overhead": round(med["both"] / med["bare"] - 1, 3)
                        if med["both"] and med["bare"] else None,
                        "overhead_per_round": per_round}
    result["sides"] = pooled
    result["overhead_target"] = 0.30
    b, a = pooled["before"]["grading_ms_median_both"], pooled["after"]["grading_ms_median_both"]
    result["after_vs_before_both"] = round(a / b - 1, 3) if a and b else None
    result["all_clean"] = all(v == "CLEAN" for x in runs for v in x["verdicts"])
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
