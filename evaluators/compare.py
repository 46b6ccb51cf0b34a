"""Compare the views of two runs: score and component deltas, per-task changes, warnings.

A task *passes* in a run when it was attempted and every scored attempt of it passed (so with
repeats, 2 of 3 is not passing). Deltas are ``b - a``.
"""

from __future__ import annotations

from collections.abc import Mapping
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
        "warnings": warnings,
    }
    result: dict[str, Any] = normalize(out)
    return result
