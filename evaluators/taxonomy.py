"""Failure taxonomy: exactly one category per failed attempt, from recorded facts.

The rules are tried in ``PRIORITY`` order and the first that holds names the category; the last,
``incomplete``, always holds. docs/SCORING.md explains each rule and why the order is what it is.
"""

from __future__ import annotations

from evaluators.facts import AttemptFacts

PRIORITY = (
    "grading_tampered",
    "timeout",
    "resource_limit",
    "conflict",
    "test_regression",
    "hallucination",
    "scope_creep",
    "context_miss",
    "orientation_miss",
    "incomplete",
)
CATEGORIES = tuple(sorted(PRIORITY))
# Absent from the views of older runs: each category and the FoldState flag that says the run
# is recent enough to have it.
NEW_CATEGORIES = {"grading_tampered": "outcome_rule", "resource_limit": "limits_rule"}

ORIENTATION_MIN_READS = 3  # distinct files read before "mostly reading" can apply
ORIENTATION_MAX_CHANGED_LINES = 2  # "few edits": at most this many lines added + removed
DETAIL_LIST_LIMIT = 5  # names listed in a details string before "(+N more)"


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:DETAIL_LIST_LIMIT])
    more = len(items) - DETAIL_LIST_LIMIT
    return shown + (f" (+{more} more)" if more > 0 else "")


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def classify(f: AttemptFacts) -> tuple[str, str]:
    """(category, details) for a failed attempt. Raises ValueError for a passed one."""
    if f.passed:
        raise ValueError(f"attempt {f.attempt} passed; only failed attempts are classified")
    if f.grading_anomalies or f.canaries_passed:
        why = list(f.grading_anomalies)
        if f.canaries_passed:
            why.append(f"{f.canaries_passed} canary(ies) passed with their originals (outcomes "
                       "forged or answered from the tests)")
        return "grading_tampered", f"the test outcomes cannot be trusted: {_listed(why)}"
    if f.timed_out:
        return "timeout", f"agent ran {_fmt(f.wall_s)} s against a budget of {_fmt(f.budget_s)} s"
    if f.limits_hit:
        return "resource_limit", f"ran into its resource limit(s): {_listed(f.limits_hit)}"
    if f.conflict:
        why = "its edits failed to apply" if f.apply_failed else "it left merge-conflict markers"
        return "conflict", why
    if f.regressions:
        return "test_regression", (f"{len(f.regressions)} test(s) passed before the agent and "
                                   f"fail after: {_listed(f.regressions)}")
    if f.hallucinated_names:
        return "hallucination", ("tests fail on names the patch uses that do not exist: "
                                 f"{_listed(f.hallucinated_names)}")
    if f.out_of_scope_files or f.writes_outside_worktree:
        parts = []
        if f.out_of_scope_files:
            parts.append(f"edited files outside the task's files: {_listed(f.out_of_scope_files)}")
        if f.writes_outside_worktree:
            parts.append(f"wrote outside the worktree: {_listed(f.writes_outside_worktree)}")
        return "scope_creep", "; ".join(parts)
    if f.observed and f.opened_named_files is False:
        return "context_miss", f"never opened the files the task names: {_listed(f.named_files)}"
    if (f.distinct_reads >= ORIENTATION_MIN_READS
            and f.changed_lines <= ORIENTATION_MAX_CHANGED_LINES):
        return "orientation_miss", (f"read {f.distinct_reads} files but changed only "
                                    f"{f.changed_lines} line(s)")
    return "incomplete", _incomplete_details(f)


def _incomplete_details(f: AttemptFacts) -> str:
    if f.status is None:
        return "the attempt never finished"
    if f.status != "completed":
        return f"attempt {f.status}" + (f": {f.error}" if f.error else "")
    parts = []
    if f.crashed:
        parts.append("agent crashed")
    if not f.changed_files:
        parts.append("no changes")
    if not f.hidden_ran:
        parts.append("hidden tests did not run")
    elif not f.hidden_passed:
        c = f.hidden_counts
        parts.append(f"hidden tests: {c['passed']} passed, {c['failed']} failed, "
                     f"{c['error']} errors")
    if f.signals_passed < f.signals_total:
        parts.append(f"signals: {f.signals_passed}/{f.signals_total} passed")
    if f.baseline_ran and not f.regression_ran:
        parts.append("regression suite did not run after the agent")
    return "; ".join(parts) if parts else "not all checks passed"
