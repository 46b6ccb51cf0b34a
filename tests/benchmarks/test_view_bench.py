"""The report benchmark script: a quick run prints every figure, as positive numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "view.py"


def test_quick_view_benchmark_prints_every_figure() -> None:
    """--quick --json: generation time, its baseline, size, detail share and the browser section."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json"], capture_output=True,
                         text=True, timeout=300, check=True)
    d = json.loads(out.stdout)
    assert d["attempts"] == 100 and d["entries"] > 1000
    for key in ("generate_s", "report_json_s", "ratio", "size_bytes", "detail_bytes"):
        assert d[key] > 0, key
    assert d["detail_bytes"] < d["size_bytes"]
    browser = d["browser"]
    assert "skipped" in browser or (browser["first_render_s"] > 0 and browser["console_errors"] == 0)
