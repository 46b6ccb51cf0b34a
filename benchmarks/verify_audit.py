"""Plain ``ledger verify`` (journal + every attestation + every recorded view) against the
journal-only verify of the same file, each as a whole process.

    python benchmarks/verify_audit.py [--json] [--attempts 1000] [--rounds 3]

Builds a journal of N smoke-sized attempts (22 entries each, as a ``--trace none`` smoke attempt
writes: started, commitment, baseline, agent start, tool calls and results, output, finish, a
signal, two test results, a diff, attempt.finished) with a real signed attestation per attempt
(``ledger.run.attestor.Attestor``, the coordinator's own step, against a packaged smoke task's
commitment), then run.finished and the recorded view. Then it times, as child processes, best
of ``--rounds`` (CPU time of the child, user + sys, for the ratio; wall time is reported too):

- baseline: ``Journal.verify()`` of the file (what verify did before issue 15);
- plain ``ledger verify`` of the same file.

The target (issue 15) is ratio <= 2.0. ``benchmarks/journal.py --json`` includes these figures
under ``verify_audit``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attest.attestation import COMMITMENT_KEY_LABEL  # noqa: E402
from evaluators.views import recorded_view_data  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402
from ledger.journal.keys import init_keys  # noqa: E402
from ledger.run.attestor import Attestor  # noqa: E402
from ledger.tasks.loader import load_tasks  # noqa: E402
from ledger.tasks.material import commitment_for_task  # noqa: E402

TARGET_RATIO = 2.0
RUN = "r-20261201T000000Z-bench1"


def _attempt_items(aid: str, task_id: str, commitment: dict[str, Any], i: int) -> list[tuple[Any, ...]]:
    a = {"attempt": aid}
    ok = i % 3 != 0
    suite = {"command": ["pytest"], "exit_code": 0 if ok else 1, "passed": ok, "duration_s": 0.4,
             "counts": {"passed": 2 if ok else 1, "failed": 0 if ok else 1, "error": 0, "skipped": 0},
             "tests": [{"id": "tests/test_x.py::t1", "outcome": "passed", "message": ""},
                       {"id": "tests/test_x.py::t2", "outcome": "passed" if ok else "failed",
                        "message": "" if ok else "AssertionError: expected 3"}]}
    items: list[tuple[Any, ...]] = [
        ("commitment", {**a, "commitment": commitment}),
        ("test.baseline", {**a, "suite": "regression", **suite}),
        ("agent.started", {**a, "argv": ["agent"], "cwd": "/tmp/wt", "home": "/tmp/h", "scratch": "/tmp/s",
                           "readable": [], "endpoints": [], "trace": "none", "trace_reason": "off"}),
    ]
    for k in range(5):
        items.append(("tool.call", {**a, "tool": "bash", "input": {"command": f"sed -n 1,40p src/m{k}.py"}}))
        items.append(("tool.result", {**a, "tool": "bash", "output": f"def f{k}(x):\n    return x + {k}\n" * 8,
                                      "is_error": False}))
    items += [
        ("agent.output", {**a, "stream": "stdout", "text": "done\n" * 20, "total_bytes": 100, "truncated": False}),
        ("agent.output", {**a, "stream": "stderr", "text": "", "total_bytes": 0, "truncated": False}),
        ("agent.finished", {**a, "exit_code": 0, "signal": None, "wall_s": 3.5, "timed_out": False,
                            "crashed": False, "tokens_in": 1000, "tokens_out": 200, "cost_usd": 0.01,
                            "cost_source": "reported", "orphans": 0, "telemetry": True}),
        ("signal.result", {**a, "index": 0, "signal": {"kind": "command"}, "passed": ok, "detail": ""}),
        ("test.result", {**a, "suite": "hidden", **suite}),
        ("test.result", {**a, "suite": "regression", **suite}),
        ("diff", {**a, "files": [{"path": "src/m.py", "status": "modified", "added": 1, "removed": 1}],
                  "patch": "--- a/src/m.py\n+++ b/src/m.py\n-x\n+y\n", "truncated": False,
                  "conflict_markers": False, "apply_failed": False}),
        ("attempt.finished", {**a, "status": "completed", "error": None}),
    ]
    return [(kind, data, RUN, task_id) for kind, data in items]


def build(home: Path, attempts: int) -> int:
    keys = init_keys(home / "keys", name="eval-ledger/bench-verify")
    task = next(t for t in load_tasks(None, None) if t.tier == "smoke")
    commitment = commitment_for_task(task, key=keys.subkey(COMMITMENT_KEY_LABEL))
    cdata = commitment.as_data()
    with Journal.open(home / "journal.db", create=True, harness=True, synchronous="NORMAL") as j:
        attestor = Attestor(j, keys)
        j.append("run.started", {"harness_version": "bench", "config": {"kind": "golden"},
                                 "tasks": [], "agents": []}, run=RUN)
        for i in range(attempts):
            aid = f"{RUN}/{task.id}/demo/{i + 1}/1"
            started = j.append("attempt.started", {"attempt": aid, "agent": "demo", "agent_spec": "demo",
                                                   "repeat": i + 1, "try": 1, "tier": "smoke",
                                                   "node": "bench", "archive": None}, run=RUN, task=task.id)
            written = j.append_many(_attempt_items(aid, task.id, cdata, i))
            mine = [started, *written]
            data = attestor.attest(RUN, aid, task.id, task, mine, written={e.seq for e in mine})
            assert data is not None
            j.append("attestation", data, run=RUN, task=task.id)
        j.append("run.finished", {"status": "finished", "attempts": attempts, "completed": attempts}, run=RUN)
        j.append("view.recorded", recorded_view_data(j.entries(run=RUN), RUN), run=RUN)
        j.checkpoint(keys)
        return j.size


BASELINE = ("import sys; from pathlib import Path; from ledger.journal.journal import Journal; "
            "from ledger.journal.keys import load_verifier; h = Path(sys.argv[1]); "
            "j = Journal.open(h / 'journal.db', readonly=True); "
            "print(j.verify(verifier=load_verifier(h / 'keys'))['size'])")


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {res.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def measure(attempts: int, rounds: int, tmp: Path) -> dict[str, Any]:
    home = tmp / "ledger"
    t0 = time.perf_counter()
    size = build(home, attempts)
    build_s = time.perf_counter() - t0
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config")}
    base_cmd = [sys.executable, "-c", BASELINE, str(home)]
    plain_cmd = [sys.executable, "-c", "from cli.main import main; main()", "--ledger", str(home), "verify", "--no-remember"]
    base, plain = [], []
    for _ in range(rounds):  # interleaved, so both see the same machine load
        base.append(_time(base_cmd, env))
        plain.append(_time(plain_cmd, env))
    bw, pw = min(w for w, _ in base), min(w for w, _ in plain)
    bc, pc = min(c for _, c in base), min(c for _, c in plain)
    # the ratio is taken on CPU time (user + sys of the child): on a shared machine wall time
    # swings with other load; both are reported
    return {"attempts": attempts, "entries": size, "build_s": round(build_s, 2),
            "journal_only_s": round(bw, 3), "plain_verify_s": round(pw, 3),
            "journal_only_cpu_s": round(bc, 3), "plain_verify_cpu_s": round(pc, 3),
            "wall_ratio": round(pw / bw, 2), "ratio": round(pc / bc, 2),
            "target_ratio": TARGET_RATIO, "ok": pc / bc <= TARGET_RATIO}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--attempts", type=int, default=1000, help="smoke-sized attempts in the journal")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (best is reported)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledger-verify-bench-") as tmp:
        r = measure(args.attempts, args.rounds, Path(tmp))
    if args.json:
        print(json.dumps(r, indent=2, sort_keys=True))
    else:
        print(f"{'ok' if r['ok'] else 'MISS'} plain verify of {r['attempts']} attempts ({r['entries']} entries): "
              f"{r['plain_verify_cpu_s']}s CPU vs journal-only {r['journal_only_cpu_s']}s = {r['ratio']}x "
              f"(target <= {r['target_ratio']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
