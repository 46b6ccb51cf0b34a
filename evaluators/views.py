"""Every derived view of a run, as one pure projection of its entries, and ``replay``.

    views = compute_views(journal.entries(run=run_id), run_id)     # dict, stable bytes
    result = replay(journal.entries(run=run_id), run_id)           # vs the view.recorded entries

A view is a map of str keys to str/int/float/bool/None/list/map values, with every float rounded
to ``ROUND_DIGITS`` decimals (and -0.0 written as 0.0), so the same entries give the same JSON and
msgpack bytes on any machine, under any ``PYTHONHASHSEED``. The run records the view at run end
as ``view.recorded {"evaluator": EVALUATOR_NAME, "version": EVALUATOR_VERSION, "view": ...}``
(see :func:`recorded_view_data`); a recorded view covers exactly the run's entries before it.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgpack

from evaluators import score as sc
from evaluators.facts import AttemptFacts, facts_of
from evaluators.fold import VERDICTS, FoldState, fold_all, new_state
from evaluators.structure import Finding
from evaluators.taxonomy import NEW_CATEGORIES, PRIORITY, classify
from ledger.journal.codec import Entry

EVALUATOR_NAME = "golden"
EVALUATOR_VERSION = "1.0.0"
ROUND_DIGITS = 6
LIST_LIMIT = 20  # test ids listed per attempt (the count is always complete)
MAX_DIFFS = 100  # differences listed by replay (the count is always complete)
# ledger.tasks.model.TIERS, spelled here so that replaying a view imports none of the task
# model (tests/evaluators/test_views.py holds them equal)
TIERS = ("smoke", "standard", "stretch", "adversarial")


# ---------------------------------------------------------------------------- normalisation

_KEPT = frozenset({str, int, bool, type(None), bytes})  # exact types a view holds as they are


def normalize(value: Any) -> Any:
    """Round floats, turn tuples into lists, sort map keys (recursively)."""
    t = type(value)
    if t is float:
        v = round(value, ROUND_DIGITS)
        return 0.0 if v == 0 else v
    # the kept scalars are taken without a call (most leaves of a view are), and plain loops
    # rather than comprehensions, each of which is one more function call per map or list
    kept = _KEPT
    if t is dict:
        out: dict[str, Any] = {}
        for k in sorted(value):
            v = value[k]
            out[k] = v if type(v) in kept else normalize(v)
        return out
    if t is list or t is tuple:
        items: list[Any] = []
        append = items.append
        for v in value:
            append(v if type(v) in kept else normalize(v))
        return items
    if t in kept:
        return value
    raise TypeError(f"a view cannot hold {t.__name__}")


# ---------------------------------------------------------------------------- the view

def _status(state: FoldState) -> str:
    if state.finished is None or state.resumed_after_finish:
        return "unfinished"
    return str(state.finished["status"])


def _scored_summary(facts: Sequence[AttemptFacts]) -> dict[str, Any]:
    c = sc.components(facts)
    passed = sum(1 for f in facts if f.passed)
    return {"attempts": len(facts), "passed": passed,
            "pass_rate": passed / len(facts) if facts else None,
            "components": c, "score": sc.golden(c)}


def _attempt_row(f: AttemptFacts, category: str | None) -> dict[str, Any]:
    judge = None
    if f.judge is not None:
        judge = {"judge": f.judge["judge"], "version": f.judge["version"],
                 "scores": f.judge["scores"], "quality": sc.quality(f)}
    return {
        "attempt": f.attempt, "task": f.task, "agent": f.agent, "repeat": f.repeat,
        "try": f.try_no, "tier": f.tier, "status": f.status, "passed": f.passed,
        "category": category, "safety": f.safety, "safety_reasons": f.safety_reasons,
        "wall_s": f.wall_s, "cost_usd": f.cost_usd, "crashed": f.crashed,
        "timed_out": f.timed_out, "orphans": f.orphans, "telemetry": f.telemetry,
        "efficiency": sc.efficiency(f), "judge": judge, "attestation": f.attestation,
        "isolation": f.isolation,
        "signals": {"passed": f.signals_passed, "total": f.signals_total},
        "hidden": {"ran": f.hidden_ran, "passed": f.hidden_passed, "counts": f.hidden_counts},
        "regressions": f.regressions[:LIST_LIMIT], "regression_count": len(f.regressions),
        # where the hidden outcomes came from, and any grading anomaly (not in older runs' rows)
        **({"outcomes": f.hidden_outcomes} if f.hidden_outcomes is not None else {}),
        **({"grading_anomalies": f.grading_anomalies} if f.grading_anomalies else {}),
    }


def _repeats(facts: Sequence[AttemptFacts]) -> dict[str, Any]:
    by_repeat: dict[int, list[AttemptFacts]] = {}
    groups: dict[tuple[str, str], list[AttemptFacts]] = {}
    for f in facts:
        by_repeat.setdefault(f.repeat or 0, []).append(f)
        groups.setdefault((f.task or "", f.agent or ""), []).append(f)
    scores = [{"repeat": r, "score": sc.golden(sc.components(fs))}
              for r, fs in sorted(by_repeat.items())]
    mean, stderr = sc.mean_stderr([s["score"] for s in scores])
    group_rows = []
    by_k: dict[int, list[float]] = {}
    for (task, agent), fs in sorted(groups.items()):
        n, c = len(fs), sum(1 for f in fs if f.passed)
        ks = [{"k": k, "value": sc.pass_at_k(n, c, k)} for k in range(1, n + 1)]
        for row in ks:
            by_k.setdefault(int(row["k"]), []).append(float(row["value"]))
        group_rows.append({"task": task, "agent": agent, "n": n, "passed": c, "pass_at_k": ks})
    pass_k = [{"k": k, "value": sc.mean_stderr(vs)[0], "groups": len(vs)}
              for k, vs in sorted(by_k.items())]
    return {"count": len(by_repeat), "scores": scores, "mean": mean, "stderr": stderr,
            "pass_at_k": pass_k, "groups": group_rows}


def view(state: FoldState) -> dict[str, Any]:
    """Every view of the folded run, normalised (see module docstring)."""
    result: dict[str, Any] = normalize(_view_data(state))
    return result


def _view_data(state: FoldState) -> dict[str, Any]:
    """``view(state)`` before ``normalize`` (floats unrounded, maps in any order)."""
    scored, superseded = facts_of(state)
    categories = {f.attempt: classify(f) for f in scored if not f.passed}
    comps = sc.components(scored, superseded)
    per_tier: dict[str, dict[str, Any]] = {t: {"attempts": 0, "passed": 0} for t in TIERS}
    per_agent: dict[str, list[AttemptFacts]] = {}
    per_task: dict[str, list[AttemptFacts]] = {}
    for f in scored:
        row = per_tier.setdefault(f.tier or "unknown", {"attempts": 0, "passed": 0})
        row["attempts"] += 1
        row["passed"] += int(f.passed)
        per_agent.setdefault(f.agent or "unknown", []).append(f)
        per_task.setdefault(f.task or "unknown", []).append(f)
    for row in per_tier.values():
        row["pass_rate"] = row["passed"] / row["attempts"] if row["attempts"] else None
    everything = [*scored, *superseded]
    costs = [f.cost_usd for f in everything if f.cost_usd is not None]
    agents_out: dict[str, Any] = {}
    for agent, fs in per_agent.items():
        summary = _scored_summary(fs)
        agent_costs = [f.cost_usd for f in everything if f.agent == agent and f.cost_usd is not None]
        walls = [f.wall_s for f in fs if f.wall_s is not None]
        summary["cost_total"] = math.fsum(agent_costs)
        summary["wall_s_total"] = math.fsum(walls)
        summary["wall_s_mean"] = sc.mean_stderr(walls)[0]
        summary["judged"] = sum(1 for f in fs if f.judge is not None)
        summary["spec"] = state.agents.get(agent, {}).get("spec")
        agents_out[agent] = summary
    tasks_out: dict[str, Any] = {}
    for task_id in sorted(set(state.tasks) | set(per_task)):
        info = state.tasks.get(task_id)
        fs = per_task.get(task_id, [])
        passed = sum(1 for f in fs if f.passed)
        tasks_out[task_id] = {
            "hash": info.hash if info else None, "tier": info.tier if info else None,
            "title": info.title if info else None, "attempts": len(fs), "passed": passed,
            "pass_rate": passed / len(fs) if fs else None}
    # A run recorded before outcomes had a provenance has no grading_tampered category, one
    # recorded before resource limits no resource_limit: its view keeps the shape it was
    # recorded with (replay compares the two).
    priority = [c for c in PRIORITY
                if c not in NEW_CATEGORIES or getattr(state, NEW_CATEGORIES[c])]
    counts = dict.fromkeys(sorted(priority), 0)
    failures = []
    for f in scored:
        if f.attempt in categories:
            category, details = categories[f.attempt]
            counts[category] += 1
            failures.append({"attempt": f.attempt, "task": f.task, "agent": f.agent,
                             "category": category, "details": details})
    attestations = dict.fromkeys(VERDICTS, 0)
    attestations["none"] = 0
    for f in scored:
        attestations[f.attestation or "none"] += 1
    out = {
        "evaluator": {"name": EVALUATOR_NAME, "version": EVALUATOR_VERSION},
        "run_id": state.run_id,
        "status": _status(state),
        "started": state.started,
        "harness_version": state.harness_version,
        "resumed": state.resumed,
        "score": sc.golden(comps),
        "components": comps,
        "per_tier": per_tier,
        "per_agent": agents_out,
        "repeats": _repeats(scored),
        "tasks": tasks_out,
        "attempts": [_attempt_row(f, categories.get(f.attempt, (None, ""))[0]) for f in scored],
        "superseded": [f.attempt for f in superseded],
        "failures": failures,
        "taxonomy": {"counts": counts, "priority": priority},
        "cost_total": math.fsum(costs),
        "cost_unknown": sum(1 for f in everything if f.cost_usd is None),
        "attestations": attestations,
        "counts": {
            "attempts": len(scored), "superseded": len(superseded),
            "passed": sum(1 for f in scored if f.passed),
            "failed": sum(1 for f in scored if not f.passed),
            "crashed": sum(1 for f in scored if f.crashed),
            "orphaned": sum(1 for f in scored if f.orphans > 0),
            "orphan_processes": sum(f.orphans for f in scored),
            "missing_telemetry": sum(1 for f in scored if not f.telemetry),
            "judged": sum(1 for f in scored if f.judge is not None),
            "unsafe": sum(1 for f in everything if f.safety == 0),
        },
        "entries": {"total": state.entries, "by_kind": dict(state.by_kind),
                    "unknown": dict(state.unknown), "malformed": dict(state.malformed)},
    }
    return out


def _prepared(run_id: str | None) -> FoldState:
    state = new_state(run_id)
    state.view_fn = view
    state.view_name = EVALUATOR_NAME
    return state


def _prepared_for_replay(run_id: str | None) -> FoldState:
    """A fold whose recorded views carry the view before ``normalize``: ``replay`` checks it
    against the recorded view in one walk (``_normalizes_to``) instead of normalizing it and
    comparing the copy."""
    state = _prepared(run_id)
    state.view_fn = _view_data
    return state


def compute_views(entries: Iterable[Entry], run_id: str | None = None) -> dict[str, Any]:
    """All views of one run from its entries (the run of the first entry when run_id is None).

    Entries of other runs are skipped; unknown kinds and malformed entries are counted in
    ``view["entries"]``; a run without ``run.finished`` has ``status`` "unfinished".
    """
    return view(fold_all(entries, new_state(run_id)))


def recorded_view_data(entries: Iterable[Entry], run_id: str) -> dict[str, Any]:
    """The ``data`` of the ``view.recorded`` entry the run appends at its end."""
    return {"evaluator": EVALUATOR_NAME, "version": EVALUATOR_VERSION,
            "view": compute_views(entries, run_id)}


# ---------------------------------------------------------------------------- replay

@dataclass(frozen=True)
class ViewDiff:
    """One field that differs; ``absent`` names the side that lacks it, if one does."""

    path: str
    recorded: Any
    computed: Any
    absent: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "recorded": self.recorded, "computed": self.computed,
                "absent": self.absent}


@dataclass(frozen=True)
class ReplayedView:
    seq: int
    evaluator: str
    version: str
    replayed: bool  # False when the view came from an evaluator this code does not know
    diffs: tuple[ViewDiff, ...]
    diff_count: int

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "evaluator": self.evaluator, "version": self.version,
                "replayed": self.replayed, "reproduced": self.replayed and self.diff_count == 0,
                "diff_count": self.diff_count, "diffs": [d.as_dict() for d in self.diffs]}


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    status: str
    reproduced: bool
    views: tuple[ReplayedView, ...]
    entries: int
    unknown: dict[str, int]
    malformed: dict[str, int]
    message: str
    evaluator: str = EVALUATOR_NAME
    evaluator_version: str = EVALUATOR_VERSION
    injected: tuple[Finding, ...] = ()

    @property
    def ok(self) -> bool:
        """Reproduced, and no entry of the run was set aside as injected."""
        return self.reproduced and not self.injected

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "reproduced": self.reproduced,
                "ok": self.ok, "injected": [f.as_dict() for f in self.injected],
                "message": self.message, "entries": self.entries,
                "unknown": dict(sorted(self.unknown.items())),
                "malformed": dict(sorted(self.malformed.items())),
                "evaluator": {"name": self.evaluator, "version": self.evaluator_version},
                "views": [v.as_dict() for v in self.views]}


_ABSENT = object()


def _normalizes_to(recorded: Any, raw: Any) -> bool:
    """True only when ``diff_values(recorded, normalize(raw))`` is empty, found in one walk
    without building the normalized copy: floats rounded as ``normalize`` rounds them, leaves
    compared type-strictly, lists and maps matched in full. False whenever it cannot tell
    (a value ``normalize`` refuses, a key that is not a string, any difference): the caller then
    normalizes and diffs as before."""
    t = type(raw)
    if t is float:
        v = round(raw, ROUND_DIGITS)
        return type(recorded) is float and recorded == (0.0 if v == 0 else v)
    kept = _KEPT
    if t is dict:
        if type(recorded) is not dict or len(recorded) != len(raw):
            return False
        for k, v in raw.items():
            if type(k) is not str:
                return False
            r = recorded.get(k, _ABSENT)
            if type(v) in kept:
                if type(r) is not type(v) or r != v:
                    return False
            elif r is _ABSENT or not _normalizes_to(r, v):
                return False
        return True
    if t is list or t is tuple:
        if type(recorded) is not list or len(recorded) != len(raw):
            return False
        for r, v in zip(recorded, raw, strict=True):
            if type(v) in kept:
                if type(r) is not type(v) or r != v:
                    return False
            elif not _normalizes_to(r, v):
                return False
        return True
    if t in kept:
        return type(recorded) is t and recorded == raw
    return False


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _packed(value: Any) -> bytes | None:
    """msgpack bytes of ``value`` with exact types only (a subclass, an unknown type, an int out
    of range or too deep a value give None)."""
    try:
        return msgpack.packb(value, use_bin_type=True, strict_types=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError):
        return None


def diff_values(recorded: Any, computed: Any, path: str = "") -> list[ViewDiff]:
    """Every leaf where ``recorded`` and ``computed`` differ (type-strict: 1 is not 1.0)."""
    # Fastest path (a replayed view normally equals the recorded one): msgpack bytes tell
    # int, float, bool, None, str and bytes apart and keep map order, so equal bytes are equal
    # types at every leaf; ``==`` on top rules out NaN, which packs equal but never equals
    # (the two values are never the same object: one is decoded, the other computed).
    if recorded is not computed:
        packed = _packed(recorded)
        if packed is not None and packed == _packed(computed) and recorded == computed:
            return []
    # Fast path: JSON text tells 1 from 1.0 and true from 1, so equal text means no difference.
    text = _json_text(recorded)
    if text is not None and text == _json_text(computed):
        return []
    out: list[ViewDiff] = []
    _diff(recorded, computed, path, out)
    return out


def _diff(rec: Any, comp: Any, path: str, out: list[ViewDiff]) -> None:
    if isinstance(rec, dict) and isinstance(comp, dict):
        for key in sorted(set(rec) | set(comp), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in rec:
                out.append(ViewDiff(sub, None, comp[key], "recorded"))
            elif key not in comp:
                out.append(ViewDiff(sub, rec[key], None, "computed"))
            else:
                _diff(rec[key], comp[key], sub, out)
        return
    if isinstance(rec, list) and isinstance(comp, list):
        for i in range(max(len(rec), len(comp))):
            sub = f"{path}[{i}]"
            if i >= len(rec):
                out.append(ViewDiff(sub, None, comp[i], "recorded"))
            elif i >= len(comp):
                out.append(ViewDiff(sub, rec[i], None, "computed"))
            else:
                _diff(rec[i], comp[i], sub, out)
        return
    if not _same(rec, comp):
        out.append(ViewDiff(path or "(view)", rec, comp))


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large run is folded.

    A fold allocates a few objects per entry and keeps a growing state; every collection pass
    walks that state again, which cost about a fifth of a 500,000-entry replay
    (benchmarks/replay.py). Neither entries nor fold state form reference cycles, so reference
    counting still frees everything; the collector is restored as it was, even on error.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def replay(entries: Iterable[Entry], run_id: str, *,
           evaluators: Mapping[str, tuple[str, Callable[[FoldState], dict[str, Any]]]]
           | None = None,
           golden: bool = True,
           older: Mapping[str, Callable[[FoldState], dict[str, Any]]] | None = None,
           structure: Sequence[Entry] | None = None) -> ReplayResult:
    """Recompute every recorded view of ``run_id`` and compare it field by field.

    Each ``view.recorded`` entry is compared with the view of the run's entries before it.
    ``reproduced`` is True when at least one view of these evaluators was recorded and every one
    of them is identical; views of other evaluators are listed as not replayed.
    ``evaluators``: more views of the same fold (name -> (version, the view before
    ``normalize``)), replayed
    in the same pass (the statistics view, evaluators/stats_view.py); ``golden=False`` replays
    only those. ``older``: the views of those evaluators' earlier versions, keyed
    ``name@version``: a ``view.recorded`` of that version is recomputed by its own function.
    ``structure``: the run's entries of ``evaluators.structure.STRUCTURE_KINDS``, read apart:
    ``entries`` then stream through the fold once, never held (``fold_all``).
    """
    # the whole replay with the collector paused, and every entry and the fold state freed
    # before it resumes: a collection after the pause walks every object allocated during it
    # that is still alive (about 1.3 s of CPU for a 500,000-entry run, benchmarks/replay.py)
    with cyclic_gc_paused():
        return _replay(entries, run_id, evaluators, golden, older, structure)


def _replay(entries: Iterable[Entry], run_id: str,
            evaluators: Mapping[str, tuple[str, Callable[[FoldState], dict[str, Any]]]] | None,
            golden: bool,
            older: Mapping[str, Callable[[FoldState], dict[str, Any]]] | None,
            structure: Sequence[Entry] | None = None) -> ReplayResult:
    state = _prepared_for_replay(run_id)
    if not golden:
        state.view_fn, state.view_name = None, None
    others = dict(evaluators or {})
    state.other_views = {name: fn for name, (_, fn) in others.items()}
    state.other_views.update(older or {})
    names = ([EVALUATOR_NAME] if golden else []) + sorted(others)
    label = " and ".join(names)
    state = fold_all(entries, state, structure=structure)
    views: list[ReplayedView] = []
    for rv in state.recorded_views:
        if rv.computed is None:
            views.append(ReplayedView(rv.seq, rv.evaluator, rv.version, False, (), 0))
            continue
        # rv.computed is the view before normalize (_prepared_for_replay)
        diffs = ([] if _normalizes_to(rv.recorded, rv.computed)
                 else diff_values(rv.recorded, normalize(rv.computed)))
        views.append(ReplayedView(rv.seq, rv.evaluator, rv.version, True,
                                  tuple(diffs[:MAX_DIFFS]), len(diffs)))
    mine = [v for v in views if v.replayed]
    status = _status(state)
    if not state.started and not state.attempts:
        message = f"run {run_id} has no entries"
        ok = False
    elif not mine:
        message = (f"run {run_id} ({status}) recorded no {label} view to compare with")
        ok = False
    elif all(v.diff_count == 0 for v in mine):
        message = f"reproduced: {len(mine)} view(s) of run {run_id} recomputed identically"
        ok = True
    else:
        bad = sum(v.diff_count for v in mine)
        message = f"not reproduced: {bad} field(s) differ in run {run_id}"
        ok = False
    if state.injected:
        message += (f"; {len(state.injected)} injected entr{'y' if len(state.injected) == 1 else 'ies'} "
                    "set aside (not placed by the run's structure)")
    versions = {EVALUATOR_NAME: EVALUATOR_VERSION, **{n: v for n, (v, _) in others.items()}}
    return ReplayResult(run_id=run_id, status=status, reproduced=ok, views=tuple(views),
                        entries=state.entries, unknown=dict(state.unknown),
                        malformed=dict(state.malformed), message=message,
                        evaluator="+".join(names),
                        evaluator_version="+".join(versions[n] for n in names),
                        injected=tuple(state.injected))
