"""``ledger export --format sqlite`` speed: the analysis database of a 10,000-attempt run against a
bare decode of its entries (issue 23, "Speed": export of 10,000 attempts < 10 s).

    python benchmarks/export_sqlite.py --json           # 10,000 attempts (the replay benchmark's run)
    python benchmarks/export_sqlite.py --quick --json   # 200 attempts

The run is benchmarks/replay.py's synthetic run (about 50 entries per attempt), in a ledger home
with keys and a signed checkpoint over it, as a finished ``ledger run`` leaves it. Measured in
one process: ``decode_s`` (iterate the run's entries, the baseline), ``export_s`` (the
``ledger export RUN --format sqlite -o FILE --json`` command itself, run in process through
click: the verified read of the run against the signed checkpoint, the fold, both views, every
table, the full-text index), ``ratio`` = export_s / decode_s; the same in CPU seconds of this
process (``*_cpu_s``, ``ratio_cpu``: steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replay import RUN_ID, build  # noqa: E402
from cli.main import cli  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402
from ledger.journal.keys import init_keys  # noqa: E402


def _export_cli(home: Path, out: Path) -> dict[str, object]:
    """Run ``ledger --ledger HOME export RUN --format sqlite -o OUT --json`` in this process."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            cli.main(["--ledger", str(home), "export", RUN_ID, "--format", "sqlite",
                      "-o", str(out), "--json"], prog_name="ledger", standalone_mode=False)
        except SystemExit as exc:  # a LedgerError: the group exits with its code
            raise RuntimeError(f"ledger export exited {exc.code}") from exc
    return json.loads(buf.getvalue())  # type: ignore[no-any-return]


def measure(attempts: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ledger-export-bench-") as tmp:
        home = Path(tmp) / ".ledger"
        home.mkdir()
        db = home / "journal.db"
        size, build_s = build(db, attempts)
        keys = init_keys(home / "keys", name="bench.example")
        with Journal.open(db, harness=True) as j:
            j.checkpoint(keys)  # what `ledger run` signs at its end: the export checks it
        with Journal.open(db, readonly=True) as j:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in j.entries(run=RUN_ID, check_canonical=False):
                pass
            decode_s, decode_cpu = time.perf_counter() - t0, time.process_time() - c0
        out = Path(tmp) / "results.db"
        t0, c0 = time.perf_counter(), time.process_time()
        info = _export_cli(home, out)
        export_s, export_cpu = time.perf_counter() - t0, time.process_time() - c0
        db_bytes = out.stat().st_size
    return {"benchmark": "export_sqlite", "attempts": attempts, "entries": size,
            "command": "ledger export RUN --format sqlite -o FILE --json (in process)",
            "build_s": round(build_s, 3), "decode_s": round(decode_s, 3),
            "export_s": round(export_s, 3), "ratio": round(export_s / decode_s, 3),
            "decode_cpu_s": round(decode_cpu, 3), "export_cpu_s": round(export_cpu, 3),
            "ratio_cpu": round(export_cpu / decode_cpu, 3),
            "rows": info["rows"], "db_bytes": db_bytes, "export_target_s": 10.0,
            "meets_target": export_s < 10.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--attempts", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="200 attempts")
    args = ap.parse_args(argv)
    out = measure(200 if args.quick else args.attempts)
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print(f"{out['attempts']} attempts: export {out['export_s']} s (target < 10 s), "
              f"decode {out['decode_s']} s")
    return 0 if out["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
