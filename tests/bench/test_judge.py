"""The blinded meta-judge: labels, seeded order, truncation, the family rule, score parsing."""

from __future__ import annotations

import json

import pytest

from evaluators import bench_judge as jd

SCORES = {"completeness": 5, "accuracy": 4, "actionability": 3, "no_hallucinations": 2}


def test_labels_are_spreadsheet_style() -> None:
    """Labels run A..Z and continue AA, AB (27 responses never reuse a label)."""
    names = jd.labels(28)
    assert names[:3] == ["A", "B", "C"] and names[25:] == ["Z", "AA", "AB"]
    assert len(set(names)) == 28


def test_presentation_order_is_fixed_by_seed_and_call() -> None:
    """The same seed and call give the same permutation; another seed gives another one."""
    agents = ["claude", "codex", "gemini", "cursor-agent", "aider", "x", "y", "z"]
    first = jd.presentation_order(agents, 7, "code/claude")
    assert first == jd.presentation_order(list(reversed(agents)), 7, "code/claude")
    assert sorted(first) == sorted(agents)
    others = {tuple(jd.presentation_order(agents, seed, "code/claude")) for seed in range(20)}
    assert len(others) > 1


def test_truncation_limit_is_floor_of_budget_over_count() -> None:
    """Each response gets floor(80000 / n) characters."""
    assert jd.truncation_limit(1) == 80000
    assert jd.truncation_limit(3) == 26666
    assert jd.truncation_limit(7) == 11428


def test_judge_prompt_blinds_truncates_and_flags() -> None:
    """Agent names never reach the judge; a long response is cut to the limit and flagged."""
    responses = {"claude": "x" * 50_000 + "\nSELF_EVAL_SUMMARY: 20/20", "codex": "short answer"}
    jp = jd.judge_prompt("Write a thing", responses, ["codex", "claude"])
    assert jp.labels == {"A": "codex", "B": "claude"}
    assert jp.limit == 40_000
    assert jp.truncated == {"codex": False, "claude": True}
    assert "claude" not in jp.prompt and "codex" not in jp.prompt
    assert "SELF_EVAL_SUMMARY" not in jp.prompt
    assert "[response truncated to 40000 characters]" in jp.prompt
    assert jp.prompt.index("=== Response A ===") < jp.prompt.index("short answer")


def test_strip_self_eval_removes_line_and_block_forms() -> None:
    """Both the one-line and the block self-assessment are hidden from judges."""
    text = "code\nSELF_EVAL_SUMMARY\norder_service: 18/20\nsearch_products: 17/20\n"
    assert jd.strip_self_eval(text).strip() == "code"
    assert jd.strip_self_eval("a\nSELF_EVAL_SUMMARY: 19/20\nb").splitlines() == ["a", "b"]


@pytest.mark.parametrize("text", [
    json.dumps({"A": SCORES, "B": SCORES}),
    "Scores:\n```json\n" + json.dumps({"A": SCORES, "B": SCORES}) + "\n```\nThanks.",
    json.dumps({"scores": {"Response A": SCORES, "response b": SCORES}}),
    json.dumps({"A": {k.upper(): str(v) for k, v in SCORES.items()}, "B": SCORES}),
])
def test_parse_scores_accepts_reasonable_json(text: str) -> None:
    """Plain, fenced, nested and differently-cased answers all parse to the four integers."""
    parsed = jd.parse_scores(text, ["A", "B"])
    assert parsed.error is None
    assert parsed.scores["A"] == SCORES and parsed.scores["B"] == SCORES


def test_unparseable_answer_is_unscored_never_zero() -> None:
    """Prose with no JSON leaves every label None (UNSCORED) with the reason."""
    parsed = jd.parse_scores("They are all great!", ["A", "B"])
    assert parsed.scores == {"A": None, "B": None}
    assert parsed.error and "no JSON" in parsed.error


@pytest.mark.parametrize("bad,reason", [
    ({**SCORES, "accuracy": 6}, "accuracy"),
    ({**SCORES, "accuracy": -1}, "accuracy"),
    ({**SCORES, "accuracy": 2.5}, "accuracy"),
    ({**SCORES, "accuracy": True}, "accuracy"),
    ({k: v for k, v in SCORES.items() if k != "actionability"}, "actionability missing"),
    ("great", "not an object"),
])
def test_invalid_scores_make_only_that_label_unscored(bad: object, reason: str) -> None:
    """An out-of-range, fractional, boolean or missing dimension voids that label alone."""
    parsed = jd.parse_scores(json.dumps({"A": bad, "B": SCORES}), ["A", "B"])
    assert parsed.scores["A"] is None and reason in parsed.reasons["A"]
    assert parsed.scores["B"] == SCORES


def test_label_the_judge_skipped_is_unscored() -> None:
    """A label missing from the answer is UNSCORED, not dropped and not zero."""
    parsed = jd.parse_scores(json.dumps({"A": SCORES}), ["A", "B", "C"])
    assert parsed.scores["B"] is None and parsed.scores["C"] is None
    assert "did not score" in parsed.reasons["B"]


@pytest.mark.parametrize("agent,model,family", [
    ("claude", None, "anthropic"), ("claude-opus", None, "anthropic"), ("codex", None, "openai"),
    ("gemini", None, "google"), ("cursor-agent", None, "cursor"),
    ("cursor-agent", "gpt-5", "openai"), ("cursor-agent-sonnet-4", None, "anthropic"),
    ("aider", "claude-sonnet-4-5", "anthropic"), ("cmd-mybot", None, "cmd-mybot"),
    ("codex", "o3", "openai"),
])
def test_family_of(agent: str, model: str | None, family: str) -> None:
    """Families come from the reported model first, then from the agent's name."""
    assert jd.family_of(agent, model) == family


def test_family_rule_keeps_judges_off_their_own_family() -> None:
    """With judges of two families, nobody judges its own family's answer."""
    a = jd.assign_judges({"claude": "anthropic", "codex": "openai", "gemini": "google"},
                         {"claude": "anthropic", "codex": "openai"})
    assert a.by_judge == {"claude": ["codex", "gemini"], "codex": ["claude", "gemini"]}
    assert not any(a.own_family.values())


def test_family_rule_falls_back_when_no_other_judge_exists() -> None:
    """A lone judge scores its own family's answer too, and the verdict says so."""
    a = jd.assign_judges({"claude": "anthropic", "codex": "openai"}, {"claude": "anthropic"})
    assert a.by_judge == {"claude": ["claude", "codex"]}
    assert a.own_family == {"claude": True, "codex": False}
