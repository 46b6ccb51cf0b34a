"""The human-readable lines of the statistics: paired comparisons, intervals, flaky tasks, infra
failures, power plans (what ``compare``, ``report`` and ``plan`` print; the figures come from
evaluators/stats_view.py, evaluators/compare.py and evaluators/stats.py)."""

from __future__ import annotations

from typing import Any

from cli.table import grid as _table


def _s(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct_level(level: float) -> str:
    return f"{round(100 * level)}%"


def _alpha(level: float) -> str:
    a = round(100 * (1 - level), 1)
    return f"{a:g}%"


def verdict(c: dict[str, Any]) -> str:
    """In words: whether the pass/fail difference is distinguishable from zero at the level."""
    level = float(c["level"])
    if not c["tasks"]:
        return "no common task: nothing to compare"
    m = c["mcnemar"]
    holm = f", Holm-adjusted over {m['comparisons']}: {m['p_holm']:.4g}" if m.get(
        "comparisons", 1) > 1 else ""
    if c["distinguishable"]:
        better = c["b"]["label"] if c["b_only"] > c["a_only"] else c["a"]["label"]
        return (f"McNemar exact p = {m['p']:.4g}{holm}: the pass/fail difference is "
                f"distinguishable from zero at the {_alpha(level)} level ({better} passes more)")
    return (f"McNemar exact p = {m['p']:.4g}{holm}: the pass/fail difference is not "
            f"distinguishable from zero at the {_alpha(level)} level")


def score_verdict(c: dict[str, Any]) -> str:
    sc = c["score"]
    if sc["low"] is None:
        return "score: no paired scores"
    words = "distinguishable" if sc["distinguishable"] else "not distinguishable"
    return (f"score: {c['b']['label']} - {c['a']['label']} = {_s(sc['difference'])}, paired "
            f"bootstrap {_pct_level(float(c['level']))} CI [{_s(sc['low'])}, {_s(sc['high'])}] "
            f"over {sc['tasks']} task(s): {words} from zero")


def paired_lines(ps: dict[str, Any]) -> list[str]:
    """Every comparison of ``evaluators.compare.paired_comparisons`` in words."""
    lines: list[str] = []
    for c in ps["comparisons"]:
        a, b, pr = c["a"], c["b"], c["pass_rate"]
        lines.append(f"{b['label']} vs {a['label']}: n = {c['tasks']} common task(s), "
                     f"{c['pairs']} pair(s) of repeats, {c['discordant']} discordant "
                     f"({c['a_only']} only {a['label']} passed, {c['b_only']} only "
                     f"{b['label']} passed)")
        if c["tasks"]:
            how = (f"clustered by source over {pr['clusters']} clusters, design effect "
                   f"{_f(pr['design_effect'], 2)}" if pr["clustered"] else "naive")
            lines.append(f"  pass rate: {_f(pr['a'])} -> {_f(pr['b'])}, difference "
                         f"{_s(pr['difference'])}, SE {_f(pr['stderr'])} ({how}), "
                         f"{_pct_level(float(c['level']))} CI [{_s(pr['low'])}, "
                         f"{_s(pr['high'])}]")
        lines.append("  " + verdict(c))
        if c["tasks"]:
            lines.append("  " + score_verdict(c))
    return lines


def with_verdicts(ps: dict[str, Any]) -> dict[str, Any]:
    """The comparisons with their verdicts in words added (``--json``)."""
    out = dict(ps)
    out["comparisons"] = [{**c, "verdict": verdict(c),
                           "score_verdict": score_verdict(c) if c["tasks"] else None}
                          for c in ps["comparisons"]]
    return out


def pair_table(c: dict[str, Any], md: bool = False) -> list[str]:
    """Per task: who passed what (one character per repeat: 1 passed, 0 failed, x infra)."""
    return _table(["task", c["a"]["label"], c["b"]["label"], "difference"],
                  [[r["task"], r["a"] or "-", r["b"] or "-", _s(r["difference"], 2)]
                   for r in c["pairs_by_task"]], md)


def interval(r: dict[str, Any]) -> str:
    pr = r["pass_rate"]
    if pr["value"] is None:
        return "-"
    return f"{100 * pr['value']:.1f}% [{100 * pr['low']:.1f}, {100 * pr['high']:.1f}]"


def stats_lines(s: dict[str, Any], md: bool = False) -> list[str]:
    """The statistics section of ``ledger report``."""
    h = "## " if md else ""
    level = _pct_level(float(s["level"]))
    inf = s["infra"]
    lines = [f"{h}Statistics ({level} intervals; infra failures "
             f"{'counted as failures' if s['count_infra'] else 'excluded'})",
             f"over {inf['attempts']} attempts, {inf['failures']} infra failure(s) "
             + ("counted as failures" if s["count_infra"] else "excluded")
             + (": " + ", ".join(f"{k} {n}" for k, n in inf["by_kind"].items() if n)
                if inf["failures"] else "")]
    rows = []
    for name, r in [("all", s["overall"]), *s["per_agent"].items()]:
        sc, cl = r["score"], r["clustered"]
        rows.append([name, str(r["attempts"]), interval(r),
                     f"{_f(sc['mean'])} [{_f(sc['low'])}, {_f(sc['high'])}]",
                     _f(cl["pass_rate"]["stderr"]), _f(cl["pass_rate"]["design_effect"], 2),
                     _f(r["min_detectable_effect"])])
    lines += _table(["agent", "attempts", "pass rate (Wilson)", "score (t)", "clustered SE",
                     "design effect", "min detectable"], rows, md)
    tiers = [[t, str(r["attempts"]), interval(r)] for t, r in s["per_tier"].items()]
    if tiers:
        lines += ["", f"{h}Per tier, with intervals"]
        lines += _table(["tier", "attempts", "pass rate (Wilson)"], tiers, md)
    pk = s["pass_k"]
    if pk and pk[-1]["k"] > 1:
        lines += ["", "pass@k / pass^k: " + ", ".join(
            f"k={p['k']} {_f(p['pass_at_k'])} / {_f(p['pass_hat_k'])}" for p in pk)]
    fl = s["flaky"]
    if fl["count"]:
        lines += ["", f"{h}Flaky tasks ({fl['count']}: outcome flips across repeats)"]
        lines += _table(["task", "agent", "passed", "flip rate"],
                        [[r["task"], r["agent"], f"{r['passed']}/{r['n']}", _f(r["flip_rate"])]
                         for r in fl["listed"]], md)
    if inf["failures"]:
        lines += ["", f"{h}Infra failures"]
        lines += _table(["attempt", "kind", "detail"],
                        [[r["attempt"], r["kind"], r["detail"][:80]] for r in inf["listed"]], md)
    lines.append(f"clusters: {s['cluster_rule']}")
    return lines


def plan_lines(p: dict[str, Any]) -> list[str]:
    """``ledger plan`` in words."""
    lines = [f"To detect a difference of {p['detect']:g} in pass rate at {round(100 * p['power'])}% "
             f"power (two-sided, {_alpha(p['level'])} level):"]
    src = p["source"]
    lines.append("  from run " + src["run"] + " (" + ", ".join(src["agents"]) + "): "
                 if src.get("run") else "  assumptions (no earlier run given): ")
    lines[-1] += (f"between-task variance {p['var_a']:.4f} and {p['var_b']:.4f}, correlation "
                  f"{p['correlation']:.2f}, within-task variance {p['within_a']:.4f} and "
                  f"{p['within_b']:.4f} per repeat")
    lines += _table(["repeats", "tasks needed", "attempts per agent"],
                    [[str(r["repeats"]), str(r["tasks"]), str(r["tasks"] * r["repeats"])]
                     for r in p["table"]], False)
    for note in p["notes"]:
        lines.append("note: " + note)
    return lines
