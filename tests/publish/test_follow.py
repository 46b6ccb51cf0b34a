"""ledger monitor --follow: a check that starts from the previous one reads only what the log
added, replays only the runs that grew, and still catches a rollback or a rewrite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger.errors import VerificationError
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.publish.monitor import DirSource, check_log
from ledger.publish.writer import publish
from tests.publish.conftest import RUN_A, RUN_B, add_filler, add_run, invoke


class Counting(DirSource):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.read: list[str] = []

    def get(self, rel: str) -> bytes | None:
        self.read.append(rel)
        return super().get(rel)


def test_a_follow_check_reads_only_what_the_log_added(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    out = tmp_path / "pub"
    add_filler(ledger, 1000)
    with Journal.open(ledger) as j:
        publish(j, out, keys)
        old_size = j.size
    src = Counting(out)
    first = check_log(src, keys.verifier, remember=False)
    assert first.ok and len(first.replayed) == 2
    full_reads = len(src.read)
    run_c = "r-20261201T120000Z-cccccc"
    add_run(ledger, run_c, {"t1": True})
    add_filler(ledger, 300)
    with Journal.open(ledger) as j:
        publish(j, out, keys)
        size = j.size
    src.read.clear()
    later = check_log(src, keys.verifier, remember=False, prior=first.verified)
    assert later.ok and later.size == size and later.previous_size == old_size
    assert [r["run"] for r in later.new_runs] == [run_c]
    assert [r["run"] for r in later.replayed] == [run_c]  # runs A and B did not grow
    assert "tile/0/000" not in src.read and "tile/entries/000" not in src.read
    assert f"tile/entries/{old_size >> 8:03d}" in src.read and len(src.read) < full_reads
    # what the follower holds is what a full check computes
    full = check_log(DirSource(out), keys.verifier, remember=False)
    assert (full.size, full.root, full.entries) == (later.size, later.root, later.entries)
    assert full.verified is not None and later.verified is not None
    assert full.verified.leaves == later.verified.leaves and full.verified.entries == later.verified.entries


def test_a_follow_check_catches_a_rollback_and_a_rewrite(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    with Journal.open(ledger) as j:
        publish(j, tmp_path / "old", keys)
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    add_filler(ledger, 40)
    with Journal.open(ledger) as j:
        publish(j, tmp_path / "new", keys)
    now = check_log(DirSource(tmp_path / "new"), keys.verifier, remember=False)
    with pytest.raises(VerificationError, match="remembered-checkpoint: .*rolled back"):
        check_log(DirSource(tmp_path / "old"), keys.verifier, remember=False, prior=now.verified)
    # the partial tile region a follower fetches again: one changed hash is a rewrite
    last = sorted((tmp_path / "new" / "tile/0").glob("*.p/*"))[-1]
    data = bytearray(last.read_bytes())
    data[0] ^= 1
    last.write_bytes(bytes(data))
    with pytest.raises(VerificationError, match="tile-hash|remembered-checkpoint"):
        check_log(DirSource(tmp_path / "new"), keys.verifier, remember=False, prior=now.verified)


def test_monitor_follow_cli_reports_each_check(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    out = tmp_path / "pub"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
    code, stdout, err = invoke(tmp_path, "monitor", str(out), "--vkey", keys.verifier.vkey, "--no-remember",
                               "--follow", "--interval", "0.1", "--max-checks", "3")
    assert code == 0, err
    assert stdout.count("OK: ") == 3 and stdout.count(f"new run {RUN_A}") == 1
    assert f"replayed run {RUN_B}" in stdout
