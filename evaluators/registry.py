"""Every projection in one shape, and the registry ``ledger replay`` iterates.

    Evaluator        name and version (as ``view.recorded`` names them), the entry kinds it
                     reads, ``start(run_id)`` -> state, ``fold(state, entry)`` -> state,
                     ``view(state)`` -> the view, ``replay(entries, run_id)`` -> ReplayResult
    REGISTRY         the golden score (evaluators.views), the bench leaderboard
                     (evaluators.leaderboard) and the statistics (evaluators.stats_view)
    replay_run       replays the views a run recorded, with each evaluator that recorded one

Pure: entries in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evaluators import fold as golden_fold
from evaluators import views
from evaluators.structure import trusted
from ledger.journal.codec import Entry

# The kinds the golden fold reads: the keys of its dispatch table.
GOLDEN_KINDS: frozenset[str] = frozenset(golden_fold._HANDLERS)


class Evaluator(Protocol):
    """A pure projection of a run's entries (eventsourcing's projection shape)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def kinds(self) -> frozenset[str]: ...

    def start(self, run_id: str | None) -> Any: ...

    def fold(self, state: Any, entry: Entry) -> Any: ...

    def view(self, state: Any) -> dict[str, Any]: ...

    def replay(self, entries: Iterable[Entry], run_id: str) -> views.ReplayResult: ...


@dataclass(frozen=True)
class Golden:
    """The golden score, failure taxonomy and per-attempt rows (docs/SCORING.md)."""

    name: str = views.EVALUATOR_NAME
    version: str = views.EVALUATOR_VERSION
    kinds: frozenset[str] = GOLDEN_KINDS

    def start(self, run_id: str | None) -> golden_fold.FoldState:
        return views._prepared(run_id)

    def fold(self, state: golden_fold.FoldState, entry: Entry) -> golden_fold.FoldState:
        return golden_fold.fold(state, entry)

    def view(self, state: golden_fold.FoldState) -> dict[str, Any]:
        return views.view(state)

    def replay(self, entries: Iterable[Entry], run_id: str) -> views.ReplayResult:
        return views.replay(entries, run_id)


def _lb() -> Any:
    """evaluators.leaderboard, imported on first use: a golden run (what plain ``ledger verify``
    replays most) never needs the bench evaluator's module and its imports."""
    from evaluators import leaderboard

    return leaderboard


@dataclass(frozen=True)
class Leaderboard:
    """The multi-agent bench leaderboard (docs/bench.md)."""

    # leaderboard.BENCH_EVALUATOR and BENCH_VERSION, spelled here so that naming the registry's
    # evaluators imports no bench code (tests/evaluators/test_registry.py holds them equal)
    name: str = "bench"
    version: str = "1.0.0"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(_lb().KNOWN_KINDS)

    def start(self, run_id: str | None) -> Any:
        return _lb().new_leaderboard_state(run_id)

    def fold(self, state: Any, entry: Entry) -> Any:
        return _lb().fold_leaderboard(state, entry)

    def view(self, state: Any) -> dict[str, Any]:
        out: dict[str, Any] = _lb().leaderboard_view(state)
        return out

    def replay(self, entries: Iterable[Entry], run_id: str) -> views.ReplayResult:
        placed = trusted(list(entries), run_id)  # evaluators/structure.py
        seen = list(placed.entries)
        out = _lb().replay_leaderboard(seen, run_id)
        replayed = tuple(
            views.ReplayedView(int(v["seq"]), self.name, str(v.get("version")), True,
                               tuple(views.ViewDiff(d["path"], d.get("recorded"), d.get("computed"),
                                                    d.get("absent")) for d in v["diffs"]),
                               int(v["diff_count"]))
            for v in out["views"])
        mine = [e for e in seen if e.run == run_id]
        status = "finished" if any(e.kind == "bench.finished" for e in mine) else "unfinished"
        return views.ReplayResult(run_id=run_id, status=status, reproduced=bool(out["reproduced"]),
                                  views=replayed, entries=len(mine), unknown={}, malformed={},
                                  message=str(out["message"]), evaluator=self.name,
                                  evaluator_version=self.version, injected=placed.findings)


def _sv() -> Any:
    """evaluators.stats_view, imported on first use (a run without a statistics view, such as
    one recorded before it existed, never loads it)."""
    from evaluators import stats_view

    return stats_view


@dataclass(frozen=True)
class Statistics:
    """Intervals, clustered errors, pass@k and pass^k, flakiness, infra failures apart
    (docs/SCORING.md, "Statistics")."""

    # stats_view.EVALUATOR_NAME and EVALUATOR_VERSION (tests/evaluators/test_stats_view.py
    # holds them equal)
    name: str = "stats"
    version: str = "1.1.0"

    kinds: frozenset[str] = GOLDEN_KINDS  # the golden fold's (sandbox.failed among them)

    def start(self, run_id: str | None) -> golden_fold.FoldState:
        return golden_fold.new_state(run_id)

    def fold(self, state: golden_fold.FoldState, entry: Entry) -> golden_fold.FoldState:
        return golden_fold.fold(state, entry)

    def view(self, state: Any) -> dict[str, Any]:
        out: dict[str, Any] = _sv().view(state)
        return out

    def replay(self, entries: Iterable[Entry], run_id: str) -> views.ReplayResult:
        out: views.ReplayResult = _sv().replay(entries, run_id)
        return out


REGISTRY: tuple[Evaluator, ...] = (Golden(), Leaderboard(), Statistics())


def by_name(name: str) -> Evaluator | None:
    return next((ev for ev in REGISTRY if ev.name == name), None)


def replay_run(entries: Iterable[Entry], run_id: str, *,
               structure: Sequence[Entry] | None = None) -> views.ReplayResult:
    """Replay every view ``run_id`` recorded, each with the evaluator that recorded it.

    With views of one evaluator, that evaluator's result; with none, the golden evaluator's
    (which says no view was recorded); with several, one result whose views are all of theirs
    and which is reproduced only when every one of them is.

    ``structure``: the run's entries of ``STRUCTURE_KINDS`` (a kind-filtered read of the same
    journal): the evaluators that recorded views are known from it, and a run of golden and
    statistics views (what ``ledger run`` records) then streams ``entries`` through one fold
    without holding them; the same result as without it.
    """
    # the run's entries are held in memory to see which evaluators recorded views before
    # replaying; building that list with the cyclic collector running cost more than the
    # statistics view itself (benchmarks/replay.py, ``stats_replay``): the whole replay runs
    # with it paused, and the list and the folds are freed before it resumes (views.replay)
    with views.cyclic_gc_paused():
        return _replay_run(entries, run_id, structure)


def _replay_run(entries: Iterable[Entry], run_id: str,
                structure: Sequence[Entry] | None) -> views.ReplayResult:
    if structure is not None:
        recorded = {str(e.data.get("evaluator")) for e in structure
                    if e.run == run_id and e.kind == "view.recorded"}
        if "bench" not in recorded:  # the cases below, the entries streamed through one fold
            stream = entries  # other runs' entries are dropped by the placement
            if Statistics.name in recorded:
                return views.replay(stream, run_id, evaluators=_sv().EVALUATORS,
                                    golden=views.EVALUATOR_NAME in recorded, older=_sv().OLDER,
                                    structure=structure)
            return views.replay(stream, run_id, structure=structure)  # golden, or no view
    seen = [e for e in entries if e.run == run_id]
    recorded = {str(e.data.get("evaluator")) for e in seen if e.kind == "view.recorded"}
    if Statistics.name in recorded and "bench" not in recorded:
        # the golden and statistics views are views of one fold: replayed in one pass
        return views.replay(seen, run_id, evaluators=_sv().EVALUATORS,
                            golden=views.EVALUATOR_NAME in recorded, older=_sv().OLDER)
    results = [ev.replay(seen, run_id) for ev in REGISTRY if ev.name in recorded]
    if not results:
        return REGISTRY[0].replay(seen, run_id)
    if len(results) == 1:
        return results[0]
    first = results[0]
    known = {ev.name for ev in REGISTRY}
    merged = tuple(v for r in results for v in r.views if v.evaluator == r.evaluator)
    others = tuple(v for v in first.views if v.evaluator not in known)
    ok = all(r.reproduced for r in results)
    return views.ReplayResult(
        run_id=run_id, status=first.status, reproduced=ok, views=merged + others,
        entries=first.entries, unknown=first.unknown, malformed=first.malformed,
        message="; ".join(r.message for r in results),
        evaluator="+".join(r.evaluator for r in results),
        evaluator_version="+".join(r.evaluator_version for r in results),
        injected=first.injected)


__all__ = ["GOLDEN_KINDS", "REGISTRY", "Evaluator", "Golden", "Leaderboard", "Statistics", "by_name",
           "replay_run"]
