"""CLI start-up benchmark: ``ledger --version`` and ``ledger log`` against ``python -c pass``.

    python benchmarks/cli.py                     # human summary (a few seconds)
    python benchmarks/cli.py --json              # the figures as one JSON object
    python benchmarks/cli.py --json --baseline-rev 12544c1   # also time that commit, same run

Each command runs in a fresh interpreter (``sys.executable``), ``--rounds`` times, in rotating
order; the median wall time of each is reported, and its ratio to ``python -c pass`` measured in
the same run (target: <= 3x). ``ledger log`` reads a small journal (one run of a few entries)
made up front in a temporary folder.

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


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2])} ... exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    imported = ""
    for line in proc.stderr.splitlines():
        if line.startswith("IMPORTED "):
            imported = line[len("IMPORTED "):]
    return elapsed, imported


def measure(code_root: Path, rounds: int, tmp: Path) -> dict[str, Any]:
    """Median start-up of each command with the code at ``code_root``, and ratios to python."""
    home = tmp / ".ledger"
    home.mkdir(parents=True, exist_ok=True)
    _make_journal(code_root, home)
    env = _env(code_root)
    cmds = _commands(home)
    names = list(cmds)
    times: dict[str, list[float]] = {n: [] for n in names}
    imports: dict[str, list[str]] = {}
    for name in names:  # warm the file cache and the bytecode once
        _time(cmds[name], env, tmp)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            elapsed, imported = _time(cmds[name], env, tmp)
            times[name].append(elapsed)
            if name != "python":
                top = sorted({m.split(".")[0] if not m.startswith("ledger.") else ".".join(m.split(".")[:2])
                              for m in imported.split(",") if m})
                imports[name] = top
    med = {n: statistics.median(v) for n, v in times.items()}
    return {
        "python_s": round(med["python"], 4),
        "version_s": round(med["version"], 4),
        "log_s": round(med["log"], 4),
        "version_ratio": round(med["version"] / med["python"], 2),
        "log_ratio": round(med["log"] / med["python"], 2),
        "imports": imports,
    }


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
        out["current"] = measure(ROOT, args.rounds, tmp / "current")
        if args.baseline_rev:
            wt = tmp / "baseline-src"
            _worktree(args.baseline_rev, wt)
            try:
                out["baseline"] = {"rev": args.baseline_rev,
                                   **measure(wt, args.rounds, tmp / "baseline")}
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                               capture_output=True)
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
