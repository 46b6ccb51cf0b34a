"""The coordinator keeps one fold of the run as it appends: it never reads the run back to judge,
attest or record its view, and what it records replays identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluators.registry import replay_run
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.run.coordinator import execute_run
from ledger.run.plan import RunRequest
from tests.run.minitasks import make_ledger


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = Journal.entries

    def counting(self: Journal, *args: Any, **kwargs: Any) -> Any:
        calls.append(dict(kwargs))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "entries", counting)
    return calls


def test_a_fresh_run_never_reads_its_entries_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attestations, judge verdicts and the recorded view come from the entries as they were
    appended: no Journal.entries call of the run during a fresh run (the one lookup is of earlier
    runs' hidden ids per task, ledger/run/expected_reuse.py), and the view replays identically."""
    home = make_ledger(tmp_path, tasks=("fix-add", "fix-sub"))
    calls = _count_reads(monkeypatch)
    summary = execute_run(LedgerHome(home), RunRequest(tiers=("mini",), agents=("oracle", "noop"), trace="none",
                                                       parallel=2))
    assert calls and all(c == {"task": c["task"], "kind": "grading.expected"} for c in calls), calls
    assert sorted({c["task"] for c in calls}) == ["fix-add", "fix-sub"]
    assert {r.attestation for r in summary.results} == {"CLEAN", "DIRTY"}
    monkeypatch.undo()
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary.run_id))
    kinds = [e.kind for e in entries]
    assert kinds.count("judge.verdict") == 4 and kinds.count("attestation") == 4
    assert kinds[-3:] == ["run.finished", "view.recorded", "view.recorded"]
    assert [e.data["evaluator"] for e in entries[-2:]] == ["golden", "stats"]
    assert replay_run(entries, summary.run_id).reproduced


def test_a_resumed_run_reads_the_run_back_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume reads what the run already journaled once (planning and fold share it), then
    appends without reading."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    first = execute_run(LedgerHome(home), RunRequest(tiers=("mini",), agents=("noop",), trace="none"))
    calls = _count_reads(monkeypatch)
    again = execute_run(LedgerHome(home), RunRequest(resume=first.run_id, trace="none"))
    run_reads = [c for c in calls if c.get("run") == first.run_id and c.get("kind") is None]
    assert len(run_reads) == 1, calls
    monkeypatch.undo()
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=again.run_id))
    assert replay_run(entries, again.run_id).reproduced
