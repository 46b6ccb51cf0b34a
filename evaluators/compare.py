"""Compare the views of two runs: score and component deltas, per-task changes, warnings.

A task *passes* in a run when it was attempted and every scored attempt of it passed (so with
repeats, 2 of 3 is not passing). Deltas are ``b - a``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

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
_MASK64 = (1 << 64) - 1


def _splitmix64(seed: int) -> Any:
    """A tiny deterministic generator (SplitMix64): the same seed gives the same draws anywhere."""
    state = seed & _MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        yield z ^ (z >> 31)


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
    draws = _splitmix64(seed)
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
