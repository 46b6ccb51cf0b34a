"""benchmarks/publish.py: a quick round prints every figure, each ratio its times' quotient."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "publish.py"


def test_quick_round_prints_figures_and_ratios(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", "--tmp", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    f = out["figures"]
    assert out["entries"] == 20_000 and out["files_published"] > 150
    for key in ("verify_s", "publish_s", "incremental_s", "monitor_s"):
        assert isinstance(f[key], float) and f[key] > 0, key
    assert abs(f["publish_ratio"] - f["publish_s"] / f["verify_s"]) < 1e-9
    assert abs(f["monitor_ratio"] - f["monitor_s"] / f["verify_s"]) < 1e-9
    assert set(out["ok"]) == {"publish_ratio", "incremental_s", "monitor_ratio"}
