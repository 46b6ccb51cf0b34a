"""Hidden ids this ledger already collected are reused (ledger/run/expected_reuse.py), and only
when the task hash, the harness version and the sandbox backend are the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.journal.journal import Journal
from ledger.run.expected_reuse import recorded_expected
from ledger.session import HARNESS
from tests.run.test_attestation_e2e import ledger, packaged

TASK = packaged("add-clamp")
IDS = ["tests_hidden/test_clamp_accept.py::test_degenerate_interval"]


def _expected(**over: Any) -> dict[str, Any]:
    return {"attempt": "r/add-clamp/demo/1/1", "suite": "hidden", "source": "collected",
            "task_hash": TASK.hash, "count": len(IDS), "ids": list(IDS), **over}


def _journal(tmp_path: Path, runs: list[tuple[str, dict[str, Any], list[dict[str, Any]]]]) -> Journal:
    j = Journal.open(tmp_path / "journal.db", create=True, harness=True)
    for run, started, expected in runs:
        j.append("run.started", started, run=run)
        for data in expected:
            j.append("grading.expected", data, run=run, task=TASK.id)
    return j


def _started(sandbox: str = "bwrap", harness: str = HARNESS, **cfg: Any) -> dict[str, Any]:
    return {"harness_version": harness, "config": {"sandbox": sandbox, **cfg}}


def test_the_last_matching_collection_is_reused_with_its_seq(tmp_path: Path) -> None:
    j = _journal(tmp_path, [("r1", _started(), [_expected()]),
                            ("r2", _started(), [_expected(source="collected-with-solution")])])
    found = recorded_expected(j, TASK, sandbox="bwrap", harness=HARNESS)
    last = [e for e in j.entries(kind="grading.expected")][-1]
    assert found == {"suite": "hidden", "source": "collected-with-solution",
                     "task_hash": TASK.hash, "count": 1, "ids": IDS, "reused": last.seq}


REFUSED = {  # case -> (the run.started, the grading.expected): nothing to reuse
    "other-task-hash": (_started(), _expected(task_hash="0" * 64)),
    "ids-from-the-task-not-collected": (_started(), _expected(source="task")),
    "other-harness-version": (_started(harness="eval-ledger/0.0.0"), _expected()),
    "other-sandbox-backend": (_started(sandbox="none"), _expected()),
    "other-backend-for-this-task": (
        _started(sandbox="bwrap", sandbox_by_task={TASK.id: "podman"}), _expected()),
    "count-disagrees-with-ids": (_started(), _expected(count=5)),
    "no-ids": (_started(), _expected(ids=[], count=0)),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_collection_that_does_not_match_is_not_reused(tmp_path: Path, case: str) -> None:
    started, expected = REFUSED[case]
    j = _journal(tmp_path, [("r1", started, [expected])])
    assert recorded_expected(j, TASK, sandbox="bwrap", harness=HARNESS) is None


def test_a_second_run_reuses_the_first_runs_collection_end_to_end(tmp_path: Path) -> None:
    """Two runs of add-clamp in one ledger: the second attempt's grading.expected names the
    first's, holds the same ids, still grades (passed), and replay and verify agree."""
    home = tmp_path / ".ledger"
    for _ in range(2):
        result = ledger(home, "run", "--json", "--sandbox", "none", "--task", "add-clamp",
                        "--agent", "demo")
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["attempts"][0]["outcome"] == "passed"
    with Journal.open(home / "journal.db", readonly=True) as j:
        first, second = list(j.entries(kind="grading.expected"))
    assert "reused" not in first.data and first.data["source"] == "collected"
    assert second.data["reused"] == first.seq and second.data["ids"] == first.data["ids"]
    replayed = ledger(home, "replay", summary["run"], "--json")
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["reproduced"] is True
    assert ledger(home, "verify", summary["run"]).exit_code == 0
