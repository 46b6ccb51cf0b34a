"""Publishing benchmark: `ledger publish`, an incremental publish and `ledger monitor`, each as a
ratio to `ledger verify` of the same journal, measured in the same run.

    python benchmarks/publish.py --json                  # 1,000,000 entries (a few minutes)
    python benchmarks/publish.py --entries 200000 --json # a smaller journal
    python benchmarks/publish.py --quick                 # 20,000 entries, a smoke run

What is timed (each the median of ``--rounds`` rounds, in-process, the same library call the
command makes):

- ``verify``       ``ledger.verify.verify`` on the whole journal (what `ledger verify
  --no-remember` runs: every leaf, tile, head and checkpoint recomputed, views replayed), the
  baseline of every ratio;
- ``publish``      ``ledger.publish.writer.publish`` of the whole journal into an empty directory
  (target: <= 2x verify);
- ``incremental``  after 1,000 more entries, the publish of just them into that directory
  (target: < 1 s);
- ``monitor``      ``ledger.publish.monitor.check_log`` of the directory, read from the local
  folder (``--no-remember``): tiles, bundles, the tree, the entries decoded, the runs checked
  (target: <= 2x verify).

Entries are built as benchmarks/journal.py builds them: 200-byte printable payloads, one run and
task, 10,000 entries per transaction, synchronous=NORMAL.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.journal import BUILD_BATCH, KIND, RUN_ID, TASK_ID, build_journal, payloads  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402
from ledger.journal.keys import init_keys  # noqa: E402

TARGETS = {"publish_ratio": 2.0, "incremental_s": 1.0, "monitor_ratio": 2.0}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _time(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def benchmark(n: int, rounds: int, tmp: Path) -> dict[str, Any]:
    from ledger.publish.monitor import DirSource, check_log
    from ledger.publish.writer import publish
    from ledger.verify import VerifyOptions, verify

    home = tmp / "ledger"
    home.mkdir()
    keys = init_keys(home / "keys", name="bench.example/log")
    data = payloads()
    build_s = build_journal(home / "journal.db", n, BUILD_BATCH, data, "publish journal")
    with Journal.open(home / "journal.db") as j:
        j.checkpoint(keys)
    verify_t, publish_t, incr_t, monitor_t = [], [], [], []
    files = 0
    for r in range(rounds):
        out = tmp / f"pub{r}"
        with Journal.open(home / "journal.db", readonly=True) as j:
            # raises (FindingsError) on any finding
            t, _ = _time(lambda: verify(j, keys.verifier, VerifyOptions(remember=False), keys_dir=home / "keys"))
        verify_t.append(t)
        log(f"round {r + 1}: verify {t:.2f} s")
        with Journal.open(home / "journal.db") as j:
            t, res = _time(lambda j=j, out=out: publish(j, out, keys))
        publish_t.append(t)
        files = len(res.written)
        log(f"round {r + 1}: publish {t:.2f} s ({files} files)")
        with Journal.open(home / "journal.db", harness=True) as j:
            j.append_many([(KIND, data[i % len(data)], RUN_ID, TASK_ID) for i in range(1000)])
            t, res = _time(lambda j=j, out=out: publish(j, out, keys))
        incr_t.append(t)
        log(f"round {r + 1}: incremental publish of 1,000 entries {t * 1000:.0f} ms ({len(res.written)} files)")
        t, rep = _time(lambda out=out: check_log(DirSource(out), keys.verifier, remember=False))
        assert rep.ok and rep.size == res.size, rep.findings
        monitor_t.append(t)
        log(f"round {r + 1}: monitor {t:.2f} s ({rep.entries} entries)")
        shutil.rmtree(out)
    v, p, i, m = (statistics.median(x) for x in (verify_t, publish_t, incr_t, monitor_t))
    figures = {"verify_s": v, "publish_s": p, "publish_ratio": p / v, "incremental_s": i,
               "monitor_s": m, "monitor_ratio": m / v}
    ok = {"publish_ratio": figures["publish_ratio"] <= TARGETS["publish_ratio"],
          "incremental_s": figures["incremental_s"] < TARGETS["incremental_s"],
          "monitor_ratio": figures["monitor_ratio"] <= TARGETS["monitor_ratio"]}
    return {"benchmark": "eval-ledger publish", "entries": n, "rounds": rounds, "build_s": build_s,
            "files_published": files, "figures": figures, "raw": {"verify_s": verify_t, "publish_s": publish_t,
                                                                  "incremental_s": incr_t, "monitor_s": monitor_t},
            "targets": TARGETS, "ok": ok,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "load_before": os.getloadavg()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="20,000 entries, one round")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tmp", help="where to build (default: a temporary directory)")
    args = ap.parse_args()
    n, rounds = (20_000, 1) if args.quick else (args.entries, args.rounds)
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        result = benchmark(n, rounds, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        f = result["figures"]
        print(f"{n:,} entries: verify {f['verify_s']:.2f} s; publish {f['publish_s']:.2f} s "
              f"({f['publish_ratio']:.2f}x); incremental 1,000 {f['incremental_s'] * 1000:.0f} ms; "
              f"monitor {f['monitor_s']:.2f} s ({f['monitor_ratio']:.2f}x)")


if __name__ == "__main__":
    main()
