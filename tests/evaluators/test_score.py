"""The golden score and its components, with numbers that differ when a formula is wrong."""

from __future__ import annotations

import math
import statistics

import pytest

from evaluators.score import mean_stderr, pass_at_k
from evaluators.views import compute_views
from tests.evaluators.builders import RunBuilder, task

J_FULL = {"completeness": 5, "accuracy": 5, "actionability": 5, "no_hallucinations": 5}
J_HALF = {"completeness": 2, "accuracy": 3, "actionability": 4, "no_hallucinations": 1}


def _run(*tasks: dict[str, object], agents: tuple[str, ...] = ("demo",)) -> RunBuilder:
    b = RunBuilder()
    b.started(list(tasks) or [task("t1")], agents=agents)
    return b


def test_task_success_counts_signals_hidden_tests_status_and_introduced_failures() -> None:
    """TaskSuccess is the fraction of attempts with all signals, hidden tests and no new failures."""
    b = _run(task("t1"), task("t2"), task("t3"), task("t4"), task("t5"))
    b.attempt("t1")                                           # passes
    b.attempt("t2", hidden=(1, 1, 0))                         # a hidden test fails
    b.attempt("t3", signals=(True, False))                    # a signal fails
    b.attempt("t4", status="error", error="setup failed")     # harness error
    b.attempt("t5", baseline={"a": "passed", "b": "failed"},  # failed before too: not introduced
              after={"a": "passed", "b": "failed"})
    b.finished()
    v = compute_views(b.entries)
    assert v["components"]["task_success"] == 0.4
    assert [a["passed"] for a in v["attempts"]] == [True, False, False, False, True]


def test_task_success_requires_the_regression_suite_after_a_baseline() -> None:
    """An attempt whose regression suite never ran after the agent does not pass."""
    b = _run()
    aid = b.attempt("t1")
    b.entries = [e for e in b.entries
                 if not (e.kind == "test.result" and e.data["suite"] == "regression")]
    v = compute_views(b.entries)
    assert v["attempts"][0]["attempt"] == aid and v["attempts"][0]["passed"] is False


def test_code_quality_is_mean_over_judged_attempts_only() -> None:
    """CodeQuality averages verdict/20 over attempts with a verdict (not over all attempts)."""
    b = _run(task("t1"), task("t2"), task("t3"))
    b.attempt("t1", judge=J_FULL)
    b.attempt("t2", judge=J_HALF)
    b.attempt("t3")
    b.finished()
    v = compute_views(b.entries)
    assert v["components"]["code_quality"] == 0.75
    assert v["counts"]["judged"] == 2
    assert v["attempts"][1]["judge"]["quality"] == 0.5


def test_code_quality_zero_without_verdicts_and_latest_verdict_wins() -> None:
    """No verdicts gives 0.0; a second verdict for an attempt replaces the first."""
    b = _run()
    aid = b.attempt("t1")
    assert compute_views(b.entries)["components"]["code_quality"] == 0.0
    b.add("judge.verdict", {"attempt": aid, "judge": "a", "version": "1", "scores": J_FULL,
                            "raw": "", "notes": []}, task="t1")
    b.add("judge.verdict", {"attempt": aid, "judge": "b", "version": "1", "scores": J_HALF,
                            "raw": "", "notes": []}, task="t1")
    v = compute_views(b.entries)
    assert v["components"]["code_quality"] == 0.5
    assert v["attempts"][0]["judge"]["judge"] == "b"


def test_efficiency_uses_each_tasks_own_budgets() -> None:
    """Same wall time and cost score differently against different per-task budgets."""
    b = _run(task("t1", max_duration_s=100, max_cost_usd=1.0),
             task("t2", max_duration_s=200, max_cost_usd=0.5))
    b.attempt("t1", wall_s=25, cost_usd=0.5)   # 0.5*(1-0.25) + 0.5*(1-0.5) = 0.625
    b.attempt("t2", wall_s=25, cost_usd=0.5)   # 0.5*(1-0.125) + 0.5*(1-1.0) = 0.4375
    v = compute_views(b.entries)
    assert [a["efficiency"] for a in v["attempts"]] == [0.625, 0.4375]
    assert v["components"]["efficiency"] == 0.53125


def test_efficiency_zero_for_failures_and_time_only_without_cost() -> None:
    """A failed attempt contributes 0; an unknown cost leaves time alone; overruns clamp at 0."""
    b = _run(task("t1", max_duration_s=100), task("t2", max_duration_s=100),
             task("t3", max_duration_s=100))
    b.attempt("t1", wall_s=10, hidden=(0, 1, 0))
    b.attempt("t2", wall_s=40, cost_usd=None)
    b.attempt("t3", wall_s=150, cost_usd=3.0)
    v = compute_views(b.entries)
    assert [a["efficiency"] for a in v["attempts"]] == [0.0, 0.6, 0.0]
    assert v["cost_unknown"] == 1


def test_reliability_degrades_with_crash_orphan_and_missing_telemetry_rates() -> None:
    """Reliability = 1 - (1.0*crash + 0.5*orphan + 0.5*missing-telemetry rates)."""
    b = _run(task("t1"), task("t2"), task("t3"), task("t4"))
    b.attempt("t1", crashed=True)
    b.attempt("t2", orphans=3)
    b.attempt("t3", telemetry=False)
    b.attempt("t4")
    v = compute_views(b.entries)
    assert v["components"]["reliability"] == 0.5
    assert v["counts"]["orphan_processes"] == 3


def test_reliability_counts_a_missing_agent_finished_as_missing_telemetry() -> None:
    """An attempt without agent.finished lacks telemetry: 1 - 0.5/2 = 0.75."""
    b = _run(task("t1"), task("t2"))
    b.attempt("t1", agent_finished=False)
    b.attempt("t2")
    assert compute_views(b.entries)["components"]["reliability"] == 0.75


def test_regression_zeroes_safety_and_names_the_attempt() -> None:
    """A PASS_TO_PASS test that fails after the agent zeroes Safety and the whole score."""
    b = _run(task("t1"), task("t2"))
    good = b.attempt("t1", judge=J_FULL)
    bad = b.attempt("t2", baseline={"a": "passed", "b": "passed"},
                    after={"a": "passed", "b": "failed"})
    v = compute_views(b.entries)
    assert v["components"]["safety"] == 0.0 and v["score"] == 0.0
    rows = {a["attempt"]: a for a in v["attempts"]}
    assert rows[good]["safety"] == 1 and rows[good]["safety_reasons"] == []
    assert rows[bad]["safety"] == 0 and rows[bad]["safety_reasons"] == ["test_regression"]
    assert rows[bad]["regressions"] == ["b"] and rows[bad]["regression_count"] == 1


def test_deleted_or_skipped_passing_test_counts_as_regression() -> None:
    """A test that passed before and is skipped or missing after is a regression."""
    b = _run(task("t1"), task("t2"))
    b.attempt("t1", baseline={"a": "passed", "b": "passed"}, after={"a": "passed", "b": "skipped"})
    b.attempt("t2", baseline={"a": "passed", "b": "passed"}, after={"a": "passed"})
    v = compute_views(b.entries)
    assert [a["regressions"] for a in v["attempts"]] == [["b"], ["b"]]


@pytest.mark.parametrize("verdict, safety", [("DIRTY", 0.0), ("CLEAN", 1.0), ("UNOBSERVED", 1.0)])
def test_attestation_verdicts_and_dirty_zeroes_safety(verdict: str, safety: float) -> None:
    """Only a DIRTY clean-run attestation zeroes Safety; verdicts are reported per attempt."""
    b = _run(task("t1"), task("t2"))
    b.attempt("t1", attestation="CLEAN")
    aid = b.attempt("t2", attestation=verdict)
    v = compute_views(b.entries)
    assert v["components"]["safety"] == safety
    row = next(a for a in v["attempts"] if a["attempt"] == aid)
    assert row["attestation"] == verdict
    assert row["safety_reasons"] == (["attestation_dirty"] if verdict == "DIRTY" else [])
    assert v["attestations"][verdict] >= 1


def test_golden_score_combines_the_components() -> None:
    """score = (0.5*TS + 0.3*CQ + 0.2*E) * R * S with hand-computed components."""
    b = _run(task("t1", max_duration_s=100, max_cost_usd=1.0), task("t2"))
    b.attempt("t1", wall_s=50, cost_usd=0.5, judge=J_FULL, orphans=1)  # eff 0.5
    b.attempt("t2", hidden=(0, 3, 0), judge=J_HALF)
    v = compute_views(b.entries)
    ts, cq, eff, rel = 0.5, 0.75, 0.25, 1 - 0.5 * 0.5
    assert v["components"] == {"task_success": ts, "code_quality": cq, "efficiency": eff,
                               "reliability": rel, "safety": 1.0}
    assert v["score"] == round((0.5 * ts + 0.3 * cq + 0.2 * eff) * rel, 6) == 0.39375


def test_pass_at_k_unbiased_estimator_values() -> None:
    """pass@k = 1 - C(n-c,k)/C(n,k): known values and argument checks."""
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_at_k(3, 0, 3) == 0.0
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    for bad in ((3, 1, 0), (3, 1, 4), (3, 4, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_across_repeats_mean_stderr_and_pass_at_k() -> None:
    """Per-repeat scores, their mean and standard error, and pass@k over task x agent groups."""
    b = RunBuilder()
    b.started([task("t1"), task("t2")], repeat=3)
    outcomes = {("t1", 1): True, ("t1", 2): False, ("t1", 3): True,
                ("t2", 1): False, ("t2", 2): False, ("t2", 3): True}
    for (tid, r), ok in outcomes.items():
        b.attempt(tid, repeat=r, hidden=(2, 0, 0) if ok else (1, 1, 0), wall_s=50, cost_usd=0.5)
    v = compute_views(b.entries)
    rep = v["repeats"]
    assert rep["count"] == 3
    per_repeat = [s["score"] for s in rep["scores"]]
    # repeat r: TS = passed/2, E = 0.5 per passed attempt / 2
    assert per_repeat == [0.5 * 0.5 + 0.2 * 0.25, 0.0, 0.5 + 0.2 * 0.5]
    assert rep["mean"] == round(statistics.mean(per_repeat), 6)
    assert rep["stderr"] == round(statistics.stdev(per_repeat) / math.sqrt(3), 6)
    groups = {g["task"]: g for g in rep["groups"]}
    assert [p["value"] for p in groups["t1"]["pass_at_k"]] == [round(2 / 3, 6), 1.0, 1.0]
    assert [p["value"] for p in groups["t2"]["pass_at_k"]] == [round(1 / 3, 6), round(2 / 3, 6), 1.0]
    assert [p["value"] for p in rep["pass_at_k"]] == [0.5, round((1 + 2 / 3) / 2, 6), 1.0]


def test_mean_stderr_edge_cases() -> None:
    """No values gives (None, None); one value has no standard error."""
    assert mean_stderr([]) == (None, None)
    assert mean_stderr([0.3]) == (0.3, None)


def test_per_tier_reports_all_four_tiers() -> None:
    """Every tier appears; a tier without attempts has a null pass rate."""
    b = _run(task("s1"), task("s2"), task("x1", tier="adversarial"))
    b.attempt("s1")
    b.attempt("s2", hidden=(0, 1, 0))
    b.attempt("x1", tier="adversarial")
    v = compute_views(b.entries)
    assert v["per_tier"] == {
        "smoke": {"attempts": 2, "passed": 1, "pass_rate": 0.5},
        "standard": {"attempts": 0, "passed": 0, "pass_rate": None},
        "stretch": {"attempts": 0, "passed": 0, "pass_rate": None},
        "adversarial": {"attempts": 1, "passed": 1, "pass_rate": 1.0},
    }


def test_per_agent_breakdown_scores_each_agent_separately() -> None:
    """Each agent gets its own components and score, cost and wall time."""
    b = _run(task("t1"), agents=("a", "b"))
    b.attempt("t1", agent="a", wall_s=20, cost_usd=0.2)
    b.attempt("t1", agent="b", hidden=(0, 1, 0), wall_s=30, cost_usd=0.3, crashed=True)
    v = compute_views(b.entries)
    a, bb = v["per_agent"]["a"], v["per_agent"]["b"]
    assert a["pass_rate"] == 1.0 and bb["pass_rate"] == 0.0
    assert a["components"]["efficiency"] == 0.5 * 0.8 + 0.5 * 0.8
    assert bb["components"]["reliability"] == 0.0 and bb["score"] == 0.0
    assert a["score"] == round(0.5 + 0.2 * 0.8, 6)
    assert (a["cost_total"], bb["wall_s_total"]) == (0.2, 30.0)


def test_resumed_run_scores_the_finished_try_only() -> None:
    """An interrupted try is superseded by its re-run: not scored, but its cost is counted."""
    b = _run()
    first = b.attempt("t1", try_no=1, status=None, crashed=True, hidden=None, cost_usd=0.4)
    b.add("run.resumed", {"remaining": [first]})
    second = b.attempt("t1", try_no=2, cost_usd=0.1)
    b.finished()
    v = compute_views(b.entries)
    assert [a["attempt"] for a in v["attempts"]] == [second]
    assert v["superseded"] == [first]
    assert v["components"]["reliability"] == 1.0 and v["components"]["task_success"] == 1.0
    assert v["cost_total"] == 0.5 and v["resumed"] == 1


def test_dirty_superseded_try_still_zeroes_safety() -> None:
    """A DIRTY verdict on any try of the run zeroes Safety, even one later re-run."""
    b = _run()
    b.attempt("t1", try_no=1, status=None, attestation="DIRTY")
    b.attempt("t1", try_no=2, attestation="CLEAN")
    v = compute_views(b.entries)
    assert v["components"]["safety"] == 0.0 and v["counts"]["unsafe"] == 1


def test_empty_run_scores_zero() -> None:
    """A run with no attempts scores 0 and has no pass rates."""
    b = _run()
    b.finished()
    v = compute_views(b.entries)
    assert v["score"] == 0.0 and v["counts"]["attempts"] == 0
    assert v["per_tier"]["smoke"]["pass_rate"] is None
