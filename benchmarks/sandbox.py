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
* capture on syscall-heavy agents: two honest ``cmd:`` agents on a task whose repository holds
  20,000 more small files (``walk-read``: walks the worktree and reads every file, then fixes
  the bug; ``walk-read-pytest``: the same, then runs the repository's pytest three times), each
  run untraced (``--trace none``) and traced (``--trace strace``) in the default sandbox with each
  capture of ``--capture`` (``fanotify``: the opens from the kernel, the rest from strace,
  ``agent.started.capture`` ``fanotify+strace``; ``strace``: strace alone,
  ``LEDGER_CAPTURE_FANOTIFY=off``; default both), one attempt per run, each run in a process of
  its own (the capture is chosen by the environment its workers start with), the modes' order
  rotating over ``--heavy-rounds`` rounds. Reported per agent and capture: the agent's own wall
  time (``agent.finished.wall_s``) traced vs untraced (medians, ratio, per-round ratios; target
  <= 1.25) and the journal bytes of one attempt (every entry of the attempt; target <= 2x the
  untraced attempt's), with the capture filter the harness used (``agent.started.trace_filter``).
  ``--filter ptrace`` measures the fallback (``LEDGER_TRACE_SECCOMP=off``) instead.

* containers (``--containers``): the container backend's figures (``sandbox_containers.py``:
  agent + grading boxes per attempt against bubblewrap, target <= 1.0 s; the cached rebuild,
  target 0 builds and < 1 s); ``--only-containers`` measures them alone.

Without a working bubblewrap the sandboxed figures are skipped with the probe's reason.
"""

from __future__ import annotations

import argparse
import json
import os
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
from ledger.run.coordinator import execute_run  # noqa: E402
from ledger.run.plan import RunRequest  # noqa: E402
from ledger.sandbox import probe_bwrap  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent))
from bench_task import HEAVY_FILES, attempt_times, make_heavy_task, make_home  # noqa: E402

WALK = """import os, sys
n = 0
for root, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if d != ".git"]
    for name in files:
        with open(os.path.join(root, name), "rb") as fh:
            fh.read()
        n += 1
text = open("ops.py").read().replace("a + b", "a - b")
open("ops.py", "w").write(text)
print("read", n, "files")
"""
PYTEST = WALK + """import subprocess
for _ in range(3):
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                   check=True, capture_output=True)
print("pytest ran 3 times")
"""


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


CAPTURES = ("fanotify", "strace")


def _heavy_once(home: LedgerHome, spec: str, mode: str) -> dict[str, Any]:
    """One run of ``spec`` in a process of its own: ``mode`` none (untraced), fanotify or strace
    (traced, ``LEDGER_CAPTURE_FANOTIFY=off``)."""
    env = dict(os.environ)
    env.pop("LEDGER_CAPTURE_FANOTIFY", None)
    if mode == "strace":
        env["LEDGER_CAPTURE_FANOTIFY"] = "off"
    trace = "none" if mode == "none" else "strace"
    proc = subprocess.run([sys.executable, __file__, "--heavy-once", str(home.path), spec, trace],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"heavy run {mode} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def heavy_once(home_path: str, spec: str, trace: str) -> dict[str, Any]:
    """The child's side of ``_heavy_once``: one attempt, its row."""
    home = LedgerHome(Path(home_path))
    req = RunRequest(tiers=("heavy",), agents=(spec,), repeat=1, parallel=1, trace=trace,
                     sandbox="bwrap")
    summary = execute_run(home, req)
    row = _heavy_row(home, summary.run_id)
    res = summary.results[0]
    row["outcome"] = "passed" if res.hidden_passed else "failed"
    row["attestation"] = res.attestation or "-"
    return row


def heavy(home: LedgerHome, folder: Path, rounds: int,
          captures: tuple[str, ...] = CAPTURES) -> dict[str, Any]:
    """The syscall-heavy agents, untraced and traced with each capture, in rotating order:
    agent wall and journal bytes."""
    make_heavy_task(home)
    agents: dict[str, str] = {}
    for name, body in (("walk-read", WALK), ("walk-read-pytest", PYTEST)):
        path = folder / f"{name}.py"
        path.write_text(body)
        agents[name] = f"cmd:{sys.executable} {path}"
    modes = ("none", *captures)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(rounds):
        for name, spec in agents.items():
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                rows.setdefault((name, mode), []).append(_heavy_once(home, spec, mode))
    out: dict[str, Any] = {"files": HEAVY_FILES, "rounds": rounds}
    for name in agents:
        out[name] = {c: _heavy_figures(rows[(name, c)], rows[(name, "none")]) for c in captures}
    return out


def _heavy_figures(traced: list[dict[str, Any]], plain: list[dict[str, Any]]) -> dict[str, Any]:
    wall_t = statistics.median(x["agent_s"] for x in traced)
    wall_n = statistics.median(x["agent_s"] for x in plain)
    bytes_t = statistics.median(x["bytes"] for x in traced)
    bytes_n = statistics.median(x["bytes"] for x in plain)
    return {
        "capture": sorted({x["capture"] for x in traced}),
        "trace_filter": sorted({x["filter"] for x in traced}),
        "outcomes": sorted({f"{x['outcome']}/{x['attestation']}" for x in traced + plain}),
        "agent_s_median_traced": round(wall_t, 3),
        "agent_s_median_untraced": round(wall_n, 3),
        "agent_s_ratio": round(wall_t / wall_n, 3),
        "agent_s_ratio_per_round": [round(t["agent_s"] / u["agent_s"], 3)
                                    for t, u in zip(traced, plain, strict=True)],
        "agent_s_ratio_target": 1.25,
        "agent_s_ratio_ok": wall_t / wall_n <= 1.25,
        "journal_bytes_traced": round(bytes_t),
        "journal_bytes_untraced": round(bytes_n),
        "journal_bytes_ratio": round(bytes_t / bytes_n, 3),
        "journal_bytes_ratio_target": 2.0,
        "journal_bytes_ratio_ok": bytes_t / bytes_n <= 2.0,
        "entries_traced": statistics.median(x["entries"] for x in traced),
        "entries_untraced": statistics.median(x["entries"] for x in plain),
    }


def _heavy_row(home: LedgerHome, run_id: str) -> dict[str, Any]:
    items, per = attempt_times(home, run_id, require_completed=True)
    (aid, p), = per.items()
    mine = [e for e in items if e.data.get("attempt") == aid]
    started = next(e.data for e in mine if e.kind == "agent.started")
    return {"agent_s": p["agent"], "bytes": sum(len(e.raw) for e in mine), "entries": len(mine),
            "filter": started.get("trace_filter") or "-", "capture": started.get("capture") or "-"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--attempts", type=int, default=12, help="noop attempts per mode")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per mode")
    parser.add_argument("--sleepers", type=int, default=8, help="sleep-1s attempts per run")
    parser.add_argument("--heavy-rounds", type=int, default=3,
                        help="interleaved rounds of the syscall-heavy agents (0: skip them)")
    parser.add_argument("--filter", choices=("auto", "ptrace"), default="auto",
                        help="ptrace: measure the capture without --seccomp-bpf")
    parser.add_argument("--capture", choices=("both", *CAPTURES), default="both",
                        help="the traced captures of the syscall-heavy agents: fanotify "
                             "(fanotify+strace), strace (strace alone), or both")
    parser.add_argument("--heavy-once", nargs=3, metavar=("HOME", "AGENT", "TRACE"),
                        help=argparse.SUPPRESS)  # one heavy run, in its own process
    parser.add_argument("--only-heavy", action="store_true", help="only the syscall-heavy agents")
    parser.add_argument("--containers", action="store_true", help="the container backend's figures too")
    parser.add_argument("--only-containers", action="store_true", help="only the container backend's figures")
    parser.add_argument("--pairs", type=int, default=10, help="container vs bwrap attempt pairs")
    args = parser.parse_args()
    if args.heavy_once:
        print(json.dumps(heavy_once(*args.heavy_once)))
        return
    if args.filter == "ptrace":
        import os

        os.environ["LEDGER_TRACE_SECCOMP"] = "off"  # before any worker starts
    ok, reason, version = probe_bwrap()
    result: dict[str, Any] = {"benchmark": "sandbox", "bwrap": version}
    if not ok:
        result["skipped"] = reason
        _print(result, args.json)
        return
    if args.containers or args.only_containers:
        from sandbox_containers import measure

        result["containers"] = measure(args.pairs)
        if args.only_containers:
            _print(result, args.json)
            return
    rows: dict[str, list[dict[str, float]]] = {"none": [], "bwrap": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-sandbox-") as tmp:
        home = make_home(Path(tmp))
        if args.heavy_rounds > 0:
            captures = CAPTURES if args.capture == "both" else (args.capture,)
            result["heavy"] = heavy(home, Path(tmp), args.heavy_rounds, captures)
        if args.only_heavy:
            _print(result, args.json)
            return
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
