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
