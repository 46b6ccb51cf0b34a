"""The offline judge: a deterministic verdict from an attempt's recorded facts.

It scores the four 0-5 dimensions of the judge vocabulary (completeness, accuracy, actionability,
no_hallucinations) from the diff, the completion signals, the hidden and regression test results,
conflict markers, TODO/stub markers and names the tests report missing. Same facts, same verdict,
on any machine. The run appends its output as a ``judge.verdict`` entry at run end:

    facts = attempt_facts_from_entries(journal.entries(run=run_id), run_id)
    for attempt_id in sorted(facts):
        journal.append("judge.verdict", {"attempt": attempt_id, **offline_verdict(facts[attempt_id])},
                       run=run_id, task=facts[attempt_id]["task"])

The rules are listed in docs/SCORING.md ("Offline judge").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from evaluators.facts import attempt_facts_from_entries

JUDGE_NAME = "offline"
JUDGE_VERSION = "1.0.0"

STUB_PENALTY_MAX = 2  # completeness loses 1 per stub marker, at most this much
REGRESSION_PENALTY = 2  # accuracy points lost when PASS_TO_PASS tests broke
JUDGE_CRASH_PENALTY = 1  # accuracy points lost when the agent crashed
CONFLICT_PENALTY = 3  # actionability points lost when the patch conflicts or failed to apply
SCOPE_PENALTY_MAX = 2  # actionability loses 1 per out-of-scope file, at most this much
TODO_PENALTY = 1  # actionability points lost when TODO/FIXME/XXX were left in added lines
HALLUCINATION_PENALTY = 2  # no_hallucinations points lost per hallucinated name

# The facts the verdict reads (a caller building facts by hand must supply each).
FACT_KEYS = ("hidden_counts", "hidden_ran", "hidden_passed", "signals_total", "signals_passed",
             "stub_markers", "todo_markers", "regressions", "hallucinated_names",
             "out_of_scope_files", "conflict", "changed_files", "crashed")

__all__ = ["FACT_KEYS", "JUDGE_NAME", "JUDGE_VERSION", "attempt_facts_from_entries", "offline_verdict"]


def _points(x: float) -> int:
    """Round half up and clamp to 0..5."""
    return max(0, min(5, math.floor(x + 0.5)))


def _fraction(passed: int, total: int) -> float:
    return passed / total if total > 0 else 0.0


def offline_verdict(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict for one attempt: ``{"judge", "version", "scores", "raw", "notes"}``.

    ``facts`` is one value of :func:`attempt_facts_from_entries`, or any map with the keys in
    ``FACT_KEYS``. The result plus the attempt id is the ``data`` of a ``judge.verdict`` entry.
    """
    notes: list[str] = []
    counts = facts["hidden_counts"]
    hidden_total = int(counts["passed"]) + int(counts["failed"]) + int(counts["error"])
    if not facts["hidden_ran"]:
        hidden = 0.0
        notes.append("hidden tests did not run")
    elif hidden_total == 0:
        hidden = 1.0 if facts["hidden_passed"] else 0.0
    else:
        hidden = _fraction(int(counts["passed"]), hidden_total)
    signals_total = int(facts["signals_total"])
    signals = _fraction(int(facts["signals_passed"]), signals_total) if signals_total else hidden
    stubs, todos = int(facts["stub_markers"]), int(facts["todo_markers"])
    regressions = len(facts["regressions"])
    hallucinated = len(facts["hallucinated_names"])
    out_of_scope = len(facts["out_of_scope_files"])
    conflict = bool(facts["conflict"])
    empty = not facts["changed_files"]

    if empty:
        scores = dict.fromkeys(("completeness", "accuracy", "actionability", "no_hallucinations"), 0)
        notes.append("empty diff: there is no change to judge")
    else:
        completeness = _points(5 * (0.5 * hidden + 0.5 * signals)) - min(STUB_PENALTY_MAX, stubs)
        accuracy = (_points(5 * hidden) - (REGRESSION_PENALTY if regressions else 0)
                    - (JUDGE_CRASH_PENALTY if facts["crashed"] else 0))
        if conflict:
            accuracy = 0
        actionability = (5 - (CONFLICT_PENALTY if conflict else 0)
                         - min(SCOPE_PENALTY_MAX, out_of_scope) - (TODO_PENALTY if todos else 0))
        no_hallucinations = 5 - HALLUCINATION_PENALTY * hallucinated
        scores = {"completeness": _points(completeness), "accuracy": _points(accuracy),
                  "actionability": _points(actionability),
                  "no_hallucinations": _points(no_hallucinations)}
        if stubs:
            notes.append(f"{stubs} stub marker(s) in added lines")
        if todos:
            notes.append(f"{todos} TODO/FIXME/XXX marker(s) in added lines")
        if regressions:
            notes.append(f"{regressions} regression test(s) broke")
        if conflict:
            notes.append("conflict markers or a patch that failed to apply")
        if out_of_scope:
            notes.append(f"{out_of_scope} changed file(s) outside the task's files")
        if hallucinated:
            notes.append("tests report missing names the patch uses: "
                         + ", ".join(facts["hallucinated_names"][:5]))
        if facts["crashed"]:
            notes.append("the agent crashed")
    measured = {"hidden_fraction": round(hidden, 6), "signal_fraction": round(signals, 6),
                "stub_markers": stubs, "todo_markers": todos, "regressions": regressions,
                "hallucinated_names": hallucinated, "out_of_scope_files": out_of_scope,
                "conflict": conflict, "empty_diff": empty, "crashed": bool(facts["crashed"])}
    raw = json.dumps({"judge": JUDGE_NAME, "version": JUDGE_VERSION, "measured": measured,
                      "scores": scores}, sort_keys=True, separators=(",", ":"))
    return {"judge": JUDGE_NAME, "version": JUDGE_VERSION, "scores": scores, "raw": raw,
            "notes": notes}
