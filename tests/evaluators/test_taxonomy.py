"""The failure taxonomy: every category reachable from recorded facts, one per failed attempt."""

from __future__ import annotations

from typing import Any

import pytest

from evaluators.facts import attempt_facts_from_entries
from evaluators.taxonomy import CATEGORIES, PRIORITY
from evaluators.views import compute_views
from tests.evaluators.builders import RunBuilder, task

FAIL = {"hidden": (0, 2, 0)}
IMPORT_ERR = "ImportError: cannot import name 'frobnicate' from 'calc' (src/calc.py)"

# One recorded failure per category: the attempt() arguments that produce it.
CASES: dict[str, dict[str, Any]] = {
    "timeout": {**FAIL, "timed_out": True, "wall_s": 100.0},
    "resource_limit": {**FAIL, "extra": [("limit.hit", {
        "phase": "agent", "which": "memory", "value": 1 << 28, "mechanism": "cgroup-v1",
        "detail": "1 process(es) killed by the OOM killer"})]},
    "conflict": {**FAIL, "conflict_markers": True},
    "test_regression": {"after": {"tests/test_base.py::test_one": "passed",
                                  "tests/test_base.py::test_two": "failed"}},
    "hallucination": {"hidden": (0, 2, 0), "hidden_messages": [IMPORT_ERR],
                      "patch": "--- a/src/calc.py\n+++ b/src/calc.py\n+    return frobnicate(x)\n"},
    "scope_creep": {**FAIL, "files": [("src/calc.py", 2, 0), ("setup.py", 5, 1)]},
    "context_miss": {**FAIL, "files": [], "reads": ["README.md", "setup.cfg"]},
    "orientation_miss": {**FAIL, "files": [("src/calc.py", 1, 1)],
                         "reads": ["src/calc.py", "README.md", "docs/guide.md", "setup.cfg"]},
    "incomplete": {**FAIL},
    # the reporter's end record never arrived, yet the record says passed (exit 0 under pytest)
    "grading_tampered": {"hidden": (3, 0, 0), "hidden_extra": {
        "outcomes": "reporter", "timed_out": False,
        "report": {"started": True, "ended": False, "exitstatus": None, "collect_errors": 0}}},
}


def _categorise(**kwargs: Any) -> tuple[str, str]:
    b = RunBuilder()
    b.started([task("t1", owned=["src/calc.py"])])
    b.attempt("t1", **kwargs)
    b.finished()
    v = compute_views(b.entries)
    assert len(v["failures"]) == 1
    f = v["failures"][0]
    return f["category"], f["details"]


@pytest.mark.parametrize("category", sorted(CASES))
def test_each_category_is_reachable_from_recorded_facts(category: str) -> None:
    """Entries built for a category classify as exactly that category."""
    got, details = _categorise(**CASES[category])
    assert got == category
    assert details


def test_the_cases_cover_every_category() -> None:
    """The closed set has ten categories and the priority order lists each once."""
    assert set(CASES) == set(CATEGORIES) == set(PRIORITY)
    assert len(PRIORITY) == 10 and PRIORITY[-1] == "incomplete"


@pytest.mark.parametrize("first, second", list(zip(PRIORITY, PRIORITY[1:-1], strict=False)))
def test_priority_order_breaks_ties(first: str, second: str) -> None:
    """An attempt showing two failure modes gets the one earlier in PRIORITY."""
    merged = {**CASES[second], **CASES[first]}
    if {first, second} == {"scope_creep", "context_miss"}:
        merged["writes"] = [("/etc/passwd", False)]
    if {first, second} == {"context_miss", "orientation_miss"}:
        merged["reads"] = ["README.md", "setup.cfg", "docs/guide.md"]  # many reads, none named
    got, _ = _categorise(**merged)
    assert got == first


def test_conflict_from_apply_failure_and_from_markers_in_patch() -> None:
    """Edits that failed to apply, or conflict markers found in the patch, are a conflict."""
    assert _categorise(**FAIL, apply_failed=True) == ("conflict", "its edits failed to apply")
    patch = "--- a/src/calc.py\n+++ b/src/calc.py\n+<<<<<<< HEAD\n+a = 1\n+=======\n+a = 2\n+>>>>>>> x\n"
    assert _categorise(**FAIL, patch=patch)[0] == "conflict"


def test_regression_details_name_the_broken_tests() -> None:
    """test_regression details list the PASS_TO_PASS tests that broke."""
    _, details = _categorise(**CASES["test_regression"])
    assert "tests/test_base.py::test_two" in details and "1 test(s)" in details


def test_import_error_for_a_name_the_patch_never_used_is_not_hallucination() -> None:
    """A missing name the agent never wrote (the feature is simply absent) is incomplete."""
    got, _ = _categorise(hidden=(0, 2, 0), hidden_messages=[IMPORT_ERR])
    assert got == "incomplete"


@pytest.mark.parametrize("message", [
    "ModuleNotFoundError: No module named 'fancylib'",
    "NameError: name 'fancylib' is not defined",
    "AttributeError: module 'calc' has no attribute 'fancylib'",
])
def test_hallucination_recognises_import_name_and_attribute_errors(message: str) -> None:
    """Each missing-name error form counts when the patch uses that name."""
    patch = "--- a/src/calc.py\n+++ b/src/calc.py\n+import fancylib\n"
    got, details = _categorise(hidden=(0, 1, 0), hidden_messages=[message], patch=patch)
    assert got == "hallucination" and "fancylib" in details


def test_write_outside_worktree_is_scope_creep() -> None:
    """A write outside the worktree is scope creep even when the diff stays in scope."""
    got, details = _categorise(**FAIL, writes=[("/tmp/elsewhere.txt", False)])
    assert got == "scope_creep" and "/tmp/elsewhere.txt" in details


def test_unobserved_attempt_is_never_context_miss() -> None:
    """Without captured activity there is no evidence of what was opened: incomplete."""
    got, _ = _categorise(**FAIL, files=[], reads=[], trace="none")
    assert got == "incomplete"


def test_glob_owned_files_and_expected_files_are_in_scope() -> None:
    """Owned globs and expected_files_modified both count as the task's files."""
    b = RunBuilder()
    b.started([task("t1", owned=["src/*.py"], expected=["README.md"])])
    b.attempt("t1", **FAIL, files=[("src/calc.py", 1, 0), ("README.md", 1, 0)])
    facts = attempt_facts_from_entries(b.entries)
    only = next(iter(facts.values()))
    assert only["out_of_scope_files"] == []
    assert compute_views(b.entries)["failures"][0]["category"] == "incomplete"


def test_unfinished_attempt_is_incomplete_with_reason() -> None:
    """An attempt without attempt.finished fails as incomplete, saying it never finished."""
    assert _categorise(status=None) == ("incomplete", "the attempt never finished")


def test_counts_cover_every_failed_attempt_exactly_once() -> None:
    """One failure row per failed attempt; counts per category sum to the failed count."""
    b = RunBuilder()
    b.started([task(f"t{i}", owned=["src/calc.py"]) for i in range(len(CASES) + 1)])
    for i, kwargs in enumerate(CASES.values()):
        b.attempt(f"t{i}", **kwargs)
    b.attempt(f"t{len(CASES)}")  # one passing attempt
    v = compute_views(b.entries)
    counts = v["taxonomy"]["counts"]
    assert sum(counts.values()) == len(v["failures"]) == v["counts"]["failed"] == len(CASES)
    assert all(counts[c] == 1 for c in CATEGORIES)
    assert len({f["attempt"] for f in v["failures"]}) == len(CASES)
