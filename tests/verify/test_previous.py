"""``compare_with_previous``: the comparison ``ledger run`` prints, both runs read through the
reader it is given (verified reading in the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.errors import VerificationError
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.verify.previous import compare_with_previous
from tests.cli.test_report_cmds import RUN_A, RUN_B, builder, write

RUN_C = "r-20261130T120000Z-cccccc"


class Recording:
    """A reader that returns the stored entries and records which runs it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def entries(self, journal: Journal, run_id: str) -> list[Entry]:
        self.asked.append(run_id)
        return list(journal.entries(run=run_id))


class Refusing(Recording):
    def entries(self, journal: Journal, run_id: str) -> list[Entry]:
        raise VerificationError("leaf-hash", f"run {run_id} does not verify", seq=0)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = tmp_path / "L"
    h.mkdir()
    write(h, builder(RUN_A, {"t1": True, "t2": False}))
    write(h, builder(RUN_B, {"t1": False, "t2": True}))
    return h


def test_compares_with_the_latest_earlier_run_of_the_same_tasks(home: Path) -> None:
    reader = Recording()
    with Journal.open(home / "journal.db", readonly=True) as j:
        got: Any = compare_with_previous(j, RUN_B, reader)
    assert got is not None and got["run_a"] == RUN_A and got["run_b"] == RUN_B
    assert got["tasks"]["newly_passing"] == ["t2"] and got["tasks"]["newly_failing"] == ["t1"]
    assert sorted(reader.asked) == [RUN_A, RUN_B]  # both sides read through the reader


def test_no_earlier_run_of_the_same_tasks_is_none(home: Path) -> None:
    write(home, builder(RUN_C, {"t1": True, "t9": True}))  # another task set
    with Journal.open(home / "journal.db", readonly=True) as j:
        assert compare_with_previous(j, RUN_C, Recording()) is None
        assert compare_with_previous(j, RUN_A, Recording()) is None  # the first run
        assert compare_with_previous(j, "r-nope", Recording()) is None


def test_a_run_that_does_not_verify_is_refused_not_compared(home: Path) -> None:
    with Journal.open(home / "journal.db", readonly=True) as j, pytest.raises(VerificationError) as exc:
        compare_with_previous(j, RUN_B, Refusing())
    assert exc.value.check == "leaf-hash"
