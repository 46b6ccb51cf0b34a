"""Compare the views of two runs: score and component deltas, per-task changes, warnings; and
paired comparisons of agents across runs or inside one (``paired_comparisons``: the paired
difference with its clustered standard error, McNemar's exact test, the paired bootstrap, Holm).

A task *passes* in a run when it was attempted and every scored attempt of it passed (so with
repeats, 2 of 3 is not passing). Deltas are ``b - a``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluators import stats as st
from evaluators.views import normalize

COMPONENTS = ("task_success", "code_quality", "efficiency", "reliability", "safety")


def _delta(a: Any, b: Any) -> dict[str, Any]:
    numeric = (isinstance(a, int | float) and not isinstance(a, bool)
               and isinstance(b, int | float) and not isinstance(b, bool))
    return {"a": a, "b": b, "delta": (b - a) if numeric else None}


def _passing(task: Mapping[str, Any]) -> bool:
    return bool(task.get("attempts")) and task.get("passed") == task.get("attempts")


def compare(views_a: Mapping[str, Any], views_b: Mapping[str, Any]) -> dict[str, Any]:
    """The difference from run A to run B, as a normalised map (see module docstring)."""
    comps_a = views_a.get("components", {})
    comps_b = views_b.get("components", {})
    tiers = sorted(set(views_a.get("per_tier", {})) | set(views_b.get("per_tier", {})))
    per_tier = {t: _delta(views_a.get("per_tier", {}).get(t, {}).get("pass_rate"),
                          views_b.get("per_tier", {}).get(t, {}).get("pass_rate"))
                for t in tiers}
    tasks_a: Mapping[str, Any] = views_a.get("tasks", {})
    tasks_b: Mapping[str, Any] = views_b.get("tasks", {})
    common = sorted(set(tasks_a) & set(tasks_b))
    newly_passing = [t for t in common if _passing(tasks_b[t]) and not _passing(tasks_a[t])]
    newly_failing = [t for t in common if _passing(tasks_a[t]) and not _passing(tasks_b[t])]
    changed = [{"task": t, **_delta(tasks_a[t].get("pass_rate"), tasks_b[t].get("pass_rate"))}
               for t in common if tasks_a[t].get("pass_rate") != tasks_b[t].get("pass_rate")]
    only_a = sorted(set(tasks_a) - set(tasks_b))
    only_b = sorted(set(tasks_b) - set(tasks_a))
    hash_differs = sorted(t for t in common
                          if tasks_a[t].get("hash") != tasks_b[t].get("hash"))
    warnings = []
    if only_a or only_b:
        warnings.append(f"the task sets differ: {len(only_a)} task(s) only in A, "
                        f"{len(only_b)} only in B")
    if hash_differs:
        warnings.append(f"{len(hash_differs)} task(s) changed between the runs (task hashes "
                        f"differ): {', '.join(hash_differs[:5])}"
                        + (" ..." if len(hash_differs) > 5 else ""))
    for name, v in (("A", views_a), ("B", views_b)):
        if v.get("status") != "finished":
            warnings.append(f"run {name} ({v.get('run_id')}) is {v.get('status')}")
    evaluators = (views_a.get("evaluator"), views_b.get("evaluator"))
    if evaluators[0] != evaluators[1]:
        warnings.append("the views were computed by different evaluator versions")
    out = {
        "run_a": views_a.get("run_id"),
        "run_b": views_b.get("run_id"),
        "score": _delta(views_a.get("score"), views_b.get("score")),
        "components": {c: _delta(comps_a.get(c), comps_b.get(c)) for c in COMPONENTS},
        "per_tier": per_tier,
        "cost_total": _delta(views_a.get("cost_total"), views_b.get("cost_total")),
        "tasks": {"newly_passing": newly_passing, "newly_failing": newly_failing,
                  "only_in_a": only_a, "only_in_b": only_b, "changed": changed},
        "task_hashes_differ": hash_differs,
        "same_task_set": not (only_a or only_b or hash_differs),
        "paired": paired(views_a.get("attempts", []), views_b.get("attempts", [])),
        "warnings": warnings,
    }
    result: dict[str, Any] = normalize(out)
    return result


# ---------------------------------------------------------------------------- paired comparison

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
def _per_task(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    by_task: dict[str, list[int]] = {}
    for r in rows:
        task = r.get("task")
        if isinstance(task, str):
            by_task.setdefault(task, []).append(1 if r.get("passed") else 0)
    return {t: sum(v) / len(v) for t, v in by_task.items()}


def paired(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], *,
           seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """Paired difference of pass rates (B - A) over the tasks both sides attempted.

    ``rows_*`` are attempt rows of a view (``task``, ``passed``). Each task's pass rate is the
    fraction of its scored attempts (repeats) that passed; the difference is the mean over the
    common tasks of ``rate_b - rate_a``. The confidence interval is the percentile bootstrap over
    tasks (``resamples`` draws of the task list with replacement, SplitMix64 from ``seed``), so the
    same input and seed give the same interval on any machine. ``significant`` is True when the
    interval excludes 0.
    """
    a, b = _per_task(rows_a), _per_task(rows_b)
    tasks = sorted(set(a) & set(b))
    n = len(tasks)
    if n == 0:
        empty: dict[str, Any] = normalize({
            "metric": "pass_rate", "tasks": 0, "mean_a": None, "mean_b": None,
            "difference": None, "ci_low": None, "ci_high": None, "confidence": CONFIDENCE,
            "resamples": 0, "seed": seed, "significant": False, "wins_a": 0, "wins_b": 0,
            "ties": 0})
        return empty
    diffs = [b[t] - a[t] for t in tasks]
    mean = math.fsum(diffs) / n
    draws = st.splitmix64(seed)
    means = []
    for _ in range(resamples):
        total = math.fsum(diffs[next(draws) % n] for _ in range(n))
        means.append(total / n)
    means.sort()
    tail = (1.0 - CONFIDENCE) / 2
    lo = means[int(math.floor(tail * (resamples - 1)))]
    hi = means[int(math.ceil((1.0 - tail) * (resamples - 1)))]
    out = {
        "metric": "pass_rate", "tasks": n,
        "mean_a": math.fsum(a[t] for t in tasks) / n, "mean_b": math.fsum(b[t] for t in tasks) / n,
        "difference": mean, "ci_low": lo, "ci_high": hi, "confidence": CONFIDENCE,
        "resamples": resamples, "seed": seed, "significant": lo > 0 or hi < 0,
        "wins_a": sum(1 for d in diffs if d < 0), "wins_b": sum(1 for d in diffs if d > 0),
        "ties": sum(1 for d in diffs if d == 0),
    }
    result: dict[str, Any] = normalize(out)
    return result


# ---------------------------------------------------------------------------- paired statistics

@dataclass(frozen=True)
class Side:
    """One side of a paired comparison: an agent's tasks in a statistics view
    (evaluators/stats_view.py ``view["tasks"]``), named ``label``."""

    label: str
    run: str | None
    agent: str
    tasks: Mapping[str, Mapping[str, Any]]  # task -> that agent's row {n, passed, score_mean, ...}


def side(stats: Mapping[str, Any], agent: str, label: str | None = None) -> Side:
    """The side of ``agent`` in a statistics view."""
    rows = {t: by_agent[agent] for t, by_agent in stats.get("tasks", {}).items()
            if agent in by_agent and by_agent[agent].get("n")}
    return Side(label or agent, stats.get("run_id"), agent, rows)


def _repeat_pairs(pa: str, pb: str) -> tuple[int, int, int, int]:
    """(pairs, only A passed, only B passed, both passed) over the repeats both patterns
    scored (the same task and repeat: McNemar's pairs)."""
    pairs = b_only = a_only = both = 0
    for x, y in zip(pa, pb, strict=False):
        if x in "01" and y in "01":
            pairs += 1
            a_only += x == "1" and y == "0"
            b_only += x == "0" and y == "1"
            both += x == "1" and y == "1"
    return pairs, a_only, b_only, both


def _paired_interval(diffs: Sequence[float], clusters: Sequence[str],
                     level: float) -> dict[str, Any]:
    """The mean paired difference with its standard error and t interval: clustered (CR1,
    df = clusters - 1) when tasks share clusters and there are at least two, else naive
    (df = n - 1)."""
    n = len(diffs)
    out: dict[str, Any] = {"difference": st.mean(diffs), "stderr": None, "low": None,
                           "high": None, "df": None, "clustered": False,
                           "clusters": len(set(clusters)), "naive_stderr": None,
                           "design_effect": None}
    if n < 2:
        return out
    c = st.clustered(diffs, clusters)
    out["naive_stderr"], out["design_effect"] = c["naive_stderr"], c["design_effect"]
    big_g = len(set(clusters))
    if c["stderr"] is not None and big_g < n:
        se, df, out["clustered"] = float(c["stderr"]), big_g - 1, True
    else:
        se, df = float(c["naive_stderr"] or 0.0), n - 1
    half = st.t_quantile(1.0 - (1.0 - level) / 2.0, df) * se
    m = float(out["difference"])
    out.update(stderr=se, low=m - half, high=m + half, df=df)
    return out


def paired_comparison(a: Side, b: Side, *, seed: int, level: float = st.LEVEL,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """B - A over the tasks both sides scored (docs/SCORING.md, "Paired comparisons").

    Per task, the pass rate (passed / scored repeats) and the mean score; the paired
    difference of pass rates with its (clustered) standard error and t interval; McNemar's
    exact test on the pass/fail pairs of the same task and repeat; the paired percentile
    bootstrap of score differences over tasks (``resamples`` draws from ``seed``).
    """
    tasks = sorted(set(a.tasks) & set(b.tasks))
    pass_diffs, score_diffs, clusters, rows = [], [], [], []
    pairs = a_only = b_only = 0
    for t in tasks:
        ra, rb = a.tasks[t], b.tasks[t]
        pa, pb = ra["passed"] / ra["n"], rb["passed"] / rb["n"]
        pass_diffs.append(pb - pa)
        sa, sb = ra.get("score_mean"), rb.get("score_mean")
        if isinstance(sa, int | float) and isinstance(sb, int | float):
            score_diffs.append(float(sb) - float(sa))
        clusters.append(str(ra.get("cluster") or rb.get("cluster") or "task:" + t))
        n, x, y, z = _repeat_pairs(str(ra.get("pattern", "")), str(rb.get("pattern", "")))
        pairs, a_only, b_only = pairs + n, a_only + x, b_only + y
        # the task's outcome pairs (same repeat on both sides), which sum to the comparison's
        rows.append({"task": t, "a": ra.get("pattern"), "b": rb.get("pattern"),
                     "a_rate": pa, "b_rate": pb, "difference": pb - pa,
                     "pairs": n, "both": z, "a_only": x, "b_only": y, "neither": n - x - y - z})
    interval = _paired_interval(pass_diffs, clusters, level)
    boot = st.bootstrap_mean(score_diffs, seed, resamples, level)
    p = st.mcnemar_exact(a_only, b_only)
    n_tasks = len(tasks)
    out = {
        "a": {"label": a.label, "run": a.run, "agent": a.agent},
        "b": {"label": b.label, "run": b.run, "agent": b.agent},
        "tasks": n_tasks, "level": level,
        "pairs": pairs, "discordant": a_only + b_only, "a_only": a_only, "b_only": b_only,
        "pass_rate": {"a": math.fsum(a.tasks[t]["passed"] / a.tasks[t]["n"] for t in tasks)
                      / n_tasks if n_tasks else None,
                      "b": math.fsum(b.tasks[t]["passed"] / b.tasks[t]["n"] for t in tasks)
                      / n_tasks if n_tasks else None, **interval},
        "mcnemar": {"p": p, "p_holm": p},
        "score": {"difference": st.mean(score_diffs), "tasks": len(score_diffs),
                  "low": boot[0] if boot else None, "high": boot[1] if boot else None,
                  "resamples": resamples if boot else 0, "seed": seed},
        "pairs_by_task": rows,
    }
    return out


def _excludes_zero(low: Any, high: Any) -> bool:
    return low is not None and high is not None and (low > 0 or high < 0)


def paired_comparisons(pairs: Sequence[tuple[Side, Side]], *, seed_parts: Sequence[str] = (),
                       level: float = st.LEVEL) -> dict[str, Any]:
    """Every paired comparison in ``pairs``, with Holm's correction of the McNemar p-values
    across them and, per comparison, whether each difference is distinguishable from zero at
    ``level``: pass/fail when the Holm-adjusted McNemar p < 1 - level, scores when the paired
    bootstrap interval excludes 0. Seeds: ``stats.seed_of(*seed_parts, A, B)``."""
    out = [paired_comparison(a, b, level=level,
                             seed=st.seed_of(*seed_parts, a.label, b.label))
           for a, b in pairs]
    adjusted = st.holm([c["mcnemar"]["p"] for c in out])
    alpha = 1.0 - level
    for c, p in zip(out, adjusted, strict=True):
        c["mcnemar"]["p_holm"] = p
        c["mcnemar"]["comparisons"] = len(out)
        c["distinguishable"] = c["tasks"] > 0 and p < alpha
        c["score"]["distinguishable"] = _excludes_zero(c["score"]["low"], c["score"]["high"])
        c["pass_rate"]["interval_excludes_zero"] = _excludes_zero(c["pass_rate"]["low"],
                                                                  c["pass_rate"]["high"])
    result: dict[str, Any] = normalize({"level": level, "correction": "holm",
                                        "comparisons": out})
    return result
