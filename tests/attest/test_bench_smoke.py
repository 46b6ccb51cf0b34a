"""The attestation benchmark script: a quick run prints every figure, as positive numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attest.py"


def test_quick_run_reports_every_figure() -> None:
    """--quick --json prints throughput, sizes and verify times, all positive, and the targets."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json"], capture_output=True,
                          text=True, timeout=120, check=True)
    out = json.loads(proc.stdout)
    for key in ("raw_hmac_entries_per_s", "scan_entries_per_s", "scan_ratio_to_raw_hmac",
                "scan_no_prefilter_entries_per_s", "redact_texts_per_s",
                "attestation_bytes_msgpack", "attestation_bytes_dsse",
                "dirty_attestation_bytes_msgpack", "verify_public_key_ms", "verify_journal_ms",
                "verify_secret_key_ms"):
        assert out[key] > 0, key
    assert out["entries"] == 1000
    assert out["dirty_matches"] > 0
    assert set(out["ok"]) == set(out["targets"]) == {"scan_entries_per_s", "attestation_bytes"}
