"""The offline judge: deterministic verdicts from recorded facts, fed back as judge.verdict."""

from __future__ import annotations

import json
from typing import Any

from evaluators.judge import JUDGE_NAME, JUDGE_VERSION, attempt_facts_from_entries, offline_verdict
from evaluators.views import compute_views
from ledger.journal.codec import encode_entry
from tests.evaluators.builders import RunBuilder, task


def _verdict(**kwargs: Any) -> dict[str, Any]:
    b = RunBuilder()
    b.started([task("t1", owned=["src/calc.py"])])
    aid = b.attempt("t1", **kwargs)
    facts = attempt_facts_from_entries(b.entries)
    return offline_verdict(facts[aid])


def _patch(*added: str) -> str:
    return "--- a/src/calc.py\n+++ b/src/calc.py\n" + "".join(f"+{line}\n" for line in added)


def test_clean_passing_attempt_gets_full_marks() -> None:
    """All tests and signals pass, no markers: 5 on every dimension."""
    v = _verdict()
    assert v["scores"] == {"completeness": 5, "accuracy": 5, "actionability": 5,
                           "no_hallucinations": 5}
    assert (v["judge"], v["version"]) == (JUDGE_NAME, JUDGE_VERSION)
    assert v["notes"] == []


def test_partial_results_scale_completeness_and_accuracy() -> None:
    """Half the hidden tests and half the signals give 3 (2.5 rounded half up)."""
    v = _verdict(hidden=(1, 1, 0), signals=(True, False))
    assert v["scores"]["completeness"] == 3 and v["scores"]["accuracy"] == 3
    v = _verdict(hidden=(1, 3, 0), signals=(True, True))  # 0.5*0.25 + 0.5*1 = 0.625 -> 3.125
    assert v["scores"]["completeness"] == 3 and v["scores"]["accuracy"] == 1


def test_stubs_and_todos_cost_points() -> None:
    """A stub costs completeness; a TODO costs actionability."""
    v = _verdict(patch=_patch("def f():", "    raise NotImplementedError", "# TODO: finish"))
    assert v["scores"]["completeness"] == 4 and v["scores"]["actionability"] == 4
    assert any("stub" in n for n in v["notes"]) and any("TODO" in n for n in v["notes"])


def test_regression_costs_accuracy() -> None:
    """A broken PASS_TO_PASS test costs two accuracy points."""
    v = _verdict(after={"tests/test_base.py::test_one": "passed",
                        "tests/test_base.py::test_two": "failed"})
    assert v["scores"]["accuracy"] == 3


def test_conflict_zeroes_accuracy_and_costs_actionability() -> None:
    """Conflict markers: accuracy 0, actionability 5 - 3."""
    v = _verdict(conflict_markers=True)
    assert v["scores"]["accuracy"] == 0 and v["scores"]["actionability"] == 2


def test_hallucinated_name_costs_two_points() -> None:
    """One missing name the patch uses: no_hallucinations 3."""
    v = _verdict(hidden=(0, 1, 0), hidden_messages=["NameError: name 'magic' is not defined"],
                 patch=_patch("x = magic(1)"))
    assert v["scores"]["no_hallucinations"] == 3


def test_out_of_scope_files_cost_actionability() -> None:
    """Each changed file outside the task's files costs a point, at most two."""
    v = _verdict(files=[("src/calc.py", 1, 0), ("a.py", 1, 0), ("b.py", 1, 0), ("c.py", 1, 0)])
    assert v["scores"]["actionability"] == 3


def test_empty_diff_scores_zero() -> None:
    """No change at all: nothing to judge, zero on every dimension."""
    v = _verdict(files=[], hidden=(0, 1, 0))
    assert set(v["scores"].values()) == {0}
    assert any("empty diff" in n for n in v["notes"])


def test_verdict_is_deterministic_and_raw_is_canonical_json() -> None:
    """Same facts, same verdict bytes; raw is sorted compact JSON of what was measured."""
    a = _verdict(hidden=(2, 1, 0))
    b = _verdict(hidden=(2, 1, 0))
    assert a == b
    raw = json.loads(a["raw"])
    assert raw["measured"]["hidden_fraction"] == round(2 / 3, 6)
    assert a["raw"] == json.dumps(raw, sort_keys=True, separators=(",", ":"))


def test_verdict_entries_feed_code_quality() -> None:
    """Appending the offline verdicts as judge.verdict entries makes CodeQuality their mean."""
    b = RunBuilder()
    b.started([task("t1"), task("t2")])
    b.attempt("t1")
    b.attempt("t2", hidden=(1, 1, 0), signals=(True, False))
    assert compute_views(b.entries)["components"]["code_quality"] == 0.0
    facts = attempt_facts_from_entries(b.entries, b.run)
    for aid in sorted(facts):
        data = {"attempt": aid, **offline_verdict(facts[aid])}
        encode_entry(seq=0, ts=0, kind="judge.verdict", data=data)  # storable as an entry
        b.add("judge.verdict", data, task=facts[aid]["task"])
    v = compute_views(b.entries)
    # t1: 20/20; t2: completeness 3, accuracy 3, actionability 5, no_hallucinations 5 -> 16/20
    assert v["components"]["code_quality"] == (1.0 + 0.8) / 2
    assert v["attempts"][0]["judge"]["judge"] == JUDGE_NAME


def test_facts_cover_scored_attempts_only() -> None:
    """attempt_facts_from_entries keys are the scored attempt ids of the run."""
    b = RunBuilder()
    b.started([task("t1")])
    first = b.attempt("t1", try_no=1, status=None)
    second = b.attempt("t1", try_no=2)
    facts = attempt_facts_from_entries(b.entries)
    assert list(facts) == [second] and first not in facts
    assert facts[second]["passed"] is True and facts[second]["task"] == "t1"


def test_verdict_reads_only_the_documented_fact_keys() -> None:
    """A facts map with exactly FACT_KEYS is enough (callers outside the fold rely on it)."""
    from evaluators.judge import FACT_KEYS

    b = RunBuilder()
    b.started([task("t1")])
    aid = b.attempt("t1", hidden=(1, 1, 0))
    full = attempt_facts_from_entries(b.entries)[aid]
    assert offline_verdict({k: full[k] for k in FACT_KEYS}) == offline_verdict(full)
