"""The leaderboard as a pure projection: formulas, ranking, statuses, bias, jury, swap, replay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaluators import leaderboard as lb
from tests.bench.builders import RUN, RunBuilder, dims


def rows(b: RunBuilder) -> dict[str, dict[str, Any]]:
    return {r["provider"]: r for r in lb.leaderboard_from_entries(b.entries)["rows"]}


def test_quality_formulas_round_half_up() -> None:
    """code*5 without tests; (code+test)*2.5 with tests; .5 rounds up, not to even."""
    assert lb.quality(18) == 90
    assert lb.quality(17.5) == 88
    assert lb.quality(15, 16, with_tests=True) == 78  # 77.5 -> 78
    assert lb.quality(None) is None
    assert lb.quality(15, None, with_tests=True) is None


@pytest.mark.parametrize("text,expected", [
    ("answer\nSELF_EVAL_SUMMARY: 17/20\n", 17.0),
    ("SELF_EVAL_SUMMARY: 12/20 first\nSELF_EVAL_SUMMARY: 19/20", 19.0),
    ("x\nSELF_EVAL_SUMMARY\nOrderService: 18/20\nuseSearchProducts: 15/20\n", 16.5),
    ("```\nSELF_EVAL_SUMMARY\norder_service: 20/20\nsearch_products: 19/20\n```", 19.5),
    ("no assessment here", None),
    ("SELF_EVAL_SUMMARY: 25/20", None),
    ("SELF_EVAL_SUMMARY\nOrderService: 30/20\n", None),
])
def test_parse_self_eval(text: str, expected: float | None) -> None:
    """Both the one-line and the existing tool's block form parse; impossible scores do not."""
    assert lb.parse_self_eval(text) == expected


def test_rank_by_quality_then_time_then_cost_then_name() -> None:
    """Equal quality is broken by time, then cost, then name; unscored rows come last."""
    b = RunBuilder(agents=("d", "c", "b", "a", "e"))
    b.response("a", wall_s=20, cost=0.02)
    b.response("b", wall_s=10, cost=0.05)
    b.response("c", wall_s=10, cost=0.01)
    b.response("d", wall_s=10, cost=0.01)
    b.response("e", status="timeout", wall_s=600, cost=None)
    good = dims(5, 5, 4, 4)
    b.judge("gemini", ["a", "b", "c", "d"], {a: good for a in "abcd"})
    view = lb.leaderboard_from_entries(b.entries)
    assert [r["provider"] for r in view["rows"]] == ["c", "d", "b", "a", "e"]
    assert [r["rank"] for r in view["rows"]] == [1, 2, 3, 4, 5]
    assert view["export"]["leaderboard"][0]["provider"] == "c"


def test_timeout_shows_real_time_and_is_never_scored() -> None:
    """A timed-out agent has status timeout, its elapsed time, and no quality even if 'scored'."""
    b = RunBuilder()
    b.response("claude", status="timeout", wall_s=600.4, text="partial", cost=None)
    b.response("codex")
    b.judge("gemini", ["codex"], {"codex": dims(4, 4, 4, 4)})
    r = rows(b)
    assert r["claude"]["status"] == "timeout"
    assert r["claude"]["time_s"] == pytest.approx(600.4)
    assert r["claude"]["quality"] is None and r["claude"]["code_score"] is None
    assert r["codex"]["status"] == "scored" and r["codex"]["quality"] == 80
    view = lb.leaderboard_from_entries(b.entries)
    assert view["verdict"] == "PARTIAL"
    assert view["export"]["scored"] == ["codex"]


def test_unscored_response_is_not_zero() -> None:
    """An answer the judge left out is 'unscored' with quality None, never 0, and is listed."""
    b = RunBuilder()
    b.response("claude")
    b.response("codex")
    b.judge("gemini", ["claude", "codex"], {"claude": dims(5, 5, 5, 5)})
    view = lb.leaderboard_from_entries(b.entries)
    r = {x["provider"]: x for x in view["rows"]}
    assert r["codex"]["status"] == "unscored" and r["codex"]["quality"] is None
    assert view["judging"]["unscored"] == 1
    assert view["export"]["providers_succeeded"] == ["claude", "codex"]


def test_garbage_judge_gives_unscored_verdict() -> None:
    """When the judge's answer does not parse, every answered agent is unscored: UNSCORED."""
    b = RunBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], raw="lovely work all round")
    view = lb.leaderboard_from_entries(b.entries)
    assert view["verdict"] == "UNSCORED"
    assert view["rows"][0]["status"] == "unscored"
    assert "no JSON" in view["judging"]["verdicts"][0]["reason"]


def test_failed_judge_call_is_unscored_with_reason() -> None:
    """A judge that timed out leaves its responses UNSCORED with 'the judge timeout'."""
    b = RunBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], raw="", status="timeout")
    v = lb.leaderboard_from_entries(b.entries)["judging"]["verdicts"][0]
    assert v["scores"] is None and v["reason"] == "the judge timeout"


def test_self_eval_bias_is_self_minus_judge() -> None:
    """Bias = self score - judge composite on 0-20; positive means overconfident."""
    b = RunBuilder()
    b.response("claude", text="code\nSELF_EVAL_SUMMARY: 19/20")
    b.response("codex", text="code\nSELF_EVAL_SUMMARY: 10/20")
    b.judge("gemini", ["claude", "codex"], {"claude": dims(4, 4, 4, 3), "codex": dims(3, 3, 3, 3)})
    r = rows(b)
    assert r["claude"]["self_eval_bias"] == 4 and r["codex"]["self_eval_bias"] == -2
    assert lb.leaderboard_from_entries(b.entries)["self_eval_bias_range"] == [-2, 4]


def test_jury_takes_the_median_per_dimension() -> None:
    """Three judges: each dimension is the median of their scores."""
    b = RunBuilder(judges=("j1", "j2", "j3"))
    b.response("claude")
    b.judge("j1", ["claude"], {"claude": dims(5, 1, 3, 4)})
    b.judge("j2", ["claude"], {"claude": dims(2, 2, 3, 5)})
    b.judge("j3", ["claude"], {"claude": dims(4, 5, 0, 5)})
    r = rows(b)["claude"]
    assert r["code_scores"] == dims(4, 2, 3, 5)
    assert r["code_score"] == 14 and r["quality"] == 70
    assert r["judges"] == ["j1", "j2", "j3"]


def test_jury_of_two_can_give_half_points() -> None:
    """An even jury's median is the mean of the middle two: 17.5 -> quality 88."""
    b = RunBuilder(judges=("j1", "j2"))
    b.response("claude")
    b.judge("j1", ["claude"], {"claude": dims(5, 5, 4, 4)})
    b.judge("j2", ["claude"], {"claude": dims(5, 4, 4, 4)})
    r = rows(b)["claude"]
    assert r["code_score"] == 17.5 and r["quality"] == 88


def test_with_tests_formula_and_failed_tests_round() -> None:
    """With tests: (code+test)*2.5; a tests round that failed counts 0 and says so."""
    b = RunBuilder(options={"with_tests": True})
    b.response("claude")
    b.response("codex")
    b.response("claude", "tests")
    b.response("codex", "tests", status="failed", text="")
    b.judge("gemini", ["claude", "codex"], {"claude": dims(4, 4, 4, 4), "codex": dims(4, 4, 4, 4)})
    b.judge("gemini", ["claude"], {"claude": dims(3, 3, 3, 3)}, round_name="tests")
    r = rows(b)
    assert r["claude"]["quality"] == 70 and r["claude"]["test_score"] == 12
    assert r["codex"]["quality"] == 40
    assert any("tests count 0" in n for n in r["codex"]["notes"])


def test_review_delta_is_revised_minus_original() -> None:
    """adversarial_delta = revised composite - original composite."""
    b = RunBuilder()
    b.response("claude")
    b.response("claude", "code_revised")
    b.judge("gemini", ["claude"], {"claude": dims(4, 4, 4, 4)})
    b.judge("gemini", ["claude"], {"claude": dims(4, 3, 3, 3)}, round_name="code_revised")
    assert rows(b)["claude"]["adversarial_delta"] == -3


def test_swap_check_counts_flipped_pairs() -> None:
    """A judge that prefers whatever comes first flips its verdict when the order reverses."""
    b = RunBuilder(agents=("a", "b", "c"))
    for a in "abc":
        b.response(a)
    b.judge("gemini", ["a", "b", "c"], {"a": dims(5, 5, 5, 5), "b": dims(3, 3, 3, 3), "c": dims(2, 2, 2, 2)})
    # reversed order: c now wins; a still beats b
    b.judge("gemini", ["c", "b", "a"], {"c": dims(5, 5, 5, 5), "a": dims(3, 3, 3, 3), "b": dims(2, 2, 2, 2)},
            pass_name="swap")
    swap = lb.leaderboard_from_entries(b.entries)["swap"]
    assert swap["checked"] and swap["pairs"] == 3
    assert swap["flips"] == 2
    assert swap["calls"][0]["flipped"] == [["a", "c"], ["b", "c"]]
    # scores of the primary pass decide the ranking
    assert rows(b)["a"]["code_score"] == 20


def test_cost_and_tokens_sum_own_rounds_and_mark_estimates() -> None:
    """time, cost and tokens add up the agent's own rounds; one estimate marks the total."""
    b = RunBuilder()
    b.response("claude", wall_s=10, cost=0.01, tokens=(100, 50))
    b.response("claude", "code_revised", wall_s=5, cost=0.02, cost_source="estimated",
               tokens=(10, 5), tokens_source="estimated")
    r = rows(b)["claude"]
    assert r["time_s"] == 15 and r["cost_usd"] == pytest.approx(0.03)
    assert r["cost_source"] == "mixed" and r["tokens_estimated"] is True
    assert (r["tokens_in"], r["tokens_out"]) == (110, 55)


def test_export_has_exactly_the_existing_tools_fields() -> None:
    """The v2.0 export has the seed's top-level fields and row fields, in order."""
    b = RunBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], {"claude": dims(5, 5, 5, 5)})
    exp = lb.export_v2(lb.leaderboard_from_entries(b.entries))
    assert list(exp) == ["version", "skill", "run_id", "timestamp", "project", "mode",
                         "task_source", "task_hash", "task_snapshot", "options",
                         "providers_attempted", "providers_succeeded", "scored", "leaderboard",
                         "scorecards", "meta_judge_model", "judge_presentation_order",
                         "judge_input_truncated"]
    assert exp["version"] == "2.0" and exp["skill"] == "benchmark"
    assert list(exp["leaderboard"][0]) == list(lb.ROW_FIELDS)
    card = exp["scorecards"]["claude"]
    assert card["code_composite"] == 20 and card["code_accuracy"] == 5
    assert exp["timestamp"] == "2027-01-15T08:00:00Z"
    json.dumps(exp)


def test_other_runs_and_unknown_kinds_are_ignored_and_counted() -> None:
    """Entries of another run do not leak in; unknown kinds are counted."""
    b = RunBuilder()
    b.response("claude")
    b.add("bench.response", {"agent": "intruder", "round": "code", "status": "ok", "text": "x"},
          run="b-other")
    b.add("bench.mystery", {"x": 1})
    b.add("bench.response", {"round": "code"})
    view = lb.leaderboard_from_entries(b.entries)
    assert [r["provider"] for r in view["rows"]] == ["claude", "codex"]
    assert view["entries"]["unknown"] == {"bench.mystery": 1}
    assert view["entries"]["malformed"] == {"bench.response": 1}


def test_same_entries_same_view_bytes() -> None:
    """Replaying the same entries gives an identical view (no clock, no randomness)."""
    b = RunBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], {"claude": dims(5, 4, 5, 4)})
    one = json.dumps(lb.leaderboard_from_entries(b.entries), sort_keys=True)
    two = json.dumps(lb.leaderboard_from_entries(list(b.entries)), sort_keys=True)
    assert one == two


def test_replay_reproduces_and_detects_an_edited_view() -> None:
    """replay_leaderboard matches a faithful recorded view and names the field of an edited one."""
    b = RunBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], {"claude": dims(5, 4, 5, 4)})
    view = lb.leaderboard_from_entries(b.entries)
    good = RunBuilder()
    good.entries = list(b.entries)
    good.add("view.recorded", {"evaluator": "bench", "version": lb.BENCH_VERSION, "view": view})
    assert lb.replay_leaderboard(good.entries, RUN)["reproduced"] is True
    forged = json.loads(json.dumps(view))
    forged["rows"][0]["quality"] = 100
    bad = RunBuilder()
    bad.entries = list(b.entries)
    bad.add("view.recorded", {"evaluator": "bench", "version": lb.BENCH_VERSION, "view": forged})
    result = lb.replay_leaderboard(bad.entries, RUN)
    assert result["reproduced"] is False
    assert result["views"][0]["diffs"][0]["path"] == "rows[0].quality"


def test_replay_without_a_recorded_view_is_not_reproduced() -> None:
    """A run with no recorded bench view cannot claim to be reproduced."""
    b = RunBuilder()
    assert lb.replay_leaderboard(b.entries, RUN)["reproduced"] is False


@pytest.mark.parametrize("ts", [0, 1, 86_399_999_999_999, 951_782_400 * 10**9,  # 2000-02-29
                                1_764_590_400 * 10**9 + 123, 4_102_444_799 * 10**9])
def test_iso_times_match_the_standard_library(ts: int) -> None:
    """The leaderboard's clock-free timestamp format equals datetime's, leap days included."""
    from datetime import UTC, datetime, timedelta

    want = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ts // 1000)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert lb._iso(ts) == want
