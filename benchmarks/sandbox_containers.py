"""The container backend's figures for ``benchmarks/sandbox.py`` (``--containers``, or alone:
``python benchmarks/sandbox_containers.py [--json] [--pairs 10]``).

* added per attempt: one agent box and one grading box, each running ``/bin/true`` over an
  attempt's folders (what the harness adds around an agent and its grading: box set-up, the
  container's start and removal, the folders handed over and back), with the ``podman`` backend
  and with ``bwrap``, alternating pair by pair so load hits both alike. Reported: both medians and
  their difference (target <= 1.0 s). Measured at the level of the boxes: ``ledger run`` does not
  use the container backend yet.
* cached rebuild: ``ensure_image`` of a Harbor-style Dockerfile and context that was built before
  (target: 0 builds, < 1 s).
* through ``ledger run`` (``--through-run ROUNDS``): the bench task, agent ``noop``, ``--repeat
  3``, under ``--sandbox podman`` and ``--sandbox bwrap`` alternating round by round, each run a
  fresh ``ledger`` process of this checkout (``python -c`` in its folder, so a second checkout
  measures its own code): the run's wall and each attempt's (attempt.started to
  attempt.finished), medians per backend and their differences. These include every grading
  command's container (hidden tests, signals, regression: one fresh container each), the
  engine probe and any pre-flight, which the box-level figure above leaves out.

Without an engine that runs containers the figures are skipped with the probe's reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ledger.sandbox import registry  # noqa: E402
from ledger.sandbox.container import engine, images  # noqa: E402
from ledger.sandbox.port import AgentRequest, GradingRequest  # noqa: E402

PATH = "/usr/local/bin:/usr/bin:/bin"


def _attempt(backend: Any, tmp: Path) -> float:
    """Seconds for an agent box and a grading box, each running /bin/true once (made to closed)."""
    f = {n: tmp / n for n in ("wt", "home", "scratch")}
    for p in f.values():
        p.mkdir(parents=True)
    start = time.perf_counter()
    for box in (backend.agent_box(AgentRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                               argv=("/bin/true",), path_env=PATH)),
                backend.grading_box(GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                                   path_env=PATH))):
        try:
            cmd = box.command(["/bin/true"], {"PATH": PATH, "HOME": str(f["home"])})
            proc = subprocess.run(cmd.argv, env=cmd.env, pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec,
                                  capture_output=True, timeout=120, cwd=f["wt"])
            box.started()
            if proc.returncode != 0 or box.failure(proc.returncode, proc.stderr.decode()):
                raise RuntimeError(f"{box.backend}: /bin/true failed: {proc.stderr.decode()[-300:]}")
        finally:
            box.close()
    return time.perf_counter() - start


def added(pairs: int) -> dict[str, Any]:
    podman, bwrap = registry.get("podman"), registry.get("bwrap")
    times: dict[str, list[float]] = {"podman": [], "bwrap": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-containers-") as tmp:
        _attempt(podman, Path(tmp) / "warm")  # the engine's first start outside the figures
        for i in range(pairs):
            for name, backend in (("podman", podman), ("bwrap", bwrap)):
                times[name].append(_attempt(backend, Path(tmp) / f"{name}-{i}"))
    med = {k: statistics.median(v) for k, v in times.items()}
    diff = med["podman"] - med["bwrap"]
    return {"pairs": pairs, "agent_plus_grading_s_median_podman": round(med["podman"], 3),
            "agent_plus_grading_s_median_bwrap": round(med["bwrap"], 3), "added_s_median": round(diff, 3),
            "ratio_podman_vs_bwrap": round(med["podman"] / med["bwrap"], 2), "added_target_s": 1.0,
            "added_ok": diff <= 1.0}


def cached_rebuild(podman: engine.Engine) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\nCOPY wordcount.py /app/\n")
        (ctx / "wordcount.py").write_text("def count_words(text):\n    return len(text.split(' '))\n")
        request = images.ImageRequest(dockerfile=ctx / "Dockerfile", context=ctx)
        first = images.ensure_image(podman, request)
        start = time.perf_counter()
        second = images.ensure_image(podman, request)
        took = time.perf_counter() - start
    return {"first_cached": first.cached, "first_s": round(first.seconds, 2), "rebuild_builds": int(not second.cached),
            "rebuild_s": round(took, 3), "rebuild_target_s": 1.0, "rebuild_ok": second.cached and took < 1.0}


_LEDGER = "import sys; sys.argv[0] = 'ledger'; from cli.main import main; main()"


def _cli_run(home: Path, sandbox: str, repeat: int) -> tuple[float, list[float]]:
    """(the run's wall s, each attempt's wall s) of one ``ledger run`` in a fresh process."""
    from bench_task import attempt_times

    from ledger.home import LedgerHome

    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _LEDGER, "--ledger", str(home), "run", "--tier", "bench",
                           "--agent", "noop", "--repeat", str(repeat), "--trace", "none", "--sandbox", sandbox,
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ledger run --sandbox {sandbox}: exit {proc.returncode}: {proc.stderr[-400:]}")
    _items, per = attempt_times(LedgerHome(home), json.loads(proc.stdout)["run"], require_completed=True)
    return wall, [p["end"] - p["start"] for p in per.values()]


def through_run(rounds: int, repeat: int = 3) -> dict[str, Any]:
    from bench_task import make_home

    runs: dict[str, list[float]] = {"podman": [], "bwrap": []}
    attempts: dict[str, list[float]] = {"podman": [], "bwrap": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-run-") as tmp:
        home = make_home(Path(tmp)).path
        _cli_run(home, "podman", 1)  # warm: the engine's and the interpreter's first start
        for _ in range(rounds):
            for name in ("podman", "bwrap"):
                wall, each = _cli_run(home, name, repeat)
                runs[name].append(wall)
                attempts[name].extend(each)
    med_run = {k: statistics.median(v) for k, v in runs.items()}
    med_att = {k: statistics.median(v) for k, v in attempts.items()}
    return {"rounds": rounds, "repeat": repeat, "code": str(ROOT),
            "run_wall_s_median": {k: round(v, 3) for k, v in med_run.items()},
            "attempt_wall_s_median": {k: round(v, 3) for k, v in med_att.items()},
            "added_per_attempt_s_median": round(med_att["podman"] - med_att["bwrap"], 3),
            "added_per_run_s_median": round(med_run["podman"] - med_run["bwrap"], 3),
            "ratio_attempt_podman_vs_bwrap": round(med_att["podman"] / med_att["bwrap"], 2)}


def measure(pairs: int, rounds: int = 0) -> dict[str, Any]:
    found = engine.probe()
    if not found.runs:
        return {"skipped": found.reason}
    podman = engine.find_engine(found.engine)
    assert podman is not None
    out = {"engine": found.engine, "version": found.version, "added_per_attempt": added(pairs),
           "cached_rebuild": cached_rebuild(podman)}
    if rounds:
        out["through_run"] = through_run(rounds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--through-run", type=int, default=0, metavar="ROUNDS",
                        help="also time ledger run (podman vs bwrap), this many rounds")
    parser.add_argument("--only-run", action="store_true", help="only the ledger run figures")
    args = parser.parse_args()
    if args.only_run:
        found = engine.probe()
        result = {"benchmark": "sandbox-containers", **({"through_run": through_run(args.through_run or 3)}
                                                         if found.runs else {"skipped": found.reason})}
    else:
        result = {"benchmark": "sandbox-containers", **measure(args.pairs, args.through_run)}
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
