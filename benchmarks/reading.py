"""Verified reading (issue 24): ``ledger report RUN --json``, which checks the run's entries against
the tree and the signed checkpoint before it shows them, against the same report without the
check, each as a whole process on the same journal.

    python benchmarks/reading.py [--json] [--attempts 1000] [--rounds 5]

The journal is ``benchmarks/verify_audit.py``'s: N smoke-sized attempts with a real signed
attestation each, run.finished, the recorded view and a signed checkpoint. The baseline process
is the report as it was before the check (the run's entries read as stored, ``compute_views``,
the same JSON printed); both are timed in interleaved rounds, best of ``--rounds`` by CPU time
(user + sys of the child; wall time reported too). Target: ratio <= 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.verify_audit import RUN, _time, build  # noqa: E402

TARGET_RATIO = 1.5

# ``ledger report RUN --json`` before verified reading: the same views, the same output.
UNCHECKED = ("import sys, json; from pathlib import Path; from ledger.journal.journal import Journal; "
             "from evaluators.views import compute_views; h = Path(sys.argv[1]); "
             "j = Journal.open(h / 'journal.db', readonly=True); "
             "v = compute_views(j.entries(run=sys.argv[2]), sys.argv[2]); "
             "print(json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False))")


def measure(attempts: int, rounds: int, tmp: Path) -> dict[str, Any]:
    home = tmp / "ledger"
    t0 = time.perf_counter()
    size = build(home, attempts)
    build_s = time.perf_counter() - t0
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config")}
    base_cmd = [sys.executable, "-c", UNCHECKED, str(home), RUN]
    report_cmd = [sys.executable, "-c", "from cli.main import main; main()", "--ledger", str(home),
                  "report", RUN, "--json"]
    base, checked = [], []
    for _ in range(rounds):  # interleaved, so both see the same machine load
        base.append(_time(base_cmd, env))
        checked.append(_time(report_cmd, env))
    bw, cw = min(w for w, _ in base), min(w for w, _ in checked)
    bc, cc = min(c for _, c in base), min(c for _, c in checked)
    return {"attempts": attempts, "entries": size, "build_s": round(build_s, 2),
            "unchecked_report_s": round(bw, 3), "verified_report_s": round(cw, 3),
            "unchecked_report_cpu_s": round(bc, 3), "verified_report_cpu_s": round(cc, 3),
            "wall_ratio": round(cw / bw, 2), "ratio": round(cc / bc, 2),
            "target_ratio": TARGET_RATIO, "ok": cc / bc <= TARGET_RATIO}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--attempts", type=int, default=1000, help="smoke-sized attempts in the journal")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds (best is reported)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledger-reading-bench-") as tmp:
        r = measure(args.attempts, args.rounds, Path(tmp))
    if args.json:
        print(json.dumps(r, indent=2, sort_keys=True))
    else:
        print(f"{'ok' if r['ok'] else 'MISS'} verified report of {r['attempts']} attempts "
              f"({r['entries']} entries): {r['verified_report_cpu_s']}s CPU vs unchecked "
              f"{r['unchecked_report_cpu_s']}s = {r['ratio']}x (target <= {r['target_ratio']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
