"""Power planning: how many tasks and repeats a paired comparison of two agents needs to detect
a given difference in pass rate (docs/SCORING.md, "Power planning").

    plan(0.05)                                  stated assumptions
    plan(0.05, stats=view, agents=("a", "b"))   the variances and correlation an earlier run
                                                (its statistics view) observed

Per task i, each side's outcome over K repeats averages to its true pass probability p_i plus
noise of variance w / K (w: the within-task variance of one repeat, p_i (1 - p_i) on average).
The paired difference of two agents over n tasks then has variance
    (var_a + var_b - 2 rho sqrt(var_a var_b) + (w_a + w_b) / K) / n
(var_*: between-task variance of p_i; rho: their correlation across tasks), and a two-sided test
at level alpha with the given power needs n = ((z_{1-alpha/2} + z_power) sd / delta)^2 tasks
(evaluators/stats.py ``tasks_needed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluators import stats as st

REPEATS = (1, 2, 3, 5, 10)
# Stated assumptions without an earlier run: pass probabilities spread around 0.5 so that half
# of a repeat's Bernoulli variance (0.25) lies between tasks and half within them, and two agents'
# per-task probabilities correlated 0.5 (0.3-0.7 for frontier models: Miller 2024, arXiv
# 2411.00640).
ASSUMED_BETWEEN = 0.125
ASSUMED_WITHIN = 0.125
ASSUMED_CORRELATION = 0.5


@dataclass(frozen=True)
class _Observed:
    rates: dict[str, float]  # task -> pass rate
    between: float | None  # between-task variance of the true pass probability
    within: float | None  # mean within-task variance of one repeat


def _observed(stats: Mapping[str, Any], agent: str) -> _Observed:
    """Per-task pass rates of ``agent``, their between-task variance (less the within-task noise
    of the repeats observed) and the mean within-task variance of one repeat."""
    rates: dict[str, float] = {}
    within: list[float] = []
    repeats: list[int] = []
    for task, by_agent in stats.get("tasks", {}).items():
        row = by_agent.get(agent)
        if not row or not row.get("n"):
            continue
        n, c = int(row["n"]), int(row["passed"])
        rates[task] = c / n
        repeats.append(n)
        if n >= 2:
            within.append(c * (n - c) / (n * (n - 1)))  # unbiased p (1 - p) of one repeat
    w = st.mean(within) if within else None
    total = st.variance(list(rates.values()))
    k = st.mean([float(r) for r in repeats]) or 1.0
    between = max(0.0, (total or 0.0) - (w or 0.0) / k) if total is not None else None
    return _Observed(rates, between, w)


def plan(detect: float, *, stats: Mapping[str, Any] | None = None,
         agents: Sequence[str] = (), power: float = st.POWER, level: float = st.LEVEL,
         repeats: Sequence[int] = REPEATS) -> dict[str, Any]:
    """Tasks needed per number of repeats to detect a pass-rate difference ``detect``."""
    if not 0 < detect < 1:
        raise ValueError("the difference to detect must lie between 0 and 1 (a pass rate)")
    notes: list[str] = []
    source: dict[str, Any] = {"run": None, "agents": list(agents)}
    var_a = var_b = ASSUMED_BETWEEN
    within_a = within_b = ASSUMED_WITHIN
    corr = ASSUMED_CORRELATION
    if stats is not None:
        names = list(agents) or sorted(stats.get("per_agent", {}))[:2]
        missing = [a for a in names if a not in stats.get("per_agent", {})]
        if missing or not names:
            raise KeyError(f"the run has no scored attempt of {', '.join(missing) or 'any agent'}")
        if len(names) == 1:
            names = [names[0], names[0]]
            notes.append("one agent: its variances stand for both sides; the correlation is "
                         "assumed")
        source = {"run": stats.get("run_id"), "agents": names}
        oa, ob = _observed(stats, names[0]), _observed(stats, names[1])
        if oa.between is not None:
            var_a = oa.between
        if ob.between is not None:
            var_b = ob.between
        if oa.within is not None:
            within_a = oa.within
        else:
            notes.append(f"{names[0]}: one repeat per task, within-task variance assumed")
        if ob.within is not None:
            within_b = ob.within
        elif names[1] != names[0]:
            notes.append(f"{names[1]}: one repeat per task, within-task variance assumed")
        common = sorted(set(oa.rates) & set(ob.rates))
        r = (st.correlation([oa.rates[t] for t in common], [ob.rates[t] for t in common])
             if names[0] != names[1] else None)
        if r is not None:
            corr = r
        elif names[0] != names[1]:
            notes.append("the per-task pass rates do not vary: correlation assumed")
    table = []
    for k in repeats:
        sd = st.paired_sd(var_a, var_b, corr, within_a, within_b, k)
        table.append({"repeats": k, "sd": sd,
                      "tasks": st.tasks_needed(detect, sd, level=level, power=power)
                      if sd > 0 else 2})
    return {"detect": detect, "power": power, "level": level, "source": source,
            "var_a": var_a, "var_b": var_b, "within_a": within_a, "within_b": within_b,
            "correlation": corr, "table": table, "notes": notes,
            "assumed": stats is None}


__all__ = ["ASSUMED_BETWEEN", "ASSUMED_CORRELATION", "ASSUMED_WITHIN", "REPEATS", "plan"]
