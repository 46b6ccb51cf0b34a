"""The comparison part of ``ledger view``: who passed what, per task and agent, with the
statistics view's intervals, flaky tasks and infra failures (evaluators/stats_view.py) and the
paired comparisons of ``ledger compare --agents`` (evaluators/compare.py), for one run, and,
for two runs, the same agents' per-task outcomes side by side (``ledger compare RUN_A RUN_B``).

``comparison_body`` is the content of the separate comparison page (``ledger view`` writes it
beside the report, ``--serve`` serves it at ``/compare.html``; the report links to it): for every
two agents of a run, and the same agents of two runs, per task both sides' repeats and the
outcome pairs of the same repeat (both passed, only A, only B, neither) with their sums, which
are the pairs McNemar's test counts.

Every figure is the evaluators'; this module only lays them out. A pattern has one character
per repeat: ``1`` passed, ``0`` failed, ``x`` infra failure (excluded), ``.`` not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from evaluators.compare import Side, paired_comparisons, side


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{_f(low)}, {_f(high)}]"


def _pattern_cell(row: Mapping[str, Any] | None) -> str:
    """One task x agent cell: its pattern and passed/scored, coloured by what it says."""
    if row is None:
        return "<td class=meta>not run</td>"
    n, c, pattern = row.get("n") or 0, row.get("passed") or 0, str(row.get("pattern") or "")
    cls = "meta" if n == 0 else "ok" if c == n else "bad" if c == 0 else "warn"
    title = ("every attempt an infra failure" if n == 0 else "passed every repeat" if c == n
             else "failed every repeat" if c == 0 else "flaky: passed some repeats")
    return (f"<td class={cls} title='{_e(title)}'><code>{_e(pattern)}</code> "
            f"{c}/{n}</td>")


def _intervals(s: Mapping[str, Any]) -> str:
    golden = s.get("golden") or {}
    flaky_by: dict[str, int] = {}
    for f in (s.get("flaky") or {}).get("listed", []):
        flaky_by[f["agent"]] = flaky_by.get(f["agent"], 0) + 1
    rows = []
    for agent, r in s["per_agent"].items():
        pr, score = r["pass_rate"], r["score"]
        infra = (golden.get("per_agent") or {}).get(agent, {}).get("infra_failures", "-")
        rows.append(
            f"<tr><td>{_e(agent)}</td><td class=n>{r['passed']}/{r['attempts']}</td>"
            f"<td class=n>{_f(pr['value'])}</td><td class=n>{_interval(pr['low'], pr['high'])}</td>"
            f"<td class=n>{_f(score['mean'])}</td>"
            f"<td class=n>{_interval(score['low'], score['high'])}</td>"
            f"<td class=n>{_f(r['clustered']['pass_rate']['stderr'])}</td>"
            f"<td class=n>{_e(infra)}</td><td class=n>{flaky_by.get(agent, 0)}</td></tr>")
    level = f"{round(100 * float(s['level']))}%"
    return (f"<h4>Rates with {level} intervals</h4><table data-testid=intervals><tr><th>agent</th>"
            "<th class=n>passed</th><th class=n>pass rate</th><th class=n>Wilson interval</th>"
            "<th class=n>score mean</th><th class=n>t interval</th><th class=n>clustered SE</th>"
            "<th class=n>infra failures</th><th class=n>flaky tasks</th></tr>"
            + "".join(rows) + "</table>")


def _who_passed(s: Mapping[str, Any], agents: Sequence[str]) -> str:
    rows = []
    for task, by_agent in sorted(s["tasks"].items()):
        winners = [a for a in agents if by_agent.get(a, {}).get("n")
                   and by_agent[a]["passed"] == by_agent[a]["n"]]
        rows.append(f"<tr data-task='{_e(task)}'><td>{_e(task)}</td>"
                    + "".join(_pattern_cell(by_agent.get(a)) for a in agents)
                    + f"<td>{_e(', '.join(winners) or 'none')}</td></tr>")
    head = "".join(f"<th>{_e(a)}</th>" for a in agents)
    return ("<h4>Who passed what</h4><p class=meta>Per task and agent, one character per repeat: "
            "1 passed, 0 failed, x infra failure (excluded), . not run; then passed/scored.</p>"
            f"<table data-testid=who-passed><tr><th>task</th>{head}<th>passed every repeat</th>"
            "</tr>" + "".join(rows) + "</table>")


def _paired(ps: Mapping[str, Any], caption: str) -> str:
    if not ps["comparisons"]:
        return ""
    alpha = f"{round(100 * (1 - float(ps['level'])), 1):g}%"
    rows = []
    for c in ps["comparisons"]:
        m, pr = c["mcnemar"], c["pass_rate"]
        words = ("distinguishable from zero" if c["distinguishable"]
                 else "not distinguishable from zero")
        rows.append(
            f"<tr><td>{_e(c['b']['label'])} vs {_e(c['a']['label'])}</td>"
            f"<td class=n>{c['tasks']}</td><td class=n>{c['b_only']}</td>"
            f"<td class=n>{c['a_only']}</td><td class=n>{_f(pr.get('difference'))}</td>"
            f"<td class=n>{_interval(pr.get('low'), pr.get('high'))}</td>"
            f"<td class=n>{m['p']:.4g}</td><td class=n>{m['p_holm']:.4g}</td>"
            f"<td class={'ok' if c['distinguishable'] else 'meta'}>{words} at {alpha}</td></tr>")
    pairs = "".join(
        f"<tr><td>{_e(c['b']['label'])} vs {_e(c['a']['label'])}</td><td>{_e(r['task'])}</td>"
        f"<td><code>{_e(r['a'])}</code></td><td><code>{_e(r['b'])}</code></td>"
        f"<td class=n>{_f(r['difference'])}</td></tr>"
        for c in ps["comparisons"] for r in c["pairs_by_task"] if r["difference"])
    return (f"<h4>{_e(caption)}</h4><table data-testid=paired><tr><th>B vs A</th>"
            "<th class=n>common tasks</th><th class=n>only B passed</th>"
            "<th class=n>only A passed</th><th class=n>B - A pass rate</th>"
            "<th class=n>interval</th><th class=n>McNemar p</th><th class=n>Holm p</th><th></th>"
            "</tr>" + "".join(rows) + "</table>"
            + ("<h4>Tasks where the two sides differ</h4><table data-testid=differing>"
               "<tr><th>B vs A</th><th>task</th><th>A</th><th>B</th><th class=n>B - A</th></tr>"
               + pairs + "</table>" if pairs else "<p class=meta>no task differs</p>"))


def _flaky_and_infra(s: Mapping[str, Any]) -> str:
    flaky = s["flaky"]
    items = "".join(f"<li>{_e(f['task'])} ({_e(f['agent'])}): {f['passed']} of {f['n']} passed, "
                    f"flip rate {_f(f['flip_rate'])}</li>" for f in flaky["listed"])
    inf = s["infra"]
    kinds = ", ".join(f"{k} {n}" for k, n in inf["by_kind"].items() if n) or "none"
    listed = "".join(f"<li><code>{_e(r['attempt'])}</code> {_e(r['kind'])}: {_e(r['detail'])}"
                     "</li>" for r in inf["listed"])
    excluded = ("counted as failures" if s.get("count_infra") else "excluded")
    return (f"<h4>Flaky tasks ({flaky['count']})</h4>"
            + (f"<ul data-testid=flaky>{items}</ul>" if items else "<p class=meta>none</p>")
            + f"<h4>Infra failures ({inf['failures']})</h4><p data-testid=infra-failures>over "
            f"{inf['attempts']} attempts, {inf['failures']} infra failure(s) {excluded}; "
            f"by kind: {_e(kinds)}</p>" + (f"<ul>{listed}</ul>" if listed else ""))


def run_comparison(s: Mapping[str, Any]) -> str:
    """One run's comparison section from its statistics view (``stats_view.stats_of``)."""
    agents = sorted(s["per_agent"])
    pairs = [(side(s, a), side(s, b)) for i, a in enumerate(agents) for b in agents[i + 1:]]
    ps = paired_comparisons(pairs, seed_parts=(str(s["run_id"]),), level=float(s["level"]))
    return (f"<section class=compare data-testid=comparison data-run='{_e(s['run_id'])}'>"
            f"<h3>Comparison of {len(agents)} agent(s)</h3>"
            + _intervals(s) + _who_passed(s, agents)
            + _paired(ps, "Agents paired on the same tasks (McNemar exact, Holm across the "
                          "comparisons)")
            + _flaky_and_infra(s) + "</section>")


def _cross_pairs(sa: Mapping[str, Any], sb: Mapping[str, Any]) -> list[tuple[Side, Side]]:
    """The same-named agents of run A and run B (or the two runs' single agents)."""
    common = sorted(set(sa["per_agent"]) & set(sb["per_agent"]))
    if not common and len(sa["per_agent"]) == 1 == len(sb["per_agent"]):
        (x,), (y,) = list(sa["per_agent"]), list(sb["per_agent"])
        return [(side(sa, x, f"A:{x}"), side(sb, y, f"B:{y}"))]
    return [(side(sa, x, f"A:{x}"), side(sb, x, f"B:{x}")) for x in common]


def _cross(sa: Mapping[str, Any], sb: Mapping[str, Any]) -> dict[str, Any] | None:
    pairs = _cross_pairs(sa, sb)
    if not pairs:
        return None
    return paired_comparisons(pairs, seed_parts=(str(sa["run_id"]), str(sb["run_id"])),
                              level=float(sa["level"]))


def cross_run_comparison(sa: Mapping[str, Any], sb: Mapping[str, Any]) -> str:
    """Run A against run B: the same-named agents' per-task outcomes and paired tests."""
    ps = _cross(sa, sb)
    if ps is None:
        return "<p class=meta>the two runs share no agent to pair</p>"
    return ("<section class=compare data-testid=cross-comparison>"
            + _paired(ps, "The same agents in run A and run B, paired on common tasks")
            + "</section>")


# ---------------------------------------------------------------------------- the page

def _who(r: Mapping[str, Any], a: str, b: str) -> str:
    """Who passed the task: the sides that passed every repeat they scored."""
    ok_a, ok_b = r["a_rate"] == 1, r["b_rate"] == 1
    return "both" if ok_a and ok_b else a if ok_a else b if ok_b else "neither"


def _outcome_pairs(c: Mapping[str, Any]) -> str:
    """One comparison as the page shows it: per task, both sides' repeats and the pairs of the
    same repeat (both passed, only A, only B, neither), then their sums, which are the pairs
    McNemar's test counts."""
    a, b = str(c["a"]["label"]), str(c["b"]["label"])
    m, level = c["mcnemar"], float(c["level"])
    alpha = f"{round(100 * (1 - level), 1):g}%"
    words = ("distinguishable from zero" if c["distinguishable"]
             else "not distinguishable from zero")
    rows = "".join(
        f"<tr data-task='{_e(r['task'])}'><td>{_e(r['task'])}</td>"
        f"<td><code>{_e(r['a'])}</code></td><td><code>{_e(r['b'])}</code></td>"
        f"<td class=n>{r['both']}</td><td class=n>{r['a_only']}</td>"
        f"<td class=n>{r['b_only']}</td><td class=n>{r['neither']}</td>"
        f"<td>{_e(_who(r, a, b))}</td></tr>" for r in c["pairs_by_task"])
    rs = c["pairs_by_task"]
    both, neither = sum(r["both"] for r in rs), sum(r["neither"] for r in rs)
    totals = (f"<tr data-testid=totals><th>{c['tasks']} tasks</th><th></th><th></th>"
              f"<th class=n>{both}</th><th class=n>{c['a_only']}</th><th class=n>{c['b_only']}</th>"
              f"<th class=n>{neither}</th><th>{c['pairs']} pairs</th></tr>")
    summary = (f"over {c['tasks']} common task(s), {c['pairs']} pairs of the same repeat, "
               f"{c['discordant']} discordant ({c['a_only']} only {a}, {c['b_only']} only {b}); "
               f"{b} - {a} pass rate {_f(c['pass_rate'].get('difference'))} "
               f"{_interval(c['pass_rate'].get('low'), c['pass_rate'].get('high'))}; McNemar "
               f"exact p = {m['p']:.4g} (Holm {m['p_holm']:.4g}); {words} at {alpha}")
    return (f"<section class=compare data-testid=pair data-a='{_e(a)}' data-b='{_e(b)}'>"
            f"<h3>{_e(b)} vs {_e(a)}</h3><p data-testid=pair-summary>{_e(summary)}</p>"
            f"<table data-testid=outcome-pairs><tr><th>task</th><th>{_e(a)}</th><th>{_e(b)}</th>"
            f"<th class=n>both passed</th><th class=n>only {_e(a)}</th>"
            f"<th class=n>only {_e(b)}</th><th class=n>neither</th><th>passed the task</th></tr>"
            + rows + totals + "</table></section>")


def comparison_body(stats: Sequence[Mapping[str, Any] | None]) -> str:
    """The comparison page's content: in each run, every two agents; with two runs, the same
    agents of run A and run B; each pair task by task (the statistics views of the runs, None
    for a run without scored attempts)."""
    parts = []
    for s in stats:
        if s is None:
            continue
        agents = sorted(s["per_agent"])
        pairs = [(side(s, a), side(s, b)) for i, a in enumerate(agents) for b in agents[i + 1:]]
        parts.append(f"<h2>Run <code>{_e(s['run_id'])}</code>: {len(agents)} agent(s)</h2>")
        if not pairs:
            parts.append("<p class=meta>one agent: nothing to pair inside the run</p>")
            continue
        ps = paired_comparisons(pairs, seed_parts=(str(s["run_id"]),), level=float(s["level"]))
        parts.extend(_outcome_pairs(c) for c in ps["comparisons"])
    if len(stats) == 2 and stats[0] is not None and stats[1] is not None:
        parts.append(f"<h2>Run A <code>{_e(stats[0]['run_id'])}</code> against run B "
                     f"<code>{_e(stats[1]['run_id'])}</code></h2>")
        ps = _cross(stats[0], stats[1])
        if ps is None:
            parts.append("<p class=meta>the two runs share no agent to pair</p>")
        else:
            parts.extend(_outcome_pairs(c) for c in ps["comparisons"])
    return "".join(parts) or "<p class=meta>no scored attempts to compare</p>"


__all__ = ["comparison_body", "cross_run_comparison", "run_comparison"]
