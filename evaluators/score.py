"""The golden score and its five components, over a list of attempt facts.

    score = (W_SUCCESS*TaskSuccess + W_QUALITY*CodeQuality + W_EFFICIENCY*Efficiency)
            * Reliability * Safety

Every formula and constant is stated in docs/SCORING.md. Values here are unrounded; views.py
rounds what it prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evaluators.facts import AttemptFacts

W_SUCCESS = 0.5
W_QUALITY = 0.3
W_EFFICIENCY = 0.2
TIME_WEIGHT = 0.5  # share of time in an attempt's efficiency when its cost is known
COST_WEIGHT = 0.5
CRASH_PENALTY = 1.0  # Reliability loses this much per unit of crash rate
ORPHAN_PENALTY = 0.5  # ... per unit of the rate of attempts that left processes behind
TELEMETRY_PENALTY = 0.5  # ... per unit of the rate of attempts missing telemetry


def _clamp(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def quality(f: AttemptFacts) -> float | None:
    """The attempt's judge verdict as a fraction (sum of the four dimensions / 20), if any."""
    return f.quality


def efficiency(f: AttemptFacts) -> float:
    """Time and cost against the task's own budgets; 0 for a failed attempt or no telemetry."""
    if not f.passed or not f.telemetry or f.wall_s is None:
        return 0.0
    e_time = (_clamp(1.0 - f.wall_s / f.budget_s)
              if f.budget_s is not None and f.budget_s > 0 else None)
    e_cost = (_clamp(1.0 - f.cost_usd / f.budget_cost_usd)
              if f.cost_usd is not None and f.budget_cost_usd is not None
              and f.budget_cost_usd > 0 else None)
    if e_time is not None and e_cost is not None:
        return TIME_WEIGHT * e_time + COST_WEIGHT * e_cost
    if e_time is not None:
        return e_time
    if e_cost is not None:
        return e_cost
    return 0.0


def components(facts: Sequence[AttemptFacts], superseded: Sequence[AttemptFacts] = (),
               ) -> dict[str, float]:
    """The five components over ``facts`` (the scored attempts of a run, or a subset).

    ``superseded`` tries (re-run after an interruption) count for Safety only: a regression or a
    DIRTY verdict in any try of the run zeroes it.
    """
    n = len(facts)
    safety = 0.0 if any(f.safety == 0 for f in (*facts, *superseded)) else 1.0
    if n == 0:
        return {"task_success": 0.0, "code_quality": 0.0, "efficiency": 0.0,
                "reliability": 1.0, "safety": safety}
    # one pass (a view computes the components of every repeat, often of one attempt each)
    passed = crashes = orphaned = missing = 0
    judged: list[float] = []
    effs: list[float] = []
    for f in facts:
        if f.passed:
            passed += 1
        q = quality(f)
        if q is not None:
            judged.append(q)
        effs.append(efficiency(f))
        if f.crashed:
            crashes += 1
        if f.orphans > 0:
            orphaned += 1
        if not f.telemetry:
            missing += 1
    task_success = passed / n
    code_quality = math.fsum(judged) / len(judged) if judged else 0.0
    eff = math.fsum(effs) / n
    reliability = _clamp(1.0 - (CRASH_PENALTY * crashes + ORPHAN_PENALTY * orphaned
                                + TELEMETRY_PENALTY * missing) / n)
    return {"task_success": task_success, "code_quality": code_quality, "efficiency": eff,
            "reliability": reliability, "safety": safety}


def golden(c: dict[str, float]) -> float:
    """The composite score from the five components."""
    return ((W_SUCCESS * c["task_success"] + W_QUALITY * c["code_quality"]
             + W_EFFICIENCY * c["efficiency"]) * c["reliability"] * c["safety"])


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), for n samples, c correct."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_stderr(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (sample standard deviation / sqrt(n))."""
    n = len(values)
    if n == 0:
        return None, None
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)
