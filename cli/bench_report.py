"""Rendering a bench view: the terminal table, the markdown report, and the two report files.

    render_table(view)                 the leaderboard (text, or markdown with md=True)
    render_markdown(view)              the whole report
    write_reports(view, out_dir)       audit-results/benchmark-NNN-<run_id>.md and .json

NNN is one more than the highest number already in the folder (001 for an empty folder); a file
is created exclusively, so two runs finishing at once never overwrite each other. The ``.json``
file is the v2.0 object of the existing tool (:func:`evaluators.leaderboard.export_v2`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cli.table import grid as _grid
from evaluators.leaderboard import export_v2
from ledger.bench.compare import REPORT_NAME
from ledger.errors import UsageError


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:.1f}"
    return str(int(x))


def _signed(x: Any) -> str:
    if x is None:
        return "-"
    v = float(x)
    if v == 0:
        return "0"
    return f"{v:+.1f}" if not v.is_integer() else f"{int(v):+d}"


def _time(x: Any) -> str:
    return "-" if x is None else f"{float(x):.0f}s"


def _cost(row: Mapping[str, Any]) -> str:
    c = row.get("cost_usd")
    if c is None:
        return "-"
    mark = "~" if row.get("cost_source") in ("estimated", "mixed") else ""
    return f"{mark}${float(c):.3f}"


def _k(n: Any, est: bool) -> str:
    if n is None:
        return "-"
    n = int(n)
    text = str(n) if n < 1000 else (f"{n / 1000:.1f}K" if n < 10_000 else f"{n / 1000:.0f}K")
    return ("~" if est else "") + text


def _tokens(row: Mapping[str, Any]) -> str:
    est = bool(row.get("tokens_estimated"))
    return f"{_k(row.get('tokens_in'), est)}/{_k(row.get('tokens_out'), est)}"


HEADERS = ["Rank", "Agent", "Quality", "Code", "Tests", "Time", "Cost", "Tokens in/out",
           "Review Δ", "Self bias", "Status"]


def table_rows(view: Mapping[str, Any]) -> list[list[str]]:
    return [[str(r["rank"]), str(r["provider"]), _num(r["quality"]), _num(r["code_score"]),
             _num(r["test_score"]), _time(r["time_s"]), _cost(r), _tokens(r),
             _signed(r["adversarial_delta"]), _signed(r["self_eval_bias"]), str(r["status"])]
            for r in view["rows"]]


def render_table(view: Mapping[str, Any], md: bool = False) -> str:
    return "\n".join(_grid(HEADERS, table_rows(view), md))


def _bias_line(view: Mapping[str, Any], key: str) -> str:
    parts = [f"{r['provider']} {_signed(r[key])}" for r in view["rows"] if r[key] is not None]
    return ", ".join(parts) if parts else "-"


def render_summary(view: Mapping[str, Any], files: Sequence[str] = ()) -> str:
    """The closing block: verdict, counts, judge, files, top agent, bias range."""
    exp = view["export"]
    c = view["counts"]
    verdict = view["verdict"]
    lines = ["BENCHMARK COMPLETE",
             f"Run ID:    {view['run_id']}",
             f"Verdict:   {verdict}" + (f" ({c['scored']} of {c['attempted']} scored; "
                                        f"{c['failed']} failed, {c['timeout']} timed out, "
                                        f"{c['unscored']} unscored)" if verdict != "PASS" else ""),
             f"Mode:      {exp['mode']}",
             f"Task:      {str(exp['task_hash'])[:12]} ({exp['task_source']})",
             f"Agents:    {c['attempted']} attempted / {c['succeeded']} succeeded / "
             f"{c['scored']} scored",
             f"Judge:     {exp['meta_judge_model']}"]
    if files:
        lines.append("Results saved:")
        lines += [f"  {f}" for f in files]
    top = next((r for r in view["rows"] if r["status"] == "scored"), None)
    if top is not None:
        lines.append(f"Top agent: {top['provider']} (quality: {top['quality']}, time: "
                     f"{_time(top['time_s'])}, cost: {_cost(top)})")
    rng = view.get("self_eval_bias_range")
    if rng:
        lines.append(f"Self-eval bias range: {_signed(rng[0])} to {_signed(rng[1])} "
                     "(positive = overconfident)")
    swap = view.get("swap") or {}
    if swap.get("checked"):
        lines.append(f"Order-swap check: {swap['flips']} of {swap['pairs']} pairwise verdicts "
                     "flipped when the order was reversed")
    lines.append(f"Replay:    ledger replay {view['run_id']}")
    return "\n".join(lines)


def render_markdown(view: Mapping[str, Any]) -> str:
    exp = view["export"]
    judging = view["judging"]
    title = (exp.get("task_snapshot") or "")[:60].replace("\n", " ") if exp["mode"] != "corpus" \
        else "corpus tasks"
    lines = [f"## Benchmark Results — {view['run_id']}",
             f"Task: {title or '(snapshot not stored)'} | Mode: {exp['mode']} | "
             f"Source: {exp['task_source']} | Task hash: `{exp['task_hash']}`",
             f"Verdict: **{view['verdict']}** | Started: {exp['timestamp']}", ""]
    lines += _grid(HEADERS, table_rows(view), True)
    lines += ["",
              "Tokens: input/output as the agent reported them; `~` marks estimates "
              "(words x 1.3). Cost: `~` marks estimates from the price table.",
              f"Self-eval bias (positive = overconfident): {_bias_line(view, 'self_eval_bias')}",
              f"Review delta (revised - original code score): {_bias_line(view, 'adversarial_delta')}",
              ""]
    lines += ["### Judging", f"- Judge: {exp['meta_judge_model']}"]
    if judging.get("fallback"):
        lines.append("- No model judge was available: scores come from the offline deterministic "
                     "judge (corpus checks, syntax, stub and TODO markers), not from a model.")
    lines += [f"- Presentation seed: {judging.get('seed')}; order of the first code-round call: "
              f"{', '.join(exp['judge_presentation_order']) or '-'}",
              f"- Input truncated: {'yes' if exp['judge_input_truncated'] else 'no'}",
              f"- UNSCORED verdicts: {judging.get('unscored', 0)}"]
    swap = view.get("swap") or {}
    if swap.get("checked"):
        lines.append(f"- Order-swap check: {swap['flips']} of {swap['pairs']} pairwise verdicts "
                     "flipped with the order reversed")
    for call in judging.get("calls", []):
        lines.append(f"  - `{call['call']}`: {call['status']}, order {', '.join(call['order'] or [])}"
                     + (f"; unscored: {', '.join(call['unscored'])}" if call["unscored"] else ""))
    unscored = [v for v in judging.get("verdicts", []) if v.get("scores") is None]
    for v in unscored:
        lines.append(f"  - UNSCORED {v['agent']} by {v['judge']} ({v['round']}, {v['pass']}): "
                     f"{v['reason']}")
    lines += ["", "### Agents"]
    for r in view["rows"]:
        lines.append(f"- **{r['provider']}** ({r['status']}): time {_time(r['time_s'])}, "
                     f"cost {_cost(r)}, tokens {_tokens(r)}"
                     + (f", error: {r['error']}" if r.get("error") else ""))
        if r.get("check"):
            ch = r["check"]
            counts = ch.get("counts") or {}
            lines.append(f"  - corpus checks: {counts.get('passed', 0)} passed, "
                         f"{counts.get('failed', 0)} failed, {counts.get('error', 0)} errors"
                         + (f"; missing {', '.join(ch['missing_files'])}" if ch.get("missing_files") else ""))
        if r.get("tests_counts"):
            t = r["tests_counts"]
            lines.append(f"  - its own tests, executed: {t.get('passed', 0)} passed, "
                         f"{t.get('failed', 0)} failed, {t.get('error', 0)} errors")
        if r.get("static"):
            parts = []
            for name, res in sorted(r["static"].items()):
                parts.append(f"{name} {'n/a' if res is None else ('ok' if res.get('ok') else 'fail')}")
            lines.append("  - static checks: " + ", ".join(parts))
        if r.get("self_eval") is not None:
            lines.append(f"  - self-eval {_num(r['self_eval'])}/20 vs judge {_num(r['code_score'])}/20")
        for note in r.get("notes", []):
            lines.append(f"  - note: {note}")
    costs = view.get("costs") or {}
    lines += ["", "### Cost",
              f"- agents: {_money(costs.get('agents'))}, reviews: {_money(costs.get('reviews'))}, "
              f"judges: {_money(costs.get('judges'))}",
              "", f"Every number above is recomputed from the journal by `ledger replay {view['run_id']}`."]
    return "\n".join(lines) + "\n"


def _money(x: Any) -> str:
    return "-" if x is None else f"${float(x):.3f}"


def next_number(out_dir: Path) -> int:
    highest = 0
    if out_dir.is_dir():
        for p in out_dir.iterdir():
            m = REPORT_NAME.match(p.name)
            if m:
                highest = max(highest, int(m.group(1)))
    return highest + 1


def write_reports(view: Mapping[str, Any], out_dir: Path) -> list[str]:
    """Write ``benchmark-NNN-<run_id>.md`` and ``.json`` into ``out_dir``; return both paths."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create the folder: {exc.strerror}") from None
    md = render_markdown(view)
    js = json.dumps(export_v2(view), indent=2, ensure_ascii=False) + "\n"
    for _ in range(100):
        n = next_number(out_dir)
        stem = f"benchmark-{n:03d}-{view['run_id']}"
        md_path, json_path = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
        try:
            with open(md_path, "x", encoding="utf-8") as fh:
                fh.write(md)
        except FileExistsError:
            continue
        with open(json_path, "w", encoding="utf-8") as fh:
            fh.write(js)
        return [str(md_path), str(json_path)]
    raise UsageError(f"--out {out_dir}: could not pick a free report number")


__all__ = ["next_number", "render_markdown", "render_summary", "render_table", "table_rows",
           "write_reports"]
