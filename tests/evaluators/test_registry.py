"""One Evaluator shape: every registered projection folds, views and replays; replay iterates."""

from __future__ import annotations

import json

from evaluators import leaderboard as lb
from evaluators.registry import REGISTRY, Golden, Leaderboard, by_name, replay_run
from evaluators.views import compute_views
from tests.bench.builders import RUN as BENCH_RUN
from tests.bench.builders import RunBuilder as BenchBuilder
from tests.bench.builders import dims
from tests.evaluators.test_views import sample_run


def _bench_run(forge: bool = False) -> BenchBuilder:
    b = BenchBuilder()
    b.response("claude")
    b.judge("gemini", ["claude"], {"claude": dims(5, 4, 5, 4)})
    view = lb.leaderboard_from_entries(b.entries)
    if forge:
        view = json.loads(json.dumps(view))
        view["rows"][0]["quality"] = 100
    b.add("view.recorded", {"evaluator": "bench", "version": lb.BENCH_VERSION, "view": view})
    return b


def test_the_registry_names_each_evaluator_once_with_the_kinds_it_reads() -> None:
    """Names are unique, each lists the entry kinds it reads, and by_name finds it."""
    names = [ev.name for ev in REGISTRY]
    assert names == ["golden", "bench", "stats"] and len(set(names)) == len(names)
    for ev in REGISTRY:
        assert ev.kinds and "view.recorded" in ev.kinds
        assert by_name(ev.name) is ev
    assert by_name("nope") is None


def test_golden_fold_then_view_is_compute_views() -> None:
    """start/fold/view of the golden evaluator give exactly compute_views."""
    b = sample_run()
    ev = Golden()
    state = ev.start(b.run)
    for e in b.entries:
        state = ev.fold(state, e)
    assert ev.view(state) == compute_views(b.entries, b.run)


def test_leaderboard_fold_then_view_is_leaderboard_from_entries() -> None:
    """start/fold/view of the leaderboard give exactly leaderboard_from_entries."""
    b = _bench_run()
    ev = Leaderboard()
    state = ev.start(None)
    for e in b.entries[:-1]:
        state = ev.fold(state, e)
    assert ev.view(state) == lb.leaderboard_from_entries(b.entries[:-1])


def test_replay_run_replays_a_bench_run_with_the_leaderboard() -> None:
    """A run that recorded a bench view is replayed by the leaderboard, not the golden score."""
    good = replay_run(_bench_run().entries, BENCH_RUN)
    assert good.reproduced and good.evaluator == "bench"
    assert [(v.evaluator, v.diff_count) for v in good.views] == [("bench", 0)]
    bad = replay_run(_bench_run(forge=True).entries, BENCH_RUN)
    assert not bad.reproduced and bad.views[0].diffs[0].path == "rows[0].quality"


def test_replay_run_replays_a_golden_run_with_the_golden_score() -> None:
    """A run run by `ledger run` is replayed by the golden evaluator, as before."""
    b = sample_run()
    result = replay_run(b.entries, b.run)
    assert result.reproduced and result.evaluator == "golden"
    assert result.as_dict()["evaluator"] == {"name": "golden", "version": Golden().version}


def test_a_run_without_views_is_not_reproduced() -> None:
    """No recorded view: nothing to compare, so not reproduced (whatever the evaluator)."""
    b = sample_run()
    b.entries = [e for e in b.entries if e.kind != "view.recorded"]
    assert replay_run(b.entries, b.run).reproduced is False


def test_the_bench_evaluator_is_named_as_the_leaderboard_module_names_it() -> None:
    """The registry spells the bench name and version itself; they must be leaderboard.py's."""
    ev = Leaderboard()
    assert (ev.name, ev.version, ev.kinds) == (lb.BENCH_EVALUATOR, lb.BENCH_VERSION, lb.KNOWN_KINDS)


def test_replay_run_pauses_the_cyclic_collector_only_while_it_reads() -> None:
    """The run's entries are collected with the cyclic GC paused (its passes over a growing list
    of entries cost more than the statistics view: benchmarks/replay.py), and the collector is
    left as it was found, enabled or not."""
    import gc

    b = sample_run()
    seen: list[bool] = []

    def spying() -> object:
        for e in b.entries:
            seen.append(gc.isenabled())
            yield e

    assert gc.isenabled()
    assert replay_run(spying(), b.run).reproduced
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        replay_run(b.entries, b.run)
        assert not gc.isenabled()
    finally:
        gc.enable()
