"""compute_views and replay: bad input, stable bytes, and field-by-field replay diffs."""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import judge, score, taxonomy, views
from evaluators.fold import fold_all
from evaluators.views import (
    EVALUATOR_NAME,
    EVALUATOR_VERSION,
    compute_views,
    diff_values,
    recorded_view_data,
    replay,
)
from ledger.journal.codec import canonical_bytes, decode_entry
from tests.evaluators.builders import RunBuilder, task

ROOT = Path(__file__).resolve().parents[2]


def sample_run() -> RunBuilder:
    """A small finished run touching every component, with a recorded view at its end."""
    b = RunBuilder()
    b.started([task("t1"), task("t2", tier="standard", max_duration_s=60.0),
               task("t3", tier="stretch")], agents=("demo", "other"), repeat=2)
    for r in (1, 2):
        b.attempt("t1", repeat=r, wall_s=12.5 * r, cost_usd=0.03 * r,
                  judge={"completeness": 4, "accuracy": 5, "actionability": 3,
                         "no_hallucinations": 5}, attestation="CLEAN")
        b.attempt("t2", agent="other", repeat=r, tier="standard", hidden=(2, r - 1, 0),
                  wall_s=7.0 / 3, cost_usd=None, orphans=r - 1)
        b.attempt("t3", repeat=r, tier="stretch", hidden=(0, 1, 0), files=[],
                  reads=["a.py", "b.py", "c.py"], attestation="UNOBSERVED")
    b.finished()
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    return b


def test_view_is_storable_as_an_entry_and_json_stable() -> None:
    """The view encodes canonically, and JSON-dumps to the same bytes twice."""
    v = compute_views(sample_run().entries)
    canonical_bytes(v)
    assert json.dumps(v, sort_keys=True) == json.dumps(compute_views(sample_run().entries),
                                                       sort_keys=True)
    assert v["evaluator"] == {"name": EVALUATOR_NAME, "version": EVALUATOR_VERSION}


def test_floats_are_rounded_to_the_documented_digits() -> None:
    """No float in a view carries more than ROUND_DIGITS decimals, and none is -0.0."""
    def walk(x: Any) -> None:
        if isinstance(x, float):
            assert x == round(x, views.ROUND_DIGITS) and str(x) != "-0.0"
        elif isinstance(x, dict):
            for value in x.values():
                walk(value)
        elif isinstance(x, list):
            for value in x:
                walk(value)
    v = compute_views(sample_run().entries)
    assert v["per_agent"]["other"]["wall_s_total"] == round(14.0 / 3, 6)
    walk(v)


_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from tests.evaluators.test_views import sample_run
from evaluators.views import compute_views, replay
b = sample_run()
sys.stdout.write(json.dumps(compute_views(b.entries), sort_keys=True))
sys.stdout.write(json.dumps(replay(b.entries, b.run).as_dict(), sort_keys=True))
"""


def test_views_are_byte_identical_under_different_hash_seeds() -> None:
    """Two interpreters with different PYTHONHASHSEED print identical view and replay bytes."""
    outs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", _SCRIPT.format(root=str(ROOT))], env=env,
                              capture_output=True, check=True, cwd=ROOT)
        outs.append(proc.stdout)
    b = sample_run()
    here = (json.dumps(compute_views(b.entries), sort_keys=True)
            + json.dumps(replay(b.entries, b.run).as_dict(), sort_keys=True)).encode()
    assert outs[0] == outs[1] == here


def test_unknown_kinds_are_ignored_and_counted() -> None:
    """Entries of unknown kinds change no figure and are counted by kind."""
    plain = RunBuilder()
    plain.started([task("t1")])
    plain.attempt("t1")
    noisy = RunBuilder()
    noisy.started([task("t1")])
    noisy.add("future.thing", {"attempt": "x", "wall_s": "not a number"})
    noisy.attempt("t1")
    noisy.add("future.thing", {})
    noisy.add("another", {"a": 1})
    a, b = compute_views(plain.entries), compute_views(noisy.entries)
    assert b["entries"]["unknown"] == {"another": 1, "future.thing": 2}
    for key in ("score", "components", "attempts", "failures", "per_tier"):
        assert a[key] == b[key]


def test_malformed_entries_are_ignored_and_counted() -> None:
    """A known kind with wrongly typed fields is skipped and counted, not a crash."""
    b = RunBuilder()
    b.started([task("t1")])
    aid = b.attempt("t1", wall_s=10.0)
    b.add("agent.finished", {"attempt": aid, "wall_s": "ten", "telemetry": True})
    b.add("judge.verdict", {"attempt": aid, "judge": "x", "version": "1",
                            "scores": {"completeness": 9, "accuracy": 5, "actionability": 5,
                                       "no_hallucinations": 5}})
    b.add("attestation", {"attempt": aid, "attestation": {"verdict": "MAYBE"}})
    b.add("diff", {"attempt": 7})
    b.add("fs.read", {"path": "x"})
    v = compute_views(b.entries)
    # the second agent.finished of the attempt is set aside by the structure rule before the fold
    assert v["entries"]["malformed"] == {"attestation": 1, "diff": 1, "fs.read": 1,
                                         "judge.verdict": 1}
    assert [f.kind for f in fold_all(b.entries).injected] == ["agent.finished"]
    row = v["attempts"][0]
    assert row["wall_s"] == 10.0 and row["judge"] is None and row["attestation"] is None


def test_unfinished_run_reports_what_is_known() -> None:
    """Without run.finished the status is unfinished and the attempts so far are scored."""
    b = RunBuilder()
    b.started([task("t1"), task("t2")])
    b.attempt("t1")
    b.attempt("t2", status=None, agent_finished=False, hidden=None)
    v = compute_views(b.entries)
    assert v["status"] == "unfinished" and v["counts"]["attempts"] == 2
    assert v["failures"][0]["details"] == "the attempt never finished"
    b.finished("interrupted")
    assert compute_views(b.entries)["status"] == "interrupted"
    b.add("run.resumed", {"remaining": []})
    assert compute_views(b.entries)["status"] == "unfinished"
    b.finished()
    assert compute_views(b.entries)["status"] == "finished"


def test_entries_of_other_runs_are_skipped() -> None:
    """A run's view ignores entries filed under another run (and under none)."""
    a, other = RunBuilder(), RunBuilder(run="r-other")
    a.started([task("t1")])
    a.attempt("t1")
    other.started([task("t9")])
    other.attempt("t9", hidden=(0, 1, 0))
    mixed = [*a.entries, *other.entries]
    mixed.append(decode_entry(canonical_bytes({"v": 1, "seq": 999, "ts": 0, "run": None,
                                               "task": None, "kind": "x", "data": {}})))
    v = compute_views(mixed, a.run)
    assert v["run_id"] == a.run and v["counts"]["attempts"] == 1 and v["score"] > 0
    assert compute_views(mixed, "r-other")["counts"]["passed"] == 0
    assert compute_views(mixed)["run_id"] == a.run  # the first entry's run


def test_replay_reproduces_a_recorded_view() -> None:
    """A view recorded at run end recomputes identically: reproduced."""
    b = sample_run()
    r = replay(b.entries, b.run)
    assert r.reproduced and r.status == "finished"
    assert [v.diff_count for v in r.views] == [0]
    assert r.message.startswith("reproduced")


def test_replay_covers_only_entries_before_the_view() -> None:
    """Entries appended after view.recorded do not break its replay."""
    b = sample_run()
    aid = next(e.data["attempt"] for e in b.entries if e.kind == "attempt.started")
    safety = compute_views(b.entries)["components"]["safety"]
    b.add("attestation", {"attempt": aid, "attestation": {"verdict": "DIRTY"}, "hash": "00"})
    r = replay(b.entries, b.run)
    assert r.reproduced and not r.ok  # the view still replays; the late attestation is injected
    assert [(f.seq, f.kind) for f in r.injected] == [(b.entries[-1].seq, "attestation")]
    assert compute_views(b.entries)["components"]["safety"] == safety


def test_replay_detects_a_changed_recorded_view_and_names_the_path() -> None:
    """A recorded view that differs from the recomputation is a diff naming each field."""
    b = sample_run()
    data = recorded_view_data(b.entries[:-1], b.run)
    forged = copy.deepcopy(data)
    forged["view"]["components"]["safety"] = 0.5
    forged["view"]["score"] = 0.99
    forged["view"]["attempts"][1]["passed"] = not forged["view"]["attempts"][1]["passed"]
    del forged["view"]["cost_total"]
    b.entries.pop()
    b.add("view.recorded", forged)
    r = replay(b.entries, b.run)
    assert not r.reproduced and r.message.startswith("not reproduced")
    paths = {d.path: d for d in r.views[0].diffs}
    assert set(paths) == {"components.safety", "score", "attempts[1].passed", "cost_total"}
    assert paths["components.safety"].recorded == 0.5
    assert paths["components.safety"].computed == data["view"]["components"]["safety"]
    assert paths["cost_total"].absent == "recorded"


def test_derived_facts_are_whole_dataclass_values() -> None:
    """derive fills exactly AttemptFacts' fields, so the value equals the frozen one its
    generated __init__ would build."""
    import dataclasses

    from evaluators.facts import AttemptFacts, facts_of

    state = fold_all(sample_run().entries)
    scored, superseded = facts_of(state)
    names = {f.name for f in dataclasses.fields(AttemptFacts)}
    for facts in [*scored, *superseded]:
        assert set(vars(facts)) == names
        rebuilt = AttemptFacts(**{n: getattr(facts, n) for n in names})
        assert rebuilt == facts and repr(rebuilt) == repr(facts)
        with pytest.raises(dataclasses.FrozenInstanceError):
            facts.passed = not facts.passed  # type: ignore[misc]


def test_tiers_are_the_task_models() -> None:
    """The view lists every tier the task model knows, in its order."""
    from ledger.tasks.model import TIERS

    assert views.TIERS == TIERS


def test_diff_is_type_strict() -> None:
    """An int recorded where a float is computed counts as a difference."""
    assert [d.path for d in diff_values({"a": 1, "b": [1.0]}, {"a": 1.0, "b": [1.0, 2.0]})] == [
        "a", "b[1]"]


# (recorded, computed, the paths that must differ): values the byte-equality fast path of
# diff_values must not wave through, one per way two views can look alike and still differ
_LOOKALIKES = [
    ("int-vs-float", {"a": 1}, {"a": 1.0}, ["a"]),
    ("bool-vs-int", {"a": True}, {"a": 1}, ["a"]),
    ("str-vs-bytes", {"a": "x"}, {"a": b"x"}, ["a"]),
    ("nan-never-equal", {"a": [float("nan")]}, {"a": [float("nan")]}, ["a[0]"]),
    ("tuple-vs-list-same-json", {"a": [1, 2]}, {"a": (1, 2)}, []),
    ("key-order-only", {"a": 1, "b": 2}, {"b": 2, "a": 1}, []),
    ("deep-leaf", {"a": {"b": [{"c": "x"}]}}, {"a": {"b": [{"c": "y"}]}}, ["a.b[0].c"]),
]


@pytest.mark.parametrize(("recorded", "computed", "paths"),
                         [c[1:] for c in _LOOKALIKES], ids=[c[0] for c in _LOOKALIKES])
def test_diff_fast_path_keeps_type_strictness(recorded: Any, computed: Any, paths: list[str]) -> None:
    """Views that pack alike or compare equal but differ in a leaf's type or value still differ."""
    assert [d.path for d in diff_values(recorded, computed)] == paths


_LEAVES = (st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3)
           | st.binary(max_size=2) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0.0, -0.0, 1.0, 0.1 + 0.2, 1e-7, 2.5e-7, 1234.5678905]))
_RAW_VIEWS = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3)
                          | st.tuples(inner, inner)
                          | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
                          max_leaves=12)


# (name, recorded, the view before normalize, whether they are the same view)
_ONE_WALK_CASES = [
    ("rounded-float", {"a": 1.0}, {"a": 1.0000001}, True),
    ("negative-zero", {"a": 0.0}, {"a": -0.0}, True),
    ("tuple-is-list", {"a": [1, 2]}, {"a": (1, 2)}, True),
    ("int-vs-float", {"a": 1}, {"a": 1.0}, False),
    ("float-vs-int", {"a": 1.0}, {"a": 1}, False),
    ("bool-vs-int", {"a": True}, {"a": 1}, False),
    ("nan", {"a": float("nan")}, {"a": float("nan")}, False),
    ("key-missing-in-replay", {"a": 1, "b": 2}, {"a": 1}, False),
    ("key-missing-in-record", {"a": 1}, {"a": 1, "b": 2}, False),
    ("key-swapped", {"a": 1}, {"b": 1}, False),
    ("deep-leaf", {"b": {"c": ["x"]}}, {"b": {"c": ["y"]}}, False),
    ("list-longer", {"a": [1]}, {"a": [1, 2]}, False),
]


@pytest.mark.parametrize(("recorded", "raw", "same"), [c[1:] for c in _ONE_WALK_CASES],
                         ids=[c[0] for c in _ONE_WALK_CASES])
def test_replay_one_walk_check_cases(recorded: Any, raw: Any, same: bool) -> None:
    """The one-walk check of replay rounds floats as normalize does and is type-strict."""
    assert views._normalizes_to(recorded, raw) is same
    assert (views.diff_values(recorded, views.normalize(raw)) == []) is same


@settings(max_examples=400, deadline=None)
@given(raw=_RAW_VIEWS, other=_RAW_VIEWS, same=st.booleans())
def test_replay_one_walk_check_agrees_with_normalize_and_diff(raw: Any, other: Any, same: bool) -> None:
    """replay's one-walk check says "no difference" only when normalize-then-diff finds none,
    and says it for the normalized view itself (the case of every reproduced replay)."""
    recorded = views.normalize(raw) if same else views.normalize(other)
    if views._normalizes_to(recorded, raw):
        assert views.diff_values(recorded, views.normalize(raw)) == []
    if same and views.diff_values(recorded, views.normalize(raw)) == []:
        assert views._normalizes_to(recorded, raw)


def test_replay_without_recorded_view_is_not_reproduced() -> None:
    """A run that recorded no view has nothing to compare: not reproduced, and says so."""
    b = RunBuilder()
    b.started([task("t1")])
    b.attempt("t1")
    r = replay(b.entries, b.run)
    assert not r.reproduced and "recorded no golden view" in r.message
    assert r.status == "unfinished"
    assert not replay([], "r-none").reproduced


def test_replay_skips_views_of_other_evaluators() -> None:
    """A view of an unknown evaluator is listed as not replayed and does not fail replay."""
    b = sample_run()
    b.add("view.recorded", {"evaluator": "leaderboard", "version": "9", "view": {"x": 1}})
    r = replay(b.entries, b.run)
    assert r.reproduced
    assert [(v.evaluator, v.replayed) for v in r.views] == [("golden", True),
                                                            ("leaderboard", False)]


def test_scoring_doc_states_every_constant() -> None:
    """docs/SCORING.md names every scoring constant with its value."""
    text = (ROOT / "docs" / "SCORING.md").read_text(encoding="utf-8")
    constants = {
        "W_SUCCESS": score.W_SUCCESS, "W_QUALITY": score.W_QUALITY,
        "W_EFFICIENCY": score.W_EFFICIENCY, "TIME_WEIGHT": score.TIME_WEIGHT,
        "COST_WEIGHT": score.COST_WEIGHT, "CRASH_PENALTY": score.CRASH_PENALTY,
        "ORPHAN_PENALTY": score.ORPHAN_PENALTY, "TELEMETRY_PENALTY": score.TELEMETRY_PENALTY,
        "ROUND_DIGITS": views.ROUND_DIGITS,
        "ORIENTATION_MIN_READS": taxonomy.ORIENTATION_MIN_READS,
        "ORIENTATION_MAX_CHANGED_LINES": taxonomy.ORIENTATION_MAX_CHANGED_LINES,
        "STUB_PENALTY_MAX": judge.STUB_PENALTY_MAX,
        "REGRESSION_PENALTY": judge.REGRESSION_PENALTY,
        "CONFLICT_PENALTY": judge.CONFLICT_PENALTY, "SCOPE_PENALTY_MAX": judge.SCOPE_PENALTY_MAX,
        "TODO_PENALTY": judge.TODO_PENALTY, "HALLUCINATION_PENALTY": judge.HALLUCINATION_PENALTY,
        "JUDGE_CRASH_PENALTY": judge.JUDGE_CRASH_PENALTY,
    }
    for name, value in constants.items():
        assert re.search(rf"`{name}`\s*=\s*`?{re.escape(str(value))}`?", text), name
    for category in taxonomy.PRIORITY:
        assert f"`{category}`" in text
    assert f"`{EVALUATOR_VERSION}`" in text


FORBIDDEN = {"os", "sys", "time", "random", "sqlite3", "subprocess", "socket", "pathlib",
             "datetime", "io", "tempfile", "shutil", "secrets", "uuid", "threading", "asyncio"}


@pytest.mark.parametrize("path", sorted((ROOT / "evaluators").glob("*.py")), ids=lambda p: p.name)
def test_evaluators_import_no_io(path: Path) -> None:
    """Evaluator modules import nothing that reads files, clocks, randomness or the environment."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


def test_replay_pauses_the_cyclic_gc_and_restores_it() -> None:
    """The collector is off while the entries are folded, then back as it was, even on error."""
    import gc

    b = sample_run()
    seen: list[bool] = []

    def watched() -> Any:
        for e in b.entries:
            seen.append(gc.isenabled())
            yield e

    assert gc.isenabled()
    assert replay(watched(), b.run).reproduced
    assert seen and not any(seen) and gc.isenabled()

    def broken() -> Any:
        yield b.entries[0]
        raise RuntimeError("reader failed")

    with pytest.raises(RuntimeError):
        replay(broken(), b.run)
    assert gc.isenabled()
    gc.disable()
    try:
        replay(b.entries, b.run)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
