"""CLI start-up benchmark: ``ledger --version`` and ``ledger log`` against ``python -c pass``.

    python benchmarks/cli.py                     # human summary (a few seconds)
    python benchmarks/cli.py --json              # the figures as one JSON object
    python benchmarks/cli.py --json --baseline-rev 12544c1   # also time that commit, same run

Each command runs in a fresh interpreter (``sys.executable``), ``--rounds`` times, in rotating
order; the median wall time of each is reported, and its ratio to ``python -c pass`` measured in
the same run (target: <= 3x). ``ledger log`` reads a small journal (one run of a few entries)
made up front in a temporary folder. ``cpu`` gives the same medians and ratios of the children's
CPU time (user + system), which other processes on a loaded machine move far less. With ``--baseline-rev`` both sides' commands run in the same
rounds, interleaved, and ``vs_baseline`` gives current / baseline of each median (load that
changes during the run hits both sides alike).

The code under test is imported from ``PYTHONPATH`` (this checkout, or with ``--baseline-rev`` a
``git worktree`` of that commit made in a temporary folder and removed at the end), so both
sides run with the same interpreter and installed dependencies. ``imports`` names, per command,
which of the heavy subsystems it imported (``ledger.run``, ``ledger.bench``, ``ledger.tasks``,
``evaluators``, ``attest``, ``ray``, ``rich``, ``multiprocessing``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("ledger.run", "ledger.bench", "ledger.tasks", "evaluators", "attest", "ray", "rich",
         "multiprocessing", "yaml")
# Runs the CLI the way the installed ``ledger`` script does, then lists heavy modules imported.
_RUN = f"HEAVY = {HEAVY!r}\n" + """
import sys, atexit
def _report():
    heavy = sorted({n for n in sys.modules for h in HEAVY if n == h or n.startswith(h + ".")})
    sys.stderr.write("\\nIMPORTED " + ",".join(heavy) + "\\n")
atexit.register(_report)
from cli.main import main
sys.argv[0] = "ledger"
main()
"""


def _env(code_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(code_root)
    env["PYTHONDONTWRITEBYTECODE"] = "0"
    return env


def _make_journal(code_root: Path, home: Path) -> None:
    """A ledger with one run of a few entries, written by the code under test."""
    script = (
        "import sys\n"
        "from ledger.journal.journal import Journal\n"
        f"j = Journal.open({str(home / 'journal.db')!r}, create=True)\n"
        "for i in range(20):\n"
        "    j.append('ext.note', {'i': i, 'text': 'x' * 40}, run='r-bench', task='t')\n"
        "j.close()\n"
    )
    subprocess.run([sys.executable, "-c", script], env=_env(code_root), check=True, cwd=home.parent)


def _commands(home: Path) -> dict[str, list[str]]:
    return {
        "python": [sys.executable, "-c", "pass"],
        "version": [sys.executable, "-c", _RUN, "--version"],
        "log": [sys.executable, "-c", _RUN, "--ledger", str(home), "log", "--json"],
    }


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child: user + system, imports line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2])} ... exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    imported = ""
    for line in proc.stderr.splitlines():
        if line.startswith("IMPORTED "):
            imported = line[len("IMPORTED "):]
    return elapsed, cpu, imported


def measure(sides: dict[str, Path], rounds: int, tmp: Path) -> dict[str, dict[str, Any]]:
    """Median start-up of each command for each side (``{label: code root}``), and ratios to
    python. Every round runs every side's commands, in an order rotating over all of them, so a
    baseline and the current code see the same load."""
    runs: list[tuple[str, str, list[str], dict[str, str]]] = []
    for label, code_root in sides.items():
        home = tmp / label / ".ledger"
        home.mkdir(parents=True, exist_ok=True)
        _make_journal(code_root, home)
        env = _env(code_root)
        runs += [(label, name, argv, env) for name, argv in _commands(home).items()]
    times: dict[tuple[str, str], list[float]] = {(label, name): [] for label, name, _a, _e in runs}
    cpus: dict[tuple[str, str], list[float]] = {(label, name): [] for label, name, _a, _e in runs}
    imports: dict[str, dict[str, list[str]]] = {label: {} for label in sides}
    for _label, _name, argv, env in runs:  # warm the file cache and the bytecode once
        _time(argv, env, tmp)
    for r in range(rounds):
        for label, name, argv, env in runs[r % len(runs):] + runs[:r % len(runs)]:
            elapsed, cpu, imported = _time(argv, env, tmp)
            times[(label, name)].append(elapsed)
            cpus[(label, name)].append(cpu)
            if name != "python":
                top = sorted({m.split(".")[0] if not m.startswith("ledger.") else ".".join(m.split(".")[:2])
                              for m in imported.split(",") if m})
                imports[label][name] = top
    out: dict[str, dict[str, Any]] = {}
    for label in sides:
        med = {name: statistics.median(v) for (side, name), v in times.items() if side == label}
        cpu_med = {name: statistics.median(v) for (side, name), v in cpus.items() if side == label}
        out[label] = {
            "python_s": round(med["python"], 4),
            "version_s": round(med["version"], 4),
            "log_s": round(med["log"], 4),
            "version_ratio": round(med["version"] / med["python"], 2),
            "log_ratio": round(med["log"] / med["python"], 2),
            "imports": imports[label],
            # CPU time (user + system) of the same runs: far less moved by other load than wall
            "cpu": {f"{name}_s": round(cpu_med[name], 4) for name in ("python", "version", "log")}
            | {f"{name}_ratio": round(cpu_med[name] / cpu_med["python"], 2) for name in ("version", "log")},
        }
    return out


def _worktree(rev: str, dest: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(dest), rev],
                   check=True, capture_output=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--rounds", type=int, default=15, help="timed runs of each command (median)")
    ap.add_argument("--baseline-rev", help="also measure this git revision (a temporary worktree)")
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"target_ratio": 3.0, "rounds": args.rounds,
                           "machine": {"python": platform.python_version(),
                                       "loadavg_start": list(os.getloadavg())}}
    with tempfile.TemporaryDirectory(prefix="ledger-cli-bench-") as tmp_s:
        tmp = Path(tmp_s)
        sides = {"current": ROOT}
        wt = tmp / "baseline-src"
        if args.baseline_rev:
            sides["baseline"] = _worktree(args.baseline_rev, wt)
        try:
            out.update(measure(sides, args.rounds, tmp))
        finally:
            if args.baseline_rev:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                               capture_output=True)
        if args.baseline_rev:
            out["baseline"]["rev"] = args.baseline_rev
            out["vs_baseline"] = {name: round(out["current"][f"{name}_s"] / out["baseline"][f"{name}_s"], 3)
                                  for name in ("python", "version", "log")}
    out["machine"]["loadavg_end"] = list(os.getloadavg())
    cur = out["current"]
    out["ok"] = cur["version_ratio"] <= 3.0 and cur["log_ratio"] <= 3.0
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    for label in ("baseline", "current"):
        if label in out:
            f = out[label]
            print(f"{label:9} python -c pass {f['python_s'] * 1000:6.1f} ms | "
                  f"ledger --version {f['version_s'] * 1000:6.1f} ms ({f['version_ratio']}x) | "
                  f"ledger log {f['log_s'] * 1000:6.1f} ms ({f['log_ratio']}x)")
            for name, mods in f["imports"].items():
                print(f"          {name}: imports {', '.join(mods) or 'none of the heavy parts'}")
    print(f"target <= 3x: {'ok' if out['ok'] else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
