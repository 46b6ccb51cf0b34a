"""compare(): score and component deltas, tasks newly passing/failing, task-set warnings."""

from __future__ import annotations

from evaluators.compare import compare
from evaluators.views import compute_views
from tests.evaluators.builders import RunBuilder, task


def _views(run: str, outcomes: dict[str, bool], tasks: list[dict[str, object]] | None = None,
           finish: bool = True) -> dict[str, object]:
    b = RunBuilder(run=run)
    b.started(tasks or [task(t) for t in outcomes])
    for tid, ok in outcomes.items():
        b.attempt(tid, hidden=(2, 0, 0) if ok else (1, 1, 0), wall_s=50, cost_usd=0.5)
    if finish:
        b.finished()
    return compute_views(b.entries)


def test_deltas_and_task_changes() -> None:
    """Deltas are B - A; tasks that flipped are listed as newly passing or failing."""
    a = _views("r-a", {"t1": True, "t2": False, "t3": True})
    b = _views("r-b", {"t1": False, "t2": True, "t3": True})
    d = compare(a, b)
    assert d["run_a"] == "r-a" and d["run_b"] == "r-b"
    assert d["tasks"]["newly_passing"] == ["t2"] and d["tasks"]["newly_failing"] == ["t1"]
    assert d["score"]["delta"] == 0.0 and d["components"]["task_success"]["delta"] == 0.0
    assert d["same_task_set"] is True and d["warnings"] == []
    c = compare(a, _views("r-c", {"t1": True, "t2": True, "t3": True}))
    # TS 2/3 -> 1, E 0.5*2/3 -> 0.5 : score delta = 0.5*(1/3) + 0.2*(0.5/3)
    assert c["components"]["task_success"]["delta"] == round(1 - 2 / 3, 6)
    assert c["score"]["delta"] == round(0.5 / 3 + 0.1 / 3, 6)
    assert c["per_tier"]["smoke"]["delta"] == round(1 - 2 / 3, 6)
    assert c["per_tier"]["stretch"]["delta"] is None


def test_warns_when_task_sets_or_hashes_differ() -> None:
    """Different task ids or a changed task hash produce warnings and same_task_set false."""
    a = _views("r-a", {"t1": True, "t2": True})
    changed = task("t1")
    changed["hash"] = "ff" * 32
    b = _views("r-b", {"t1": True, "t3": True}, tasks=[changed, task("t3")])
    d = compare(a, b)
    assert d["same_task_set"] is False
    assert d["task_hashes_differ"] == ["t1"]
    assert d["tasks"]["only_in_a"] == ["t2"] and d["tasks"]["only_in_b"] == ["t3"]
    assert any("task sets differ" in w for w in d["warnings"])
    assert any("hashes differ" in w and "t1" in w for w in d["warnings"])


def test_warns_about_unfinished_run() -> None:
    """Comparing with an unfinished run says so."""
    a = _views("r-a", {"t1": True})
    b = _views("r-b", {"t1": True}, finish=False)
    assert any("r-b" in w and "unfinished" in w for w in compare(a, b)["warnings"])


def test_partial_pass_rate_is_not_passing() -> None:
    """With repeats, a task passes only when every attempt passed; rate changes are listed."""
    a = RunBuilder(run="r-a")
    a.started([task("t1")], repeat=2)
    a.attempt("t1", repeat=1)
    a.attempt("t1", repeat=2, hidden=(0, 1, 0))
    b = RunBuilder(run="r-b")
    b.started([task("t1")], repeat=2)
    b.attempt("t1", repeat=1)
    b.attempt("t1", repeat=2)
    d = compare(compute_views(a.entries), compute_views(b.entries))
    assert d["tasks"]["newly_passing"] == ["t1"]
    assert d["tasks"]["changed"] == [{"task": "t1", "a": 0.5, "b": 1.0, "delta": 0.5}]
