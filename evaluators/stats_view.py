"""The statistics evaluator: intervals, clustered errors, pass@k and pass^k, flakiness, infra
failures apart, as one pure projection of a run (docs/SCORING.md, "Statistics").

    state = start(run_id); fold(state, entry) ...; stats = view(state)
    stats_of(entries, run_id, count_infra=False)     the same view in one call
    replay(entries, run_id)                          vs the run's ``view.recorded`` of "stats"

It is a view of the golden evaluator's fold (evaluators/fold.py, so both read the same facts; the
fold keeps each task's cluster and each attempt's ``sandbox.failed`` and ``agent_error`` for it),
so a run's writer and ``ledger replay`` fold once for both views. Deterministic: the bootstrap draws come from a seed derived from the run id
(``stats.seed_of``), never from global random state.

Infrastructure failures (``INFRA_KINDS``, a closed set, derived per attempt from recorded facts):

    sandbox     the sandbox did not start (a ``sandbox.failed`` entry of the attempt)
    endpoint    the model endpoint was unreachable or answered only errors (``agent_error`` kind
                ``unreachable`` or ``model_error``: connection refused, 5xx through the proxy)
    disk_full   the attempt or its sandbox failed for lack of disk ("No space left on device")
    executor    the engine or executor lost or failed the attempt ("failed on node", "lost on
                node", "task archive", a worker on another harness version)
    harness     any other harness error: ``attempt.finished`` status ``error`` (the agent's own
                failures end ``completed``)

Such attempts are excluded from every figure by default and counted beside them; with
``count_infra=True`` they count as failed attempts (score 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluators import score as sc
from evaluators import stats as st
from evaluators import views
from evaluators.facts import AttemptFacts, facts_of
from evaluators.fold import AttemptState, FoldState, fold_all, new_state
from ledger.journal.codec import Entry

EVALUATOR_NAME = "stats"
EVALUATOR_VERSION = "1.1.0"  # 1.1.0 adds "golden": the golden score with infra failures apart
OLDER_VERSIONS = ("1.0.0",)  # recorded by earlier runs; replayed by view_data_1_0 (below)
RESAMPLES = 1000  # bootstrap draws per interval (overall, per agent, per tier; not agent x tier)
MAX_K = 10  # pass@k and pass^k for k = 1..min(MAX_K, n) and k = n (n: the fewest repeats)
LIST_LIMIT = 100  # infra failures and flaky tasks listed (the counts are always complete)
INFRA_KINDS = ("sandbox", "endpoint", "disk_full", "executor", "harness")
ENDPOINT_ERRORS = frozenset({"unreachable", "model_error"})
CLUSTER_RULE = ("a task's cluster is its recorded source repository (source.repo), else its "
                "suite (source.format), else its tier, else the task itself")  # fold._cluster_of
_DISK = re.compile(r"no space left on device|\bENOSPC\b|\[Errno 28\]|disk (is )?full",
                   re.IGNORECASE)
_EXECUTOR = re.compile(r"failed on node|lost on node|task archive|runs eval-ledger|ray task|"
                       r"worker (died|crashed)|executor", re.IGNORECASE)


def infra_kind(f: AttemptFacts, a: AttemptState | None) -> tuple[str, str] | None:
    """(kind, detail) when the attempt failed because the harness or the machine did, else None.
    ``a`` is the attempt's fold state (its ``sandbox_failed`` and ``agent_error``)."""
    if f.passed:
        return None
    error = f.error or ""
    if a is not None and a.sandbox_failed is not None:
        detail = a.sandbox_failed
        return ("disk_full" if _DISK.search(detail) else "sandbox"), detail
    if f.status == "error":
        if _DISK.search(error):
            return "disk_full", error
        if _EXECUTOR.search(error):
            return "executor", error
        return "harness", error
    kind = a.agent_error if a is not None else None
    if kind in ENDPOINT_ERRORS:
        return "endpoint", f"agent_error {kind}"
    if _DISK.search(error):
        return "disk_full", error
    return None


# ---------------------------------------------------------------------------- the view

@dataclass(frozen=True)
class Row:
    """One scored attempt as the statistics see it."""

    task: str
    agent: str
    tier: str
    repeat: int
    passed: bool
    score: float
    cluster: str


def _group_summary(rows: Sequence[Row], seed: int | None, level: float) -> dict[str, Any]:
    n = len(rows)
    k = sum(1 for r in rows if r.passed)
    by_task: dict[str, list[Row]] = {}
    for r in rows:
        by_task.setdefault(r.task, []).append(r)
    tasks = sorted(by_task)
    pass_means = [sum(1 for r in by_task[t] if r.passed) / len(by_task[t]) for t in tasks]
    score_means = [math.fsum(r.score for r in by_task[t]) / len(by_task[t]) for t in tasks]
    clusters = [by_task[t][0].cluster for t in tasks]
    w = st.wilson(k, n, level)
    score_t = st.t_interval(score_means, level)
    boot = st.bootstrap_mean(score_means, seed, RESAMPLES, level) if seed is not None else None
    c_pass = st.clustered(pass_means, clusters)
    c_score = st.clustered(score_means, clusters)
    se = c_pass["stderr"] if c_pass["stderr"] is not None else c_pass["naive_stderr"]
    return {
        "attempts": n, "passed": k, "tasks": len(tasks),
        "pass_rate": {"value": k / n if n else None, "low": w[0] if w else None,
                      "high": w[1] if w else None, "method": "wilson"},
        "score": {"mean": score_t["mean"], "stderr": score_t["stderr"], "low": score_t["low"],
                  "high": score_t["high"], "method": "t over task means",
                  "bootstrap": {"low": boot[0] if boot else None,
                                "high": boot[1] if boot else None,
                                "resamples": RESAMPLES if boot else 0, "seed": seed}
                  if seed is not None else None},
        "clustered": {"clusters": c_pass["clusters"],
                      "pass_rate": {"stderr": c_pass["stderr"],
                                    "naive_stderr": c_pass["naive_stderr"],
                                    "design_effect": c_pass["design_effect"]},
                      "score": {"stderr": c_score["stderr"],
                                "naive_stderr": c_score["naive_stderr"],
                                "design_effect": c_score["design_effect"]}},
        "min_detectable_effect": st.min_detectable(float(se), level=level) if se else None,
    }


def _pass_k(groups: Mapping[tuple[str, str], Sequence[Row]]) -> list[dict[str, Any]]:
    if not groups:
        return []
    fewest = min(len(rs) for rs in groups.values())
    ks = sorted({*range(1, min(MAX_K, fewest) + 1), fewest})
    out = []
    for kk in ks:
        at = [st.pass_at_k(len(rs), sum(1 for r in rs if r.passed), kk) for rs in groups.values()]
        hat = [st.pass_hat_k(len(rs), sum(1 for r in rs if r.passed), kk)
               for rs in groups.values()]
        out.append({"k": kk, "pass_at_k": math.fsum(at) / len(at),
                    "pass_hat_k": math.fsum(hat) / len(hat), "tasks": len(at)})
    return out


def _pattern(rows: Sequence[Row], infra: Mapping[int, bool]) -> str:
    """One character per repeat 1..max: 1 passed, 0 failed, x infra failure, . none."""
    by_repeat = {r.repeat: r.passed for r in rows}
    top = max([*by_repeat, *infra, 0])
    return "".join("1" if by_repeat.get(i) else "0" if i in by_repeat else
                   "x" if i in infra else "." for i in range(1, top + 1))


def view_data(fs: FoldState, *, count_infra: bool = False,
              level: float = st.LEVEL) -> dict[str, Any]:
    """The statistics view before ``normalize``."""
    scored, superseded = facts_of(fs)
    run_id = fs.run_id or ""
    rows: list[Row] = []
    infra_rows: list[dict[str, Any]] = []
    infra_at: dict[tuple[str, str], dict[int, bool]] = {}
    by_kind = dict.fromkeys(INFRA_KINDS, 0)
    infra_of = {f.attempt: infra_kind(f, fs.attempts.get(f.attempt)) for f in scored}
    for f in scored:
        task, agent = f.task or "unknown", f.agent or "unknown"
        mark = infra_of[f.attempt]
        if mark is not None:
            by_kind[mark[0]] += 1
            infra_rows.append({"attempt": f.attempt, "task": task, "agent": agent,
                               "kind": mark[0], "detail": mark[1][:300]})
            if not count_infra:
                infra_at.setdefault((task, agent), {})[f.repeat or 0] = True
                continue
        score = 0.0 if mark is not None else sc.golden(sc.components([f]))
        rows.append(Row(task, agent, f.tier or "unknown", f.repeat or 0,
                        f.passed and mark is None, score,
                        _cluster(fs, task)))
    per_agent: dict[str, list[Row]] = {}
    per_tier: dict[str, list[Row]] = {}
    per_agent_tier: dict[str, dict[str, list[Row]]] = {}
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        per_agent.setdefault(r.agent, []).append(r)
        per_tier.setdefault(r.tier, []).append(r)
        per_agent_tier.setdefault(r.agent, {}).setdefault(r.tier, []).append(r)
        groups.setdefault((r.task, r.agent), []).append(r)

    def summary(rs: Sequence[Row], *label: str, boot: bool = True) -> dict[str, Any]:
        return _group_summary(rs, st.seed_of(run_id, "score", *label) if boot else None, level)

    agents_out = {}
    for agent, rs in sorted(per_agent.items()):
        s = summary(rs, "agent", agent)
        s["pass_k"] = _pass_k({key: g for key, g in groups.items() if key[1] == agent})
        s["per_tier"] = {t: summary(trs, "agent", agent, "tier", t, boot=False)
                         for t, trs in sorted(per_agent_tier[agent].items())}
        agents_out[agent] = s
    tasks_out: dict[str, dict[str, Any]] = {}
    flaky = []
    for (task, agent), rs in sorted(groups.items()):
        n, c = len(rs), sum(1 for r in rs if r.passed)
        flips = st.flip_rate(n, c)
        tasks_out.setdefault(task, {})[agent] = {
            "n": n, "passed": c, "score_mean": math.fsum(r.score for r in rs) / n,
            "flip_rate": flips, "pattern": _pattern(rs, infra_at.get((task, agent), {})),
            "cluster": rs[0].cluster}
        if 0 < c < n:
            flaky.append({"task": task, "agent": agent, "n": n, "passed": c, "flip_rate": flips})
    for (task, agent), marks in sorted(infra_at.items()):
        if (task, agent) not in groups:  # every attempt of the pair was an infra failure
            tasks_out.setdefault(task, {})[agent] = {
                "n": 0, "passed": 0, "score_mean": None, "flip_rate": None,
                "pattern": _pattern((), marks), "cluster": _cluster(fs, task)}
    flaky.sort(key=lambda r: (-float(r["flip_rate"] or 0), r["task"], r["agent"]))
    return {
        "evaluator": {"name": EVALUATOR_NAME, "version": EVALUATOR_VERSION},
        "run_id": fs.run_id,
        "level": level,
        "cluster_rule": CLUSTER_RULE,
        "count_infra": count_infra,
        "overall": summary(rows, "all"),
        "per_agent": agents_out,
        "per_tier": {t: summary(rs, "tier", t) for t, rs in sorted(per_tier.items())},
        "pass_k": _pass_k(groups),
        "tasks": tasks_out,
        "flaky": {"count": len(flaky), "listed": flaky[:LIST_LIMIT]},
        "infra": {"attempts": len(scored), "failures": len(infra_rows),
                  "excluded": 0 if count_infra else len(infra_rows),
                  "by_kind": by_kind, "listed": infra_rows[:LIST_LIMIT]},
        "golden": golden_apart(scored, superseded, infra_of, count_infra),
    }


def golden_apart(scored: Sequence[AttemptFacts], superseded: Sequence[AttemptFacts],
                 marks: Mapping[str, tuple[str, str] | None],
                 count_infra: bool) -> dict[str, Any]:
    """The golden score (evaluators/score.py) and its components over the scored attempts less
    the infra failures (``marks``), or, with ``count_infra``, over all of them as failed
    attempts, which is exactly the golden view's ``score`` and ``per_agent`` scores."""
    kept = list(scored) if count_infra else [f for f in scored if marks[f.attempt] is None]
    comps = sc.components(kept, superseded)
    infra_n = sum(1 for f in scored if marks[f.attempt] is not None)
    per_agent: dict[str, dict[str, Any]] = {}
    for agent in sorted({f.agent or "unknown" for f in scored}):
        mine = [f for f in kept if (f.agent or "unknown") == agent]
        per_agent[agent] = {
            "score": sc.golden(sc.components(mine)), "attempts": len(mine),
            "passed": sum(1 for f in mine if f.passed),
            "infra_failures": sum(1 for f in scored if (f.agent or "unknown") == agent
                                  and marks[f.attempt] is not None)}
    return {"score": sc.golden(comps), "components": comps, "attempts": len(scored),
            "scored": len(kept), "infra_failures": infra_n,
            "infra_excluded": 0 if count_infra else infra_n, "count_infra": count_infra,
            "per_agent": per_agent}


def view_data_1_0(fs: FoldState) -> dict[str, Any]:
    """The statistics view as version 1.0.0 computed it (no ``golden`` section): what replay
    compares a 1.0.0 ``view.recorded`` with, so that runs recorded before 1.1.0 reproduce."""
    out = view_data(fs)
    del out["golden"]
    out["evaluator"] = {"name": EVALUATOR_NAME, "version": "1.0.0"}
    return out


def _cluster(fs: FoldState, task: str) -> str:
    info = fs.tasks.get(task)
    return info.cluster if info is not None and info.cluster else "task:" + task


def view(state: FoldState) -> dict[str, Any]:
    """The recorded statistics view (infra failures excluded), normalised."""
    out: dict[str, Any] = views.normalize(view_data(state))
    return out


# what views.replay takes to replay this view in the golden evaluator's pass, and the views of
# older versions (a view.recorded names its version: each is replayed by the code of its own)
EVALUATORS = {EVALUATOR_NAME: (EVALUATOR_VERSION, view_data)}
OLDER = {f"{EVALUATOR_NAME}@1.0.0": view_data_1_0}


def start(run_id: str | None) -> FoldState:
    return new_state(run_id)


def stats_of(entries: Iterable[Entry], run_id: str | None = None, *, count_infra: bool = False,
             level: float = st.LEVEL) -> dict[str, Any]:
    """The statistics view of a run from its entries (what ``ledger report`` shows)."""
    out: dict[str, Any] = views.normalize(
        view_data(fold_all(entries, new_state(run_id)), count_infra=count_infra, level=level))
    return out


def infra_attempts(entries: Iterable[Entry], run_id: str) -> dict[str, str]:
    """attempt id -> infra kind, for every scored attempt of the run that is an infra failure
    (what ``ledger run --resume RUN --retry infra`` runs again)."""
    fs = fold_all(entries, new_state(run_id))
    scored, _ = facts_of(fs)
    out = {}
    for f in scored:
        mark = infra_kind(f, fs.attempts.get(f.attempt))
        if mark is not None:
            out[f.attempt] = mark[0]
    return out


def replay(entries: Iterable[Entry], run_id: str) -> views.ReplayResult:
    """Recompute every recorded statistics view of ``run_id`` and compare it field by field
    (one fold; with the golden view too when the run recorded both: evaluators/registry.py)."""
    return views.replay(entries, run_id, evaluators=EVALUATORS, golden=False, older=OLDER)


__all__ = ["CLUSTER_RULE", "EVALUATOR_NAME", "EVALUATOR_VERSION", "INFRA_KINDS", "OLDER", "Row",
           "golden_apart", "view_data_1_0",
           "infra_attempts", "infra_kind", "replay", "start", "stats_of", "view", "view_data"]
