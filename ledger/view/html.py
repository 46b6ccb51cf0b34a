"""Render report models as one self-contained HTML document (inline CSS, JS and SVG; no network).

The summary (scores, components, tiers, agents, charts, comparisons, the attempts table) is
rendered here as static HTML, so it reads without JavaScript. Each attempt's detail (diff,
transcript, tests, attestation evidence, timeline) is a JSON block in the same file that the
page's script parses only when the row is opened: a run of 1,000 attempts opens at once.
Every text from the journal is escaped here, or set with ``textContent`` by the script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from importlib import resources
from typing import Any

from evaluators.compare import COMPONENTS, compare
from evaluators.explore import TRANSCRIPT_KINDS, AttemptDetail, RunReport
from evaluators.score import W_EFFICIENCY, W_QUALITY, W_SUCCESS
from ledger.tasks.model import TIERS
from ledger.view.compare_page import comparison_body, cross_run_comparison, run_comparison

SIZE_MARK = "@@REPORT-SIZE@@"
PALETTE = ("#2456a6", "#c2410c", "#17803d", "#7c3aed", "#b42318", "#0e7490", "#a16207", "#be185d")


def _asset(name: str) -> str:
    return resources.files("ledger.view").joinpath("assets", name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cell(value: Any, key: str | None = None, digits: int = 4) -> str:
    """A numeric cell; ``data-k`` names the report field and ``data-v`` holds its exact JSON value."""
    attrs = ' class="n"'
    if key is not None:
        attrs += f' data-k="{_e(key)}" data-v="{_e(json.dumps(value))}"'
    return f"<td{attrs}>{_e(_num(value, digits))}</td>"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _json_block(element_id: str, value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    # "</" and "<!--" cannot end or confuse the script element; U+2028/9 are fine in JSON.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{_e(element_id)}">{text}</script>'


# --------------------------------------------------------------------------- charts (inline SVG)

def _bars_svg(per_agent: dict[str, Any], overall: dict[str, Any]) -> str:
    """Grouped bars: the five components and the score, one colour per agent."""
    series = [("all", overall)] + sorted(per_agent.items()) if len(per_agent) > 1 else [
        ("all", overall)]
    metrics = [*COMPONENTS, "score"]
    width, height, left, bottom = 620, 200, 34, 34
    group_w = (width - left) / len(metrics)
    bar_w = max(4.0, (group_w - 12) / len(series))
    parts = [f'<svg role="img" aria-label="components per agent" width="{width}" '
             f'height="{height + 20}" viewBox="0 0 {width} {height + 20}">']
    for tick in (0.0, 0.5, 1.0):
        y = height - bottom - tick * (height - bottom - 10)
        parts.append(f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
                     f'<text x="2" y="{y + 4:.1f}">{tick:.1f}</text>')
    for mi, metric in enumerate(metrics):
        x0 = left + mi * group_w + 6
        for si, (name, row) in enumerate(series):
            value = row["score"] if metric == "score" else row["components"][metric]
            value = 0.0 if value is None else float(value)
            h = value * (height - bottom - 10)
            x = x0 + si * bar_w
            parts.append(f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bar_w - 1:.1f}" '
                         f'height="{h:.1f}" fill="{PALETTE[si % len(PALETTE)]}">'
                         f"<title>{_e(name)} {_e(metric)} {value:.4f}</title></rect>")
        parts.append(f'<text x="{x0:.1f}" y="{height - bottom + 14}">{_e(metric.replace("_", " "))}'
                     "</text>")
    for si, (name, _) in enumerate(series):
        x = left + si * 110
        parts.append(f'<rect x="{x}" y="{height}" width="10" height="10" '
                     f'fill="{PALETTE[si % len(PALETTE)]}"/><text x="{x + 14}" y="{height + 9}">'
                     f"{_e(name[:14])}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _frontier_svg(report: RunReport) -> str:
    """Score against total cost per agent; agents on the cost frontier are filled."""
    pts = report.frontier
    costs = [row.get("cost_usd") for row in report.views["attempts"]]
    if not any(c for c in costs) and not any(p.cost_usd for p in pts):
        # every cost zero or missing: a chart would be one dot on a zero axis
        return ('<p class="meta" data-testid="no-cost">no cost recorded: every attempt\'s cost is '
                "zero or missing, so score against cost is not drawn</p>")
    if not pts:
        return '<p class="meta">no agent has a score and a cost</p>'
    width, height, pad = 420, 240, 40
    max_cost = max(p.cost_usd for p in pts) or 1.0
    parts = [f'<svg role="img" aria-label="score against cost" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" stroke="#999"/>',
             f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
             f'<text x="{width / 2:.0f}" y="{height - 8}">cost (USD), max {max_cost:.4f}</text>',
             '<text x="2" y="14">score</text>']
    frontier = sorted((p for p in pts if p.on_frontier), key=lambda p: p.cost_usd)

    def xy(cost: float, score: float) -> tuple[float, float]:
        return (pad + cost / max_cost * (width - pad - 90),
                height - pad - score * (height - pad - 20))

    if len(frontier) > 1:
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(p.cost_usd, p.score) for p in frontier))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#17803d" stroke-dasharray="4 3"/>')
    for i, p in enumerate(pts):
        x, y = xy(p.cost_usd, p.score)
        color = PALETTE[i % len(PALETTE)]
        fill = color if p.on_frontier else "#fff"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{fill}" stroke="{color}" '
                     f'stroke-width="2"><title>{_e(p.agent)}: score {p.score:.4f}, cost '
                     f'{p.cost_usd:.4f}</title></circle><text x="{x + 8:.1f}" y="{y - 6:.1f}">'
                     f"{_e(p.agent[:20])}</text>")
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- sections

def _components_table(v: dict[str, Any], prefix: str) -> str:
    rows = "".join(f"<tr><td>{_e(k.replace('_', ' '))}</td>"
                   f"{_cell(v['components'][k], f'{prefix}components.{k}')}</tr>"
                   for k in COMPONENTS)
    return f"<table><tr><th>component</th><th class=n>value</th></tr>{rows}</table>"


def _tier_table(v: dict[str, Any], prefix: str, tiers: dict[str, Any]) -> str:
    order = sorted(v["per_tier"].items(),
                   key=lambda kv: (TIERS.index(kv[0]) if kv[0] in TIERS else len(TIERS), kv[0]))
    rows = []
    for t, r in order:
        if not r["attempts"]:
            continue
        extra = tiers.get(t) or {}
        comps = extra.get("components") or {}
        rows.append(
            f"<tr><td>{_e(t)}</td>{_cell(r['passed'], f'{prefix}per_tier.{t}.passed')}"
            f"{_cell(r['attempts'], f'{prefix}per_tier.{t}.attempts')}"
            f"{_cell(r['pass_rate'], f'{prefix}per_tier.{t}.pass_rate')}{_cell(extra.get('score'))}"
            + "".join(_cell(comps.get(k)) for k in COMPONENTS) + "</tr>")
    if not rows:
        return '<p class="meta">no scored attempts</p>'
    return ("<table><tr><th>tier</th><th class=n>passed</th><th class=n>attempts</th>"
            "<th class=n>pass rate</th><th class=n>score</th>"
            + "".join(f"<th class=n>{_e(k.replace('_', ' '))}</th>" for k in COMPONENTS)
            + f"</tr>{''.join(rows)}</table>")


def _agent_table(v: dict[str, Any], prefix: str, spread: dict[str, Any]) -> str:
    ks = sorted({int(p["k"]) for s in spread.values() if s.get("count", 0) > 1
                 for p in s.get("pass_at_k", [])})
    rows = []
    for agent, r in sorted(v["per_agent"].items()):
        p = f"{prefix}per_agent.{agent}."
        rep = spread.get(agent) or {}
        by_k = {int(x["k"]): x["value"] for x in rep.get("pass_at_k", [])}
        repeat_cells = ("".join([_cell(rep.get("mean")), _cell(rep.get("stderr"))]
                                + [_cell(by_k.get(k)) for k in ks]) if ks else "")
        rows.append(
            f"<tr><td>{_e(agent)}</td>{_cell(r['score'], p + 'score')}"
            f"{_cell(r['passed'], p + 'passed')}{_cell(r['attempts'], p + 'attempts')}"
            f"{_cell(r['pass_rate'], p + 'pass_rate')}"
            + "".join(_cell(r["components"][k], p + f"components.{k}") for k in COMPONENTS)
            + f"{_cell(r['cost_total'], p + 'cost_total')}{_cell(r['wall_s_total'], p + 'wall_s_total', 1)}"
            + repeat_cells + "</tr>")
    head = ("<tr><th>agent</th><th class=n>score</th><th class=n>passed</th><th class=n>attempts"
            "</th><th class=n>pass rate</th>"
            + "".join(f"<th class=n>{_e(k.replace('_', ' '))}</th>" for k in COMPONENTS)
            + "<th class=n>cost usd</th><th class=n>wall s</th>"
            + ("<th class=n>repeat mean</th><th class=n>stderr</th>"
               + "".join(f"<th class=n>pass@{k}</th>" for k in ks) if ks else "")
            + "</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _repeats(v: dict[str, Any], prefix: str) -> str:
    rep = v["repeats"]
    if rep["count"] < 2:
        return ""
    ks = "".join(f"<tr><td>pass@{p['k']}</td>"
                 + _cell(p["value"], f"{prefix}repeats.pass_at_k.{p['k']}")
                 + f"<td class=n>{p['groups']}</td></tr>" for p in rep["pass_at_k"])
    return (f"<h3>Across {rep['count']} repeats</h3><table><tr><th></th><th class=n>value</th>"
            f"<th class=n>task x agent groups</th></tr><tr><td>score mean</td>"
            f"{_cell(rep['mean'], prefix + 'repeats.mean')}<td></td></tr><tr><td>standard error</td>"
            f"{_cell(rep['stderr'], prefix + 'repeats.stderr')}<td></td></tr>{ks}</table>")


def _paired_rows(pairs: Sequence[dict[str, Any]], label: str) -> str:
    if not pairs:
        return ""
    rows = []
    for p in pairs:
        sig = p["significant"]
        verdict = (f"{_e(p['b'] if p['difference'] > 0 else p['a'])} better" if sig
                   else "not distinguishable from noise")
        rows.append(
            f"<tr><td>{_e(p['a'])}</td><td>{_e(p['b'])}</td><td class=n>{p['tasks']}</td>"
            f"{_cell(p['mean_a'])}{_cell(p['mean_b'])}{_cell(p['difference'])}"
            f"<td class=n>[{_num(p['ci_low'])}, {_num(p['ci_high'])}]</td>"
            f"<td class='{'ok' if sig else 'meta'}'>{verdict}</td></tr>")
    return (f"<h3>{_e(label)}</h3><p class=meta>Difference of per-task pass rates (B - A) over the "
            "tasks both ran, with a 95% percentile bootstrap interval over tasks "
            f"({pairs[0]['resamples']} resamples, seed {pairs[0]['seed']}).</p>"
            "<table><tr><th>A</th><th>B</th><th class=n>tasks</th><th class=n>A pass rate</th>"
            "<th class=n>B pass rate</th><th class=n>B - A</th><th class=n>95% CI</th><th></th></tr>"
            + "".join(rows) + "</table>")


def _bench(b: dict[str, Any] | None) -> str:
    if not b:
        return ""
    rows = "".join(
        f"<tr><td class=n>{_e(r.get('rank'))}</td><td>{_e(r.get('provider'))}</td>"
        f"<td>{_e(r.get('status'))}</td>{_cell(r.get('quality'))}{_cell(r.get('wall_s'), None, 1)}"
        f"{_cell(r.get('cost_usd'))}{_cell(r.get('self_eval_bias'))}</tr>" for r in b.get("rows", []))
    export = b.get("export") or {}
    cards = "".join(f"<div class=card><b>{_e(name)}</b><pre>{_e(json.dumps(card, indent=1))}</pre></div>"
                    for name, card in (export.get("scorecards") or {}).items())
    swap = b.get("swap") or {}
    order = export.get("judge_presentation_order") or []
    return ("<h2>Bench leaderboard</h2>"
            f"<p>verdict <b>{_e(b.get('verdict'))}</b>; judge presentation order: "
            f"{_e(', '.join(map(str, order)) or '-')}; order-swap check: "
            f"<code>{_e(json.dumps(swap, sort_keys=True)[:400])}</code></p>"
            "<table><tr><th class=n>rank</th><th>agent</th><th>status</th><th class=n>quality</th>"
            f"<th class=n>wall s</th><th class=n>cost usd</th><th class=n>self-eval bias</th></tr>{rows}"
            f"</table><h3>Scorecards</h3><div class=cards>{cards}</div>")


def _tokens(d: AttemptDetail) -> str:
    if d.tokens_in is None and d.tokens_out is None:
        return "-"
    return f"{_num(d.tokens_in)} / {_num(d.tokens_out)}"


def attempt_badges(row: dict[str, Any], d: AttemptDetail) -> list[tuple[str, str, str]]:
    """``(label, class, why)`` for each way the attempt did not run to its end: a harness failure
    (a ``sandbox.failed`` entry, or status ``error``), an interrupted attempt (no
    ``attempt.finished``), another status than ``completed``, a crash, a timeout, an agent error
    (a non-zero agent exit). Empty for an attempt that completed normally."""
    badges: list[tuple[str, str, str]] = []
    status = row.get("status")
    finished = [e.summary for e in d.timeline if e.kind == "attempt.finished"]
    if any(e.kind == "sandbox.failed" for e in d.timeline):
        badges.append(("harness failure", "bad", "the sandbox did not start (sandbox.failed); "
                       "an infra failure, not the agent's"))
    if status is None:
        badges.append(("interrupted", "warn", "the attempt never finished (no attempt.finished "
                       "entry): interrupted or still running"))
    elif status == "error":
        if not any(b[0] == "harness failure" for b in badges):
            badges.append(("harness failure", "bad", "attempt finished with status error"
                           + (f" ({finished[-1]})" if finished else "")))
    elif status != "completed":
        badges.append((str(status), "warn", f"attempt finished with status {status}"))
    if row.get("crashed"):
        badges.append(("crashed", "bad", "the agent process crashed"))
    if row.get("timed_out"):
        badges.append(("timeout", "bad", "the agent ran out of its time budget"))
    if (d.exit_code not in (None, 0) and not row.get("crashed") and not row.get("timed_out")):
        badges.append(("agent error", "bad", f"the agent exited with code {d.exit_code}"))
    return badges


def _badges_html(badges: Sequence[tuple[str, str, str]]) -> str:
    return "".join(f' <span class="badge {cls}" data-badge="{_e(label)}" title="{_e(why)}">'
                   f"{_e(label)}</span>" for label, cls, why in badges)


def _detail_json(d: AttemptDetail, row: dict[str, Any] | None = None) -> dict[str, Any]:
    att = d.attestation
    row = row or {}
    return {
        "summary": {
            "task": row.get("task", d.task), "agent": row.get("agent", d.agent),
            "repeat": row.get("repeat", d.repeat), "try": row.get("try", d.try_no),
            "status": row.get("status"), "passed": row.get("passed"),
            "category": row.get("category"), "exit_code": d.exit_code,
            "wall_s": row.get("wall_s"), "cost_usd": row.get("cost_usd"),
            "tokens_in": d.tokens_in, "tokens_out": d.tokens_out, "activity": dict(d.activity),
            "badges": [list(b) for b in attempt_badges(row, d)]},
        "attempt": d.attempt, "prompt": d.prompt, "patch": d.patch,
        "patch_truncated": d.patch_truncated, "diff_sha256": d.diff_sha256,
        "files": [list(f) for f in d.diff_files],
        "tests": [[t.suite, t.id, t.outcome, t.message] for t in d.tests],
        "signals": [[s.index, s.passed, s.detail] for s in sorted(d.signals, key=lambda s: s.index)],
        "attestation": None if att is None else {
            "hash": att.hash, "verdict": att.verdict, "isolation": att.isolation,
            "matches": list(att.matches), "match_count": att.match_count, "scope": att.scope,
            "observation": att.observation, "activity_count": att.activity_count},
        "transcript": [[t.seq, t.kind, t.role, t.tool, t.text, t.is_error] for t in d.transcript],
        "timeline": timeline_rows(d.timeline),
    }


GROUP_KINDS = frozenset({"fs.read", "proc.exec"})  # writes and connections stay one row each
GROUP_MIN = 5  # consecutive reads/execs shown as one timeline row
GROUP_SHOW = 6  # paths or commands named in such a row
TRANSCRIPT_HEAD = 60  # characters of a transcript item in the timeline (the transcript has it all)


def timeline_rows(timeline: Sequence[Any]) -> list[list[Any]]:
    """Timeline rows ``[seq, time ns, captured?, kind, what]``. A run of GROUP_MIN or more
    consecutive reads and execs (an interpreter loading its library under strace) becomes one
    row naming its seq range, counts and first GROUP_SHOW paths; ``ledger log --run RUN`` lists
    every entry, and the Inspect export keeps each one."""
    rows: list[list[Any]] = []
    i = 0
    while i < len(timeline):
        e = timeline[i]
        j = i
        if e.kind in GROUP_KINDS:
            while j + 1 < len(timeline) and timeline[j + 1].kind in GROUP_KINDS:
                j += 1
        n = j - i + 1
        if n >= GROUP_MIN:
            counts: dict[str, int] = {}
            for t in timeline[i:j + 1]:
                counts[t.kind] = counts.get(t.kind, 0) + 1
            names = [t.summary for t in timeline[i:i + GROUP_SHOW]]
            more = f", ... {n - len(names)} more" if n > len(names) else ""
            rows.append([e.seq, e.when, e.at is not None,
                         " + ".join(f"{k} x{c}" for k, c in sorted(counts.items())),
                         f"seq {e.seq}..{timeline[j].seq}: " + ", ".join(names) + more])
            i = j + 1
        else:
            what = e.summary[:TRANSCRIPT_HEAD] if e.kind in TRANSCRIPT_KINDS else e.summary
            rows.append([e.seq, e.when, e.at is not None, e.kind, what])
            i += 1
    return rows


def _attempts(report: RunReport, start: int, blocks: list[str]) -> tuple[str, int]:
    rows = []
    i = start
    for row in report.views["attempts"]:
        d = report.attempts.get(row["attempt"]) or AttemptDetail(attempt=row["attempt"])
        verdict = row["attestation"] or "none"
        vcls = "ok" if verdict == "CLEAN" else "bad" if verdict == "DIRTY" else "warn"
        outcome = "passed" if row["passed"] else "failed"
        badges = attempt_badges(row, d)
        if badges:  # never a bare CLEAN next to an attempt that did not run to its end
            verdict_html = (f"{_e(verdict)} <span class=meta>(attempt "
                            f"{_e(', '.join(b[0] for b in badges))})</span>")
        else:
            verdict_html = _e(verdict)
        rows.append(
            f'<tr class="row" tabindex="0" aria-expanded="false" data-i="{i}" '
            f'data-attempt="{_e(row["attempt"])}"><td class=mono>{_e(row["attempt"])}</td>'
            f"<td>{_e(row['task'])}</td><td>{_e(row['agent'])}</td><td class=n>{_e(row['repeat'])}</td>"
            f"<td><span class='{'ok' if row['passed'] else 'bad'}'>{outcome}</span>"
            f"{_badges_html(badges)}</td>"
            f"<td>{_e(row['category'] or '-')}</td><td class='{vcls}'>{verdict_html}</td>"
            f"{_cell(row['wall_s'], None, 1)}{_cell(row['cost_usd'])}<td class=n>{_e(_tokens(d))}</td></tr>")
        blocks.append(_json_block(f"a-{i}", _detail_json(d, row)))
        i += 1
    table = ('<table id="attempts"><thead><tr><th>attempt</th><th>task</th><th>agent</th>'
             "<th class=n>repeat</th><th>outcome</th><th>failure category</th><th>attestation</th>"
             "<th class=n>wall s</th><th class=n>cost usd</th><th class=n>tokens in / out</th></tr>"
             f"</thead><tbody>{''.join(rows)}</tbody></table>")
    return table, i


def _infra_apart(report: RunReport, prefix: str) -> str:
    """Under the score: the golden score with infra failures apart, as `ledger report` heads
    with it (the statistics view's ``golden``; the number above counts them as failures)."""
    g = (report.stats or {}).get("golden")
    if not g:
        return ""
    key = f"{prefix}statistics.golden.score"
    return (f"<div class=meta data-testid=infra-apart>infra failures apart (as <code>ledger "
            f"report</code> scores): <b data-k=\"{_e(key)}\" data-v=\"{_e(json.dumps(g['score']))}\">"
            f"{_num(g['score'])}</b> over {g['attempts']} attempts, {g['infra_failures']} infra "
            "failure(s) excluded; the score above counts them as failures</div>")


def _run_section(report: RunReport, index: int, start: int, blocks: list[str]) -> tuple[str, int]:
    v = report.views
    prefix = "" if index == 0 else f"runs.{index}."
    c = v["components"]
    cp = report.checkpoint
    if cp is None:
        cp_text = ("no signed checkpoint covers this run yet; <code>ledger checkpoint</code> "
                   "signs one")
    else:
        cp_text = (f"tree size {cp['size']}, root <code>{_e(cp.get('root'))}</code>"
                   f"<pre>{_e(cp.get('note'))}</pre>")
    att_counts = " ".join(f"{k} {n}" for k, n in v["attestations"].items())
    attempts_html, end = _attempts(report, start, blocks)
    status_cls = "ok" if v["status"] == "finished" else "warn"
    html = f"""
<section class="run" data-run="{_e(report.run_id)}">
<h2>Run <span class=mono>{_e(report.run_id)}</span> <span class="{status_cls}">({_e(v['status'])})</span></h2>
<p class=meta>harness {_e(report.harness_version or '-')}; {report.entry_count} entries;
content digest <code data-testid="content-digest">{_e(report.content_digest)}</code></p>
<div class=cards>
<div class=card><div class=meta>composite score</div>
<div class=score data-k="{prefix}score" data-v="{_e(json.dumps(v['score']))}">{_num(v['score'])}</div>
<div class=meta>({W_SUCCESS}&middot;{_num(c['task_success'])} + {W_QUALITY}&middot;{_num(c['code_quality'])}
+ {W_EFFICIENCY}&middot;{_num(c['efficiency'])}) &middot; {_num(c['reliability'])} &middot; {_num(c['safety'])}</div>
<div class=meta>{v['counts']['passed']} of {v['counts']['attempts']} attempts passed; cost
<span data-k="{prefix}cost_total" data-v="{_e(json.dumps(v['cost_total']))}">{_num(v['cost_total'])}</span> USD
({v['cost_unknown']} without a cost); attestations: {_e(att_counts)}</div>{_infra_apart(report, prefix)}</div>
<div class=card><h3>Components</h3>{_components_table(v, prefix)}</div>
</div>
<h3>Per tier</h3>{_tier_table(v, prefix, report.tiers)}
<h3>Per agent</h3>{_agent_table(v, prefix, report.agent_repeats)}
<div class=cards><div class=card>{_bars_svg(v['per_agent'], v)}</div>
<div class=card><h3>Score against cost</h3>{_frontier_svg(report)}</div></div>
{_repeats(v, prefix)}
{_paired_rows(list(report.pairs), 'Agents compared on the same tasks')}
{run_comparison(report.stats) if report.stats else ''}
{_bench(report.bench)}
<h3>Failure taxonomy</h3>
<p>{_e(', '.join(f'{k} {n}' for k, n in v['taxonomy']['counts'].items() if n) or 'no failed attempts')}</p>
<h3>Attempts ({len(v['attempts'])}; open a row for its diff, verdict, transcript, tests and timeline)</h3>
{attempts_html}
<h3>Check these numbers</h3>
<p>Covering checkpoint: {cp_text}</p>
<pre>ledger verify            # the whole journal: hashes, tree heads, signatures, attestations
ledger replay {_e(report.run_id)}   # recompute every number on this page from the entries</pre>
</section>"""
    return html, end


def _head(title: str, refresh_s: int | None) -> str:
    refresh = (f'<meta http-equiv="refresh" content="{int(refresh_s)}">'
               if refresh_s is not None else "")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{refresh}'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>")


def _checked(verification: tuple[bool, str] | None) -> tuple[str, str]:
    """(the banner above everything, the line under the title) of a verification."""
    if verification is None:
        return "", ""
    ok, line = verification
    if ok:
        return "", f"<p class=meta id=verified>{_e(line)}</p>"
    return f"<p class=unverified id=unverified role=alert>{_e(line)}</p>", ""


def render_comparison(reports: Sequence[RunReport], *, index_href: str,
                      refresh_s: int | None = None,
                      verification: tuple[bool, str] | None = None) -> str:
    """The comparison page of the runs (ledger/view/compare_page.py), linking back to the
    report at ``index_href``."""
    banner, line = _checked(verification)
    title = ", ".join(r.run_id for r in reports)
    body = (f"<body>{banner}<h1>eval-ledger comparison: who passed what</h1>{line}"
            f"<p class=meta><a href='{_e(index_href)}' data-testid=index-link>back to the report"
            "</a>. One character per repeat: 1 passed, 0 failed, x infra failure (excluded), . not "
            "run; a pair is the same task and repeat on both sides; the figures are the "
            "statistics view's (docs/SCORING.md).</p>"
            + comparison_body([r.stats for r in reports])
            + f"<footer>report size {SIZE_MARK}; self-contained: no network, no external files."
            "</footer></body></html>")
    return _with_size(_head(f"eval-ledger comparison: {title}", refresh_s) + body)


def render_html(reports: Sequence[RunReport], *, refresh_s: int | None = None,
                generated_by: str = "eval-ledger", verification: tuple[bool, str] | None = None,
                compare_href: str | None = None) -> str:
    """The page for one or more runs; ``refresh_s`` adds a reload (``ledger view --serve``);
    ``verification`` (verified, the line saying so): a line under the title, or, for a journal
    shown unverified, a banner above everything that says what failed; ``compare_href``: where
    the comparison page is (``render_comparison``), linked under the title."""
    if not reports:
        raise ValueError("render_html needs at least one report")
    blocks: list[str] = []
    sections = []
    start = 0
    for i, r in enumerate(reports):
        html, start = _run_section(r, i, start, blocks)
        sections.append(html)
    cross = ""
    if len(reports) == 2:
        d = compare(reports[0].views, reports[1].views)
        p = d["paired"]
        warnings = "".join(f"<li class=warn>{_e(w)}</li>" for w in d["warnings"])
        pair = _paired_rows([{"a": d["run_a"], "b": d["run_b"], **p}], "Paired over common tasks") \
            if p["tasks"] else ""
        cross = (f"<h2>Run A against run B</h2><ul>{warnings}</ul><table><tr><th></th><th class=n>A"
                 "</th><th class=n>B</th><th class=n>B - A</th></tr>"
                 + "".join(f"<tr><td>{_e(k)}</td>{_cell(x['a'])}{_cell(x['b'])}{_cell(x['delta'])}</tr>"
                           for k, x in [("score", d["score"]), *d["components"].items()])
                 + f"</table>{pair}")
        if reports[0].stats and reports[1].stats:
            cross += cross_run_comparison(reports[0].stats, reports[1].stats)
    title = ", ".join(r.run_id for r in reports)
    head = _head(f"eval-ledger: {title}", refresh_s)
    banner, line = _checked(verification)
    link = (f"<p><a href='{_e(compare_href)}' data-testid=comparison-link>Comparison page: who "
            "passed what, task by task, for every two agents"
            + (" and the two runs" if len(reports) == 2 else "") + "</a></p>"
            if compare_href else "")
    body = (f"<body>{banner}<h1>eval-ledger report</h1>{line}{link}"
            f"<p class=meta>{len(reports)} run(s); generated by "
            f"{_e(generated_by)}; every number is a projection of the journal (see the commands "
            "at the end of each run). Filter attempts: <input type=search id=filter "
            "placeholder=\"task, agent, verdict...\"></p>"
            + "".join(sections) + cross
            + f"<footer>report size {SIZE_MARK}; self-contained: no network, no external files."
            "</footer>" + "".join(blocks) + f"<script>{_asset('report.js')}</script></body></html>")
    return _with_size(head + body)


def _human(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else \
        f"{n / 1024 / 1024:.2f} MiB"


def _with_size(page: str) -> str:
    """Put the document's own size (UTF-8 bytes) in place of the size mark."""
    base = len(page.encode("utf-8")) - len(SIZE_MARK)
    text = _human(base)
    for _ in range(4):
        size = base + len(text)
        if _human(size) == text:
            break
        text = _human(size)
    return page.replace(SIZE_MARK, text, 1)


def page_size(page: str) -> int:
    return len(page.encode("utf-8"))


__all__ = ["page_size", "render_comparison", "render_html"]
