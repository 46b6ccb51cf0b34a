"""The journal benchmark script: a quick run prints every figure, as positive numbers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "journal.py"

SECTIONS = {
    "settings": {"journal_mode", "synchronous", "payload_bytes", "batch", "rounds"},
    "append_batched": {"entries", "per_transaction", "journal_rate", "raw_rate", "ratio",
                       "target_ratio", "ok"},
    "append_single": {"entries", "per_transaction", "journal_rate", "raw_rate", "ratio",
                      "target_ratio", "ok"},
    "eventsourcing": {"available", "reason", "version", "recorder", "batched_rate", "single_rate",
                      "ratio_batched", "ratio_single", "target_ratio", "ok"},
    "verify": {"entries", "seconds", "rate", "raw_sha256_rate", "ratio_to_raw_sha256",
               "target_rate", "ok"},
    "proofs": {"tree_size", "samples", "inclusion_ms", "consistency_ms", "target_median_ms", "ok"},
    "disk": {"entries", "db_bytes", "entry_bytes", "overhead_per_entry",
             "overhead_one_entry_per_transaction", "target_bytes_per_entry", "ok"},
    "targets_met": {"append_batched", "append_single", "eventsourcing", "verify", "proofs", "disk"},
}


def positive(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Run `benchmarks/journal.py --quick --json --out FILE` once for the module's tests."""
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "figures.json"
    scratch = tmp / "scratch"
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", "--out", str(out),
         "--tmpdir", str(scratch)],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), json.loads(out.read_text(encoding="utf-8")), scratch


def test_quick_run_has_every_key(quick: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    """Every section and every field the issue asks for is in the JSON."""
    figures = quick[0]
    for section, keys in SECTIONS.items():
        assert section in figures, section
        assert keys <= set(figures[section]), (section, keys - set(figures[section]))
    assert figures["quick"] is True
    assert figures["settings"]["journal_mode"] == "wal"
    assert figures["settings"]["synchronous"] == "FULL"
    assert figures["settings"]["payload_bytes"] == 200


def test_rates_and_ratios_are_positive(quick: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    """Rates, ratios and latencies are positive finite numbers, and the ratio is rate over rate."""
    figures = quick[0]
    for name in ("append_batched", "append_single"):
        fig = figures[name]
        for key in ("journal_rate", "raw_rate", "ratio"):
            assert positive(fig[key]), (name, key, fig[key])
        assert fig["ratio"] == pytest.approx(fig["journal_rate"] / fig["raw_rate"], rel=0.01)
        assert isinstance(fig["ok"], bool)
    assert figures["append_batched"]["per_transaction"] == 1000
    assert figures["append_single"]["per_transaction"] == 1
    for key in ("rate", "raw_sha256_rate", "ratio_to_raw_sha256", "seconds"):
        assert positive(figures["verify"][key]), key
    for kind in ("inclusion_ms", "consistency_ms"):
        lat = figures["proofs"][kind]
        assert positive(lat["median"]) and positive(lat["p95"])
        assert lat["median"] <= lat["p95"]


def test_eventsourcing_figures_or_a_reason(quick: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    """The eventsourcing comparison is either measured (positive) or null with a reason."""
    es = quick[0]["eventsourcing"]
    if es["available"]:
        for key in ("batched_rate", "single_rate", "ratio_batched", "ratio_single"):
            assert positive(es[key]), (key, es[key])
        assert es["reason"] is None
    else:
        assert es["batched_rate"] is None and es["ratio_single"] is None
        assert isinstance(es["reason"], str) and es["reason"]


def test_disk_overhead_is_consistent(quick: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    """Disk overhead is (file size - entry bytes) / entries, with entries larger than the payload."""
    disk = quick[0]["disk"]
    assert disk["db_bytes"] > disk["entry_bytes"] > 200 * disk["entries"]
    assert disk["overhead_per_entry"] == pytest.approx(
        (disk["db_bytes"] - disk["entry_bytes"]) / disk["entries"], abs=0.1)


def test_out_file_matches_stdout_and_temp_is_cleaned(
        quick: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    """--out writes the same figures as stdout, and the temporary databases are removed."""
    printed, written, scratch = quick
    assert printed == written
    assert list(scratch.iterdir()) == []


def test_bad_size_is_refused() -> None:
    """A nonsense size is a usage error (exit 2), not a crash."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--proof-n", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--proof-n" in proc.stderr
