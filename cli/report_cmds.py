"""Report commands: replay, report, failures, compare. Thin: read entries, call evaluators, render."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import click

from cli.journal_cmds import resolve_verifier
from cli.main import Ctx, emit_json, json_option, pass_ctx
from cli.reading import Reader, unverified_option
from cli.table import grid as _table
from evaluators.compare import COMPONENTS, compare
from evaluators.fold import KNOWN_KINDS, UNSCORED_HARNESS_KINDS
from evaluators.registry import by_name, replay_run
from evaluators.score import W_EFFICIENCY, W_QUALITY, W_SUCCESS
from evaluators.structure import STRUCTURE_KINDS
from evaluators.views import ReplayResult, compute_views
from ledger.errors import LedgerError, UsageError, VerificationError
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.tasks.model import TIERS

RUN_ARG = click.argument("run_prefix", required=False, metavar="[RUN]")


def _open(ctx: Ctx) -> Journal:
    return Journal.open(ctx.home.journal_path, readonly=True)


class _Tracked:
    """Iterate a run's entries and remember the last seq seen (to find the covering checkpoint)."""

    def __init__(self, entries: Iterator[Entry]) -> None:
        self._entries = entries
        self.last_seq: int | None = None

    def __iter__(self) -> Iterator[Entry]:
        for e in self._entries:
            self.last_seq = e.seq
            yield e


def _views(j: Journal, run_prefix: str | None, reader: Reader) -> tuple[dict[str, Any], int | None]:
    """The views of one run from its entries, verified by ``reader`` first (cli/reading.py)."""
    run_id = j.resolve_run(run_prefix)
    tracked = _Tracked(iter(reader.entries(j, run_id)))
    return compute_views(tracked, run_id), tracked.last_seq


def _checkpoint(j: Journal, last_seq: int | None) -> dict[str, Any] | None:
    """The first signed checkpoint that covers every entry of the run, if one exists yet."""
    if last_seq is None:
        return None
    for size, note in j.store.checkpoints():
        if size > last_seq:
            return {"size": size, "note": note}
    return None


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _attestation_cell(row: dict[str, Any]) -> str:
    """The verdict, marked when the attempt ran without isolation (observation only)."""
    verdict = row.get("attestation")
    if not verdict:
        return "-"
    return f"{verdict} (isolation none)" if row.get("isolation") == "none" else verdict


WEAK_OUTCOMES = ("exit-code", "reward-file")  # a task's own runner decided, not the reporter


def _passed_cell(row: dict[str, Any]) -> str:
    """yes/no, marked when the hidden outcome came from an exit code or a reward file."""
    cell = "yes" if row["passed"] else "no"
    source = row.get("outcomes")
    return f"{cell} ({source}: weaker evidence)" if source in WEAK_OUTCOMES else cell


def _infra_line(g: dict[str, Any], recorded_score: Any) -> str:
    """What the headline score covers: "over N attempts, M infra failures excluded"."""
    m, n = g["infra_failures"], g["attempts"]
    if g["count_infra"]:
        return f"over {n} attempts, {m} infra failure(s) counted as failures"
    line = f"over {n} attempts, {m} infra failure(s) excluded"
    if m:
        line += (f" (--count-infra-failures counts them as failures: {_fmt(recorded_score)}, "
                 "the recorded golden view's score)")
    return line


def render_report(v: dict[str, Any], checkpoint: dict[str, Any] | None, md: bool,
                  golden: dict[str, Any] | None = None) -> str:
    """The report page; ``golden``: the statistics view's golden score with infra failures apart
    (evaluators/stats_view.py ``golden``), which then heads the page and the per-agent table."""
    c = golden["components"] if golden else v["components"]
    score = golden["score"] if golden else v["score"]
    h = "## " if md else ""
    lines = [f"{'# ' if md else ''}Run {v['run_id']} ({v['status']})", ""]
    if v["status"] != "finished":
        lines += [f"Note: the run is {v['status']}; the figures cover what was recorded.", ""]
    lines.append(f"Score: {_fmt(score)} = ({W_SUCCESS}*{_fmt(c['task_success'])} + "
                 f"{W_QUALITY}*{_fmt(c['code_quality'])} + {W_EFFICIENCY}*{_fmt(c['efficiency'])})"
                 f" * {_fmt(c['reliability'])} * {_fmt(c['safety'])}")
    if golden:
        lines.append(_infra_line(golden, v["score"]))
    lines += ["", f"{h}Components"]
    lines += _table(["component", "value"], [[k, _fmt(c[k])] for k in COMPONENTS], md)
    lines += ["", f"{h}Per tier"]
    lines += _table(["tier", "passed", "attempts", "pass rate"],
                    [[t, str(r["passed"]), str(r["attempts"]), _pct(r["pass_rate"])]
                     for t, r in sorted(v["per_tier"].items(),
                                        key=lambda kv: (TIERS.index(kv[0]) if kv[0] in TIERS
                                                        else len(TIERS), kv[0]))], md)
    lines += ["", f"{h}Per agent"]
    ga = golden["per_agent"] if golden else {}
    lines += _table(["agent", "passed", "attempts", "infra", "score", "cost usd", "wall s"],
                    [[a, str(ga[a]["passed"] if a in ga else r["passed"]),
                      str(ga[a]["attempts"] if a in ga else r["attempts"]),
                      str(ga[a]["infra_failures"]) if a in ga else "-",
                      _fmt(ga[a]["score"] if a in ga else r["score"]),
                      _fmt(r["cost_total"]), _fmt(r["wall_s_total"], 1)]
                     for a, r in v["per_agent"].items()], md)
    rep = v["repeats"]
    if rep["count"] > 1:
        lines += ["", f"{h}Across repeats",
                  f"score mean {_fmt(rep['mean'])}, standard error {_fmt(rep['stderr'])}; "
                  + ", ".join(f"pass@{p['k']} {_fmt(p['value'])}" for p in rep["pass_at_k"])]
    lines += ["", f"{h}Attempts"]
    lines += _table(["attempt", "passed", "category", "safety", "attestation", "wall s", "cost usd"],
                    [[a["attempt"], _passed_cell(a), a["category"] or "-",
                      str(a["safety"]) + (f" ({', '.join(a['safety_reasons'])})"
                                          if a["safety_reasons"] else ""),
                      _attestation_cell(a), _fmt(a["wall_s"], 1), _fmt(a["cost_usd"])]
                     for a in v["attempts"]], md)
    lines += ["", f"Cost total: {_fmt(v['cost_total'])} usd"
              + (f" ({v['cost_unknown']} attempt(s) without a cost)" if v["cost_unknown"] else "")]
    counted = v["entries"]["unknown"]
    harness = KNOWN_KINDS | UNSCORED_HARNESS_KINDS  # documented kinds no handler of the score reads
    unscored = {k: n for k, n in counted.items() if k in harness}
    unknown = {k: n for k, n in counted.items() if k not in harness}
    if unscored:
        lines.append("Harness entries the score does not read: "
                     + ", ".join(f"{k} x{n}" for k, n in unscored.items()))
    if unknown:
        lines.append("Ignored entries of unknown kinds: "
                     + ", ".join(f"{k} x{n}" for k, n in unknown.items()))
    if checkpoint is None:
        lines.append("Checkpoint: none covers this run yet (`ledger checkpoint` signs one)")
    else:
        first = checkpoint["note"].splitlines()
        lines.append(f"Checkpoint: tree size {checkpoint['size']}, root {first[2] if len(first) > 2 else '?'}")
    return "\n".join(lines)


@click.command("report")
@RUN_ARG
@json_option
@click.option("--format", "fmt", type=click.Choice(["text", "md"]), default="text",
              help="Text table (default) or Markdown.")
@click.option("--count-infra-failures", "count_infra", is_flag=True,
              help="Count infra failures (sandbox start, endpoint, disk, executor, harness) as "
                   "failed attempts in the score and the statistics instead of excluding them.")
@unverified_option
@pass_ctx
def report_cmd(ctx: Ctx, run_prefix: str | None, as_json: bool, fmt: str, count_infra: bool,
               unverified: bool) -> None:
    """Composite score, the five components, per-tier and per-agent tables, cost, the statistics
    (intervals, clustered errors, minimum detectable effect, flaky tasks, infra failures apart),
    checkpoint."""
    from cli.stats_render import stats_lines
    from evaluators.stats_view import stats_of

    if as_json and fmt != "text":
        raise UsageError("use either --json or --format, not both")
    reader = Reader(ctx.home, unverified=unverified)
    with _open(ctx) as j:
        run_id = j.resolve_run(run_prefix)
        entries = reader.entries(j, run_id)
        v = compute_views(entries, run_id)
        stats = stats_of(entries, run_id, count_infra=count_infra)
        checkpoint = _checkpoint(j, entries[-1].seq if entries else None)
    if as_json:
        emit_json({**v, "statistics": stats, "checkpoint": checkpoint,
                   "verification": reader.reading.as_dict()})
    else:
        _banner(reader)
        md = fmt == "md"
        click.echo(render_report(v, checkpoint, md, stats["golden"]))
        click.echo("")
        click.echo("\n".join(stats_lines(stats, md)))
        _verified_line(reader)


def _banner(reader: Reader) -> None:
    """Above a page shown unverified: what failed."""
    if not reader.reading.verified:
        click.echo(reader.reading.line())
        click.echo("")


def _verified_line(reader: Reader) -> None:
    """Below a page: what it was verified against (the banner stands above an unverified one)."""
    if reader.reading.verified:
        click.echo("")
        click.echo(reader.reading.line())


@click.command("failures")
@RUN_ARG
@json_option
@unverified_option
@pass_ctx
def failures_cmd(ctx: Ctx, run_prefix: str | None, as_json: bool, unverified: bool) -> None:
    """Failure taxonomy: each failed attempt with its category and details, and counts."""
    reader = Reader(ctx.home, unverified=unverified)
    with _open(ctx) as j:
        v, _ = _views(j, run_prefix, reader)
    counts = v["taxonomy"]["counts"]
    if as_json:
        emit_json({"run_id": v["run_id"], "status": v["status"], "failures": v["failures"],
                   "counts": counts, "priority": v["taxonomy"]["priority"],
                   "verification": reader.reading.as_dict()})
        return
    _banner(reader)
    click.echo(f"Run {v['run_id']} ({v['status']}): {len(v['failures'])} failed of "
               f"{v['counts']['attempts']} attempt(s)")
    if v["failures"]:
        click.echo("")
        for line in _table(["attempt", "category", "details"],
                           [[f["attempt"], f["category"], f["details"]] for f in v["failures"]],
                           False):
            click.echo(line)
    click.echo("")
    for line in _table(["category", "count"],
                       [[k, str(counts[k])] for k in v["taxonomy"]["priority"]], False):
        click.echo(line)
    _verified_line(reader)


def _both_views(j: Journal, run_prefix: str | None,
                reader: Reader) -> tuple[dict[str, Any], dict[str, Any]]:
    """The golden and the statistics views of one run, its entries read (and verified) once."""
    from evaluators.stats_view import stats_of

    run_id = j.resolve_run(run_prefix)
    entries = reader.entries(j, run_id)
    return compute_views(entries, run_id), stats_of(entries, run_id)


def _cross_run_pairs(sa: dict[str, Any], sb: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Same-named agents of the two runs; the single agents when each run has one."""
    from evaluators.compare import side

    common = sorted(set(sa["per_agent"]) & set(sb["per_agent"]))
    if not common and len(sa["per_agent"]) == 1 == len(sb["per_agent"]):
        (x,), (y,) = list(sa["per_agent"]), list(sb["per_agent"])
        return [(side(sa, x, f"A:{x}"), side(sb, y, f"B:{y}"))]
    return [(side(sa, x, f"A:{x}"), side(sb, x, f"B:{x}")) for x in common]


@click.command("compare")
@click.argument("args", nargs=-1, metavar="RUN_A RUN_B | --agents A B... [RUN]")
@click.option("--agents", "by_agents", is_flag=True,
              help="Compare the named agents inside one run (the latest, or RUN last) pairwise.")
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True,
              help="Confidence level of the intervals (alpha = 1 - level for the tests).")
@json_option
@unverified_option
@pass_ctx
def compare_cmd(ctx: Ctx, args: tuple[str, ...], by_agents: bool, level: float, as_json: bool,
                unverified: bool) -> None:
    """Paired comparison: RUN_A -> RUN_B (score and component deltas, tasks newly passing and
    failing, and per agent the paired difference with its clustered SE and interval, McNemar's
    exact test, the paired bootstrap on scores, Holm across the comparisons), or, with
    --agents, the named agents of one run pairwise."""
    from cli.stats_render import pair_table, paired_lines, with_verdicts
    from evaluators.compare import paired_comparisons, side

    reader = Reader(ctx.home, unverified=unverified)
    if by_agents:
        names = list(args)
        with _open(ctx) as j:
            run_prefix = None
            if len(names) >= 3:
                try:
                    j.resolve_run(names[-1])
                    run_prefix = names.pop()
                except LedgerError:
                    run_prefix = None
            if len(names) < 2:
                raise UsageError("--agents needs two or more agent names (then, optionally, RUN)")
            _, s = _both_views(j, run_prefix, reader)
        missing = [n for n in names if n not in s["per_agent"]]
        if missing:
            raise UsageError(f"run {s['run_id']} has no scored attempt of agent(s) "
                             f"{', '.join(missing)} (agents: {', '.join(s['per_agent']) or 'none'})")
        pairs = [(side(s, a), side(s, b)) for i, a in enumerate(names) for b in names[i + 1:]]
        ps = paired_comparisons(pairs, seed_parts=(str(s["run_id"]),), level=level)
        if as_json:
            emit_json({"run": s["run_id"], "agents": names, "paired": with_verdicts(ps),
                       "verification": reader.reading.as_dict()})
            return
        _banner(reader)
        click.echo(f"run {s['run_id']}: {len(pairs)} paired comparison(s)"
                   + (", Holm-corrected" if len(pairs) > 1 else ""))
        for line in paired_lines(ps):
            click.echo(line)
        if len(pairs) == 1:
            click.echo("")
            for line in pair_table(ps["comparisons"][0]):
                click.echo(line)
        _verified_line(reader)
        return
    if len(args) != 2:
        raise UsageError("compare takes RUN_A RUN_B, or --agents A B [RUN]")
    run_a, run_b = args
    with _open(ctx) as j:
        va, sa = _both_views(j, run_a, reader)
        vb, sb = _both_views(j, run_b, reader)
    d = compare(va, vb)
    ps = paired_comparisons(_cross_run_pairs(sa, sb),
                            seed_parts=(str(va["run_id"]), str(vb["run_id"])), level=level)
    if as_json:
        emit_json({**d, "paired_stats": with_verdicts(ps), "verification": reader.reading.as_dict()})
        return
    for w in d["warnings"]:
        click.echo(f"warning: {w}", err=True)
    _banner(reader)
    for line in render_compare(d):
        click.echo(line)
    if ps["comparisons"]:
        click.echo("")
        for line in paired_lines(ps):
            click.echo(line)
    else:
        click.echo("no agent to pair: the runs share no agent name")
    _verified_line(reader)


def render_compare(d: dict[str, Any]) -> list[str]:
    """The text form of a comparison (warnings are printed separately, on stderr)."""
    s = d["score"]
    lines = [f"{d['run_a']} -> {d['run_b']}",
             f"score: {_fmt(s['a'])} -> {_fmt(s['b'])} ({_signed(s['delta'])})"]
    lines += _table(["component", "A", "B", "delta"],
                    [[k, _fmt(d["components"][k]["a"]), _fmt(d["components"][k]["b"]),
                      _signed(d["components"][k]["delta"])] for k in COMPONENTS], False)
    t = d["tasks"]
    for label, key in (("newly passing", "newly_passing"), ("newly failing", "newly_failing"),
                       ("only in A", "only_in_a"), ("only in B", "only_in_b")):
        if t[key]:
            lines.append(f"{label}: {', '.join(t[key])}")
    if not (t["newly_passing"] or t["newly_failing"]):
        lines.append("no task changed from passing to failing or back")
    p = d.get("paired") or {}
    if p.get("tasks"):
        lines.append(f"paired over {p['tasks']} common task(s): pass rate B - A "
                     f"{_signed(p['difference'])}, {round(100 * p['confidence'])}% CI "
                     f"[{_signed(p['ci_low'])}, {_signed(p['ci_high'])}]"
                     + ("" if p["significant"] else " (not distinguishable from noise)"))
    return lines


def _signed(value: Any) -> str:
    return "-" if value is None else f"{value:+.4f}"


@click.command("replay")
@RUN_ARG
@click.option("--vkey", help="Verifier key (string or file) for the checkpoints. "
              "Default: <ledger>/keys/signing.vkey.")
@json_option
@pass_ctx
def replay_cmd(ctx: Ctx, run_prefix: str | None, vkey: str | None, as_json: bool) -> None:
    """Recompute every recorded view of a run from its entries; exit 1 with a diff if any differs.

    The journal is verified first; replay refuses a journal that fails verification.
    """
    verifier = resolve_verifier(ctx, vkey)
    with _open(ctx) as j:
        size = j.size  # what the verify below covers
        try:
            j.verify(verifier=verifier)
        except VerificationError as exc:
            raise VerificationError(
                exc.check, "the journal fails verification, so replay refuses to run; "
                "`ledger verify` shows the details", seq=exc.seq) from exc
        run_id = j.resolve_run(run_prefix)
        result = replay_stored(j, run_id, stop=size)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True, ensure_ascii=False,
                              default=_bytes_repr))
    else:
        click.echo(result.message)
        for view in result.views:
            if not view.replayed:
                click.echo(f"  seq {view.seq}: view of evaluator {view.evaluator!r} "
                           f"{view.version} not replayed (unknown evaluator)")
                continue
            current = by_name(view.evaluator)
            if current is not None and view.version != current.version:
                click.echo(f"  seq {view.seq}: recorded by evaluator version {view.version}")
            for diff in view.diffs:
                click.echo(f"  {diff.path}: recorded={_show(diff.recorded, diff.absent == 'recorded')}"
                           f" computed={_show(diff.computed, diff.absent == 'computed')}")
            if view.diff_count > len(view.diffs):
                click.echo(f"  ... and {view.diff_count - len(view.diffs)} more")
        for f in result.injected:
            click.echo(f"  injected: seq {f.seq} {f.kind}{' of ' + f.attempt if f.attempt else ''}: {f.reason}")
    if not result.ok:
        sys.exit(1)


def replay_stored(j: Journal, run_id: str, *, stop: int | None = None) -> ReplayResult:
    """``replay_run`` over the run's entries below ``stop`` as a verified journal stores them:
    its structure (run-level, ``attempt.started``, ``attestation`` and view entries) read first,
    then every entry streamed through the fold once, never held (benchmarks/replay.py times
    this call)."""
    structure = list(j.entries(run=run_id, kind=STRUCTURE_KINDS, stop=stop,
                               check_canonical=False))
    return replay_run(j.entries(run=run_id, stop=stop, check_canonical=False), run_id,
                      structure=structure)


def _bytes_repr(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes_hex": value.hex()}
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _show(value: Any, absent: bool) -> str:
    if absent:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=_bytes_repr)
    return text if len(text) <= 120 else text[:117] + "..."


def register(group: click.Group) -> None:
    for cmd in (replay_cmd, report_cmd, failures_cmd, compare_cmd):
        group.add_command(cmd)
