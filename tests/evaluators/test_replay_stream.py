"""A streamed replay (the run's structure read apart, every entry folded once as it streams past,
as `ledger replay` reads a journal) gives the very result of a replay over the run held in a
list: clean runs, forged views, and each injection case, one per case."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import pytest

from evaluators import stats_view
from evaluators.registry import replay_run
from evaluators.stats_view import stats_of
from evaluators.structure import STRUCTURE_KINDS
from evaluators.views import recorded_view_data
from ledger.journal.codec import Entry
from tests.evaluators.builders import RunBuilder, task
from tests.evaluators.test_stats_view import stats_run
from tests.integrity.test_structure import _bound_run


def _golden_only() -> RunBuilder:
    b = stats_run(record=False)
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    return b


def _no_view() -> RunBuilder:
    return stats_run(record=False)


def _forged_stats() -> RunBuilder:
    b = stats_run()
    last = b.entries.pop()
    forged = copy.deepcopy(last.data)
    forged["view"]["per_agent"]["beta"]["pass_rate"]["value"] = 0.99
    b.add("view.recorded", forged)
    return b


def _unbound_result() -> RunBuilder:
    b, _ = _bound_run(True)  # a passing test.result inside the span the attestation does not bind
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    return b


def _appended_override() -> RunBuilder:
    """A finished, recorded run, then a passing test.result, a second attestation and a view
    recomputed over them appended after it (what a raw writer can do)."""
    b = RunBuilder()
    b.started([task("t1"), task("t2")])
    aid = b.attempt("t1", hidden=(0, 2, 0))
    b.attempt("t2", hidden=(2, 0, 0))
    b.finished()
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    b.add("view.recorded", {"evaluator": stats_view.EVALUATOR_NAME,
                            "version": stats_view.EVALUATOR_VERSION,
                            "view": stats_of(b.entries, b.run)})
    b.add("test.result", {"attempt": aid, "suite": "hidden", "command": ["pytest"], "exit_code": 0,
                          "passed": True, "duration_s": 1.0,
                          "counts": {"passed": 2, "failed": 0, "error": 0, "skipped": 0},
                          "tests": []}, task="t1")
    b.add("attestation", {"attempt": aid, "attestation": {"verdict": "CLEAN"}, "hash": "00" * 32},
          task="t1")
    b.add("attempt.started", {"attempt": aid, "agent": "demo", "repeat": 1, "try": 1,
                              "tier": "smoke"}, task="t1")
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    return b


def _other_runs_interleaved() -> RunBuilder:
    """Entries of another run between this run's (a journal holds several)."""
    b = stats_run()
    other = RunBuilder(run="r-20261201T000000Z-other1")
    other.started([task("t9")])
    other.attempt("t9")
    mixed = RunBuilder(run=b.run)
    for i, e in enumerate(b.entries):
        mixed.entries.append(e._replace(seq=2 * i))
        if i < len(other.entries):
            mixed.entries.append(other.entries[i]._replace(seq=2 * i + 1))
    return mixed


CASES: dict[str, Callable[[], RunBuilder]] = {
    "golden-and-stats-views": stats_run,
    "golden-view-only": _golden_only,
    "no-view-recorded": _no_view,
    "forged-stats-view": _forged_stats,
    "result-not-bound-by-attestation": _unbound_result,
    "appended-result-attestation-and-view": _appended_override,
    "other-runs-interleaved": _other_runs_interleaved,
}


def _structure(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if e.kind in STRUCTURE_KINDS]


@pytest.mark.parametrize("name", sorted(CASES))
def test_streamed_replay_is_the_held_replay(name: str) -> None:
    """Same result, field for field (views, diffs, injected findings, message, counts)."""
    b = CASES[name]()
    held = replay_run(list(b.entries), b.run)
    consumed: list[int] = []

    def stream() -> Iterator[Entry]:
        for e in b.entries:
            consumed.append(e.seq)
            yield e

    streamed = replay_run(stream(), b.run, structure=_structure(b.entries))
    assert streamed.as_dict() == held.as_dict()
    assert consumed == [e.seq for e in b.entries]  # read once, in order
    if name in ("result-not-bound-by-attestation", "appended-result-attestation-and-view"):
        assert held.injected and not held.ok
    if name == "forged-stats-view":
        assert not held.reproduced
    if name == "golden-and-stats-views":
        assert held.ok and {v.evaluator for v in held.views} == {"golden", "stats"}


def test_a_structure_that_is_not_the_runs_is_refused() -> None:
    """A structure read from another state of the journal (an attestation it lacks) would
    misplace entries: the stream's own structural entries disagree, ValueError."""
    b = _unbound_result()
    structure = [e for e in _structure(b.entries) if e.kind != "attestation"]
    with pytest.raises(ValueError, match="structure entries given are not the run's"):
        replay_run(iter(b.entries), b.run, structure=structure)
