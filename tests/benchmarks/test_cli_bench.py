"""The CLI start-up benchmark script: one round prints every figure, and no heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cli.py"


def test_one_round_prints_positive_figures_and_ratios() -> None:
    """`benchmarks/cli.py --json --rounds 1`: times, ratios to python -c pass, imports per command."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", "--rounds", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    cur = out["current"]
    for key in ("python_s", "version_s", "log_s", "version_ratio", "log_ratio"):
        assert isinstance(cur[key], float) and cur[key] > 0, key
    assert abs(cur["version_ratio"] - cur["version_s"] / cur["python_s"]) < 0.05 * cur["version_ratio"] + 0.02
    assert cur["imports"] == {"version": [], "log": []}
    assert out["target_ratio"] == 3.0 and isinstance(out["ok"], bool)


def test_a_baseline_runs_in_the_same_rounds_and_is_compared() -> None:
    """`--baseline-rev HEAD`: both sides measured, `vs_baseline` is current / baseline per command."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", "--rounds", "1", "--baseline-rev", "HEAD"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    cur, base = out["current"], out["baseline"]
    assert base["rev"] == "HEAD" and base["imports"] == {"version": [], "log": []}
    for name in ("python", "version", "log"):
        assert out["vs_baseline"][name] == round(cur[f"{name}_s"] / base[f"{name}_s"], 3)


def test_cpu_time_is_reported_beside_wall_time() -> None:
    """`cpu`: the children's CPU medians and their ratios to python -c pass."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", "--rounds", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cpu = json.loads(proc.stdout)["current"]["cpu"]
    assert all(cpu[f"{n}_s"] > 0 for n in ("python", "version", "log"))
    assert cpu["log_ratio"] == round(cpu["log_s"] / cpu["python_s"], 2) and cpu["log_ratio"] > 1
