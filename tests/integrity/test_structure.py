"""evaluators/structure.py: results count only where the run's structure puts them."""

from __future__ import annotations

from evaluators.structure import trusted
from evaluators.views import compute_views
from tests.evaluators.builders import RunBuilder, task


def _bound_run(extra_inside: bool) -> tuple[RunBuilder, str]:
    """One failing attempt whose attestation binds its results; optionally a racing writer's
    passing test.result lands inside the span before the attestation."""
    b = RunBuilder()
    b.started([task("t1")])
    aid = b.attempt("t1", hidden=(0, 2, 0), status=None)
    if extra_inside:
        b.add("test.result", {"attempt": aid, "suite": "hidden", "command": ["pytest"], "exit_code": 0,
                              "passed": True, "duration_s": 1.0,
                              "counts": {"passed": 2, "failed": 0, "error": 0, "skipped": 0},
                              "tests": []}, task="t1")
    b.add("attempt.finished", {"attempt": aid, "status": "completed", "error": None}, task="t1")
    bound = [e.seq for e in b.entries if e.data.get("attempt") == aid
             and not (extra_inside and e.kind == "test.result" and e.data["passed"] and e.data["suite"] == "hidden")]
    b.add("attestation", {"attempt": aid, "attestation": {"verdict": "CLEAN",
                                                          "results": {"seqs": bound, "digest": "00" * 32}},
                          "hash": "00" * 32}, task="t1")
    b.finished()
    return b, aid


def test_result_inside_the_span_but_not_bound_is_injected() -> None:
    """A result written into the attempt's span by someone else is not bound by the attestation."""
    clean, _ = _bound_run(False)
    raced, _ = _bound_run(True)
    assert not trusted(clean.entries).findings
    found = trusted(raced.entries).findings
    assert [(f.kind, f.reason[:20]) for f in found] == [("test.result", "a result the attempt")]
    assert compute_views(raced.entries)["attempts"][0]["passed"] is False


def test_second_result_of_a_kind_is_injected_without_binding() -> None:
    """Without a binding attestation, only the first result of a kind counts; the rest are reported."""
    b = RunBuilder()
    b.started([task("t1")])
    aid = b.attempt("t1", hidden=(0, 1, 0), status=None)
    b.add("test.result", {"attempt": aid, "suite": "hidden", "command": ["pytest"], "exit_code": 0,
                          "passed": True, "duration_s": 1.0,
                          "counts": {"passed": 1, "failed": 0, "error": 0, "skipped": 0}, "tests": []},
          task="t1")
    b.finished()
    found = trusted(b.entries).findings
    assert [f.kind for f in found] == ["test.result"]
    assert compute_views(b.entries)["attempts"][0]["passed"] is False


def test_view_not_after_run_finished_is_injected() -> None:
    """A view.recorded appended later (not right after run.finished) is set aside."""
    b = RunBuilder()
    b.started([task("t1")])
    b.attempt("t1")
    b.finished()
    b.add("view.recorded", {"evaluator": "golden", "version": "1", "view": {}})
    b.add("ext.note", {})
    b.add("view.recorded", {"evaluator": "golden", "version": "1", "view": {"score": 1}})
    found = trusted(b.entries).findings
    assert [(f.seq, f.kind) for f in found] == [(b.entries[-1].seq, "view.recorded")]
