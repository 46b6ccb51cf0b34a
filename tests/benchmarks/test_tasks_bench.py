"""The task mining benchmark script: a small run prints every figure, mining and grading both measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks.py"


def test_tasks_benchmark_prints_its_figures() -> None:
    """12 commits, 2 repeats: one task accepted, rates and the grading overhead present and sane."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--json", "--commits", "12", "--repeats", "2"],
                         capture_output=True, text=True, timeout=600, check=True)
    figures = json.loads(out.stdout)
    mining, grading = figures["mining"], figures["grading"]
    assert mining["examined"] == 12 and mining["accepted"] == 1
    assert mining["rate"] > 0 and mining["baseline_rate"] > 0 and mining["ratio"] > 0
    assert 0 < mining["seconds_mining"] < mining["seconds_total"]
    assert grading["bare_test_run_ms_min"] > 0 and grading["grading_ms_min"] > 0
    assert grading["target_ms"] == 200.0 and figures["targets_met"] == {"grading": grading["ok"]}
