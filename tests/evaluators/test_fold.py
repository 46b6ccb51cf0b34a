"""The fold: hostile entry data never crashes it, and fold/fold_all agree."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluators.fold import KNOWN_KINDS, fold, fold_all, new_state, parse_attempt_id
from evaluators.structure import trusted
from evaluators.views import compute_views, view
from ledger.journal.codec import encode_entry
from tests.evaluators.builders import RUN, RunBuilder, task

AID = f"{RUN}/t1/demo/1/1"
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=8),
                    st.floats(allow_nan=False, allow_infinity=False), st.binary(max_size=4))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
FIELDS = ["attempt", "agent", "repeat", "try", "tier", "path", "resolved", "in_worktree",
          "wall_s", "timed_out", "crashed", "orphans", "telemetry", "cost_usd", "index", "passed",
          "suite", "counts", "tests", "files", "patch", "scores", "judge", "version",
          "attestation", "status", "error", "evaluator", "view", "tasks", "config", "agents"]
data_maps = st.dictionaries(st.sampled_from(FIELDS), values, max_size=8).map(
    lambda d: {**d, "attempt": d.get("attempt", AID)} if d.get("attempt") is None else d)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(st.tuples(st.sampled_from(sorted(KNOWN_KINDS)), data_maps), max_size=12))
def test_hostile_field_values_never_crash_the_evaluators(
        entries: list[tuple[str, dict[str, Any]]]) -> None:
    """Any msgpack value in any field: the fold counts or uses it; views still compute."""
    b = RunBuilder()
    b.started([task("t1")])
    for kind, data in entries:
        b.add(kind, data, task="t1")
    v = compute_views(b.entries)
    state = fold_all(b.entries)
    # every entry is either folded (counted in the view) or set aside as injected (structure.py)
    assert v["entries"]["total"] == state.entries == len(b.entries) - len(state.injected)
    assert sum(v["entries"]["malformed"].values()) <= len(entries)


def test_fold_step_by_step_equals_fold_all() -> None:
    """Folding one entry at a time gives the same view as the unrolled loop."""
    b = RunBuilder()
    b.started([task("t1"), task("t2")])
    b.attempt("t1")
    b.add("weird", {})
    b.attempt("t2", hidden=(0, 1, 0))
    b.add("agent.finished", {"attempt": "x/y", "wall_s": "bad"})
    other = encode_entry(seq=99, ts=0, kind="run.started", data={}, run="r-other")
    entries = [*b.entries, other]
    state = new_state()
    for e in trusted(entries).entries:  # fold_all folds what the run's structure places
        state = fold(state, e)
    assert view(state) == view(fold_all(entries))
    assert state.foreign == 1 and state.unknown == {"weird": 1}
    assert [f.attempt for f in fold_all(entries).injected] == ["x/y"]


def test_parse_attempt_id_shapes() -> None:
    """Attempt ids split from the right; other shapes give None."""
    assert parse_attempt_id("r-1/task/agent/2/3") == ("r-1", "task", "agent", 2, 3)
    assert parse_attempt_id("r-1/task/agent/x/3") is None
    assert parse_attempt_id("task/agent/1/1") is None
    assert parse_attempt_id("r//agent/1/1") is None
