"""``ledger run`` and ``ledger runs``: parse, call the coordinator, render."""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, SandboxChoice, emit_json, json_option, pass_ctx
from cli.table import grid as _table
from evaluators.fold import parse_attempt_id
from ledger.agents.strace import TRACE_MODES
from ledger.errors import UsageError
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.run.coordinator import execute_run
from ledger.run.plan import RunRequest
from ledger.run.summary import AttemptResult, RunSummary


def _who(attempt_id: str) -> str:
    """``task agent #repeat`` of an attempt id (the id itself when it does not parse)."""
    parsed = parse_attempt_id(attempt_id)
    if parsed is None:
        return attempt_id
    _run, task, agent, repeat, try_no = parsed
    return f"{task} {agent} #{repeat}" + (f" (try {try_no})" if try_no > 1 else "")


class LineProgress:
    """Plain progress lines on stderr (no terminal): a line when an attempt starts and one when
    it ends; nothing with --json (``quiet``)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.total = 0
        self.done = 0
        self.started: set[str] = set()

    def note(self, message: str) -> None:
        click.echo(message, err=True)

    def start(self, run_id: str, total: int) -> None:
        self.total = total
        if not self.quiet:
            click.echo(f"run {run_id}: {total} attempt(s)", err=True)

    def phase(self, attempt_id: str, phase: str) -> None:
        if attempt_id not in self.started:
            self.started.add(attempt_id)
            if not self.quiet:
                click.echo(f"started {_who(attempt_id)}", err=True)

    def usage(self, attempt_id: str, tokens: int, cost_usd: float | None) -> None:
        pass

    def finished(self, result: AttemptResult) -> None:
        self.done += 1
        if not self.quiet:
            click.echo(f"[{self.done}/{self.total}] {_label(result)}: {result.outcome}"
                       f"{_verdict(result)}{_secs(result.wall_s)}", err=True)

    def stop(self) -> None:
        pass


class BarProgress(LineProgress):
    """On a terminal (rich): a live line per running attempt (task, agent, phase, elapsed, model
    tokens and cost so far where the agent reports them) under a bar of the run; a line per
    finished attempt above them."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                            MofNCompleteColumn(), TextColumn("{task.fields[phase]}"),
                            TimeElapsedColumn(), TextColumn("{task.fields[usage]}"),
                            console=self.console, transient=True)
        self.run_task: Any = None
        self.rows: dict[str, Any] = {}  # attempt id -> its live line

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)

    def start(self, run_id: str, total: int) -> None:
        self.total = total
        self.console.print(f"run {run_id}: {total} attempt(s)", markup=False, highlight=False)
        self.bar.start()
        self.run_task = self.bar.add_task("run", total=total, phase="", usage="")

    def phase(self, attempt_id: str, phase: str) -> None:
        row = self.rows.get(attempt_id)
        if row is None:
            self.rows[attempt_id] = self.bar.add_task(f"  {_who(attempt_id)}", total=None,
                                                      phase=phase, usage="")
        else:
            self.bar.update(row, phase=phase)

    def usage(self, attempt_id: str, tokens: int, cost_usd: float | None) -> None:
        row = self.rows.get(attempt_id)
        if row is not None:
            cost = f", ${cost_usd:.4f}" if cost_usd is not None else ""
            self.bar.update(row, usage=f"{tokens} tokens{cost}")

    def finished(self, result: AttemptResult) -> None:
        self.done += 1
        row = self.rows.pop(result.attempt, None)
        if row is not None:
            self.bar.remove_task(row)
        self.bar.update(self.run_task, advance=1)
        self.console.print(f"{_label(result)}: {result.outcome}{_verdict(result)}"
                           f"{_secs(result.wall_s)}", markup=False, highlight=False)

    def stop(self) -> None:
        self.bar.stop()


def _label(r: AttemptResult) -> str:
    return f"{r.task} {r.agent} #{r.repeat}" + (f" (try {r.try_no})" if r.try_no > 1 else "")


def _verdict(r: AttemptResult) -> str:
    """The attestation verdict after an attempt's outcome; none for an attempt that did not
    complete (interrupted, or stopped by a harness failure): nothing it did was graded, and a
    CLEAN next to it would read as a clean result."""
    return f", {r.attestation}" if r.attestation and r.status == "completed" else ""


def _attest_cell(r: AttemptResult) -> str:
    if r.status != "completed":
        return f"- ({r.outcome})"
    if not r.attestation:
        return "-"
    return r.attestation + (f" ({r.attestation_matches})" if r.attestation_matches else "")


def _secs(value: float | None) -> str:
    return f" ({value:.1f}s)" if isinstance(value, int | float) else ""


def render_summary(s: RunSummary, saved: bool) -> str:
    rows = []
    for r in s.results:
        total = sum(r.hidden_counts.values())
        tests = (f"{r.hidden_counts.get('passed', 0)}/{total}" if total
                 else "-" if r.hidden_passed is None else "ok" if r.hidden_passed else "FAIL")
        rows.append([r.task, r.agent, str(r.repeat), r.outcome, tests,
                     f"{r.signals_passed}/{r.signals_total}",
                     "-" if r.regression_passed is None else ("ok" if r.regression_passed else "FAIL"),
                     _attest_cell(r),
                     f"{r.wall_s:.1f}" if r.wall_s is not None else "-",
                     f"{r.cost_usd:.4f}" if r.cost_usd is not None else "-"])
    lines = [f"run {s.run_id}: {s.status}" + (" (resumed)" if s.resumed else "")]
    if rows:
        lines += ["", *_table(["task", "agent", "rep", "outcome", "hidden", "signals",
                               "regression", "attestation", "agent s", "cost $"], rows)]
    else:
        lines.append("nothing left to run")
    if s.unreached:
        lines.append("")
        lines += [f"agent {a.agent}: never reached its model in {a.unreached} of {a.attempts} "
                  f"attempt(s) ({a.kind}: {a.detail})" for a in s.unreached]
    lines += ["", f"checkpoint (tree size {s.tree_size}):", s.checkpoint.rstrip("\n"), ""]
    if saved and s.status == "interrupted":
        lines += ["interrupted: the attempts that did not finish are recorded as such; to run them:",
                  f"  ledger run --resume {s.run_id}"]
    elif saved:
        lines += ["next:", f"  ledger report {s.run_id}", f"  ledger verify {s.run_id}"]
        shown = next((r for r in s.results if r.attestation == "DIRTY"), None) or next(
            (r for r in s.results if r.attestation_hash), None)
        if shown is not None and shown.attestation_hash:
            lines.append(f"  ledger attest show {shown.attestation_hash[:16]}")
    else:
        lines.append("(--no-save: the journal was temporary and has been discarded)")
    return "\n".join(lines)


@click.command("run")
@click.option("--tier", "tiers", multiple=True, metavar="T", help="Tier to run (repeatable; default smoke).")
@click.option("--task", "task_ids", multiple=True, metavar="ID", help="Task id to run (repeatable).")
@click.option("--agent", "agents", multiple=True, metavar="SPEC",
              help="Agent: noop, oracle, demo, replay:RUN, claude, codex, ..., cmd:PROGRAM ARGS, "
                   "http:MODEL@URL (any OpenAI-compatible endpoint), or a name from ledger.toml "
                   "(repeatable; docs/agents.md).")
@click.option("--agent-base-url", metavar="URL",
              help="Point every CLI preset at this model endpoint (e.g. http://127.0.0.1:8000/v1); "
                   "see docs/agents.md.")
@click.option("--parallel", type=click.IntRange(min=1), help="Attempts run at once (default 1).")
@click.option("--repeat", type=click.IntRange(min=1), help="Attempts per task and agent (default 1).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Time budget of every attempt (overrides the tasks' budgets).")
@click.option("--resume", "resume", metavar="RUN", help="Finish an interrupted run (id or prefix).")
@click.option("--retry", type=click.Choice(("infra",)),
              help="With --resume: re-run only the attempts that failed for infra reasons "
                   "(sandbox start, model endpoint, disk, executor, harness), nothing else.")
@click.option("--trace", type=click.Choice(TRACE_MODES), help="Activity capture (default auto).")
@click.option("--sandbox", type=SandboxChoice(),
              help="Isolation of every attempt: auto (default: bubblewrap where it works, a "
                   "task with an environment in the container engine), container (whichever "
                   "engine works), a sandbox backend's name (required; exit 3 where it cannot "
                   "work) or none (docs/ENVIRONMENTS.md).")
@click.option("--allow-image-change", is_flag=True,
              help="Run a task whose image digest differs from the one its last `ledger tasks "
                   "validate` ran in (refused otherwise, exit 2); recorded in environment.ready.")
@click.option("--no-save", is_flag=True, help="Use a temporary journal, discarded afterwards.")
@click.option("--executor", type=click.Choice(("local", "ray")),
              help="Where attempts run: local worker processes (default) or a Ray cluster "
                   "(pip install 'eval-ledger[ray]').")
@click.option("--ray-address", metavar="ADDR",
              help="With --executor ray: the cluster to join (default: a private one on 127.0.0.1).")
@click.option("--compare", "compare_prev", is_flag=True,
              help="Also print the score delta against the previous run of the same task set.")
@click.option("--keep-worktrees", is_flag=True, hidden=True, help="Keep attempt directories (debugging).")
@click.option("--no-canaries", is_flag=True,
              help="Give attempts no canaries (mutant hidden tests that catch forged outcomes): "
                   "for control runs and the benchmark baseline; recorded in run.started.")
@json_option
@pass_ctx
def run_cmd(ctx: Ctx, tiers: tuple[str, ...], task_ids: tuple[str, ...], agents: tuple[str, ...],
            agent_base_url: str | None, parallel: int | None, repeat: int | None, timeout: float | None, resume: str | None,
            retry: str | None,
            trace: str | None, sandbox: str | None, allow_image_change: bool, no_save: bool,
            executor: str | None, ray_address: str | None,
            compare_prev: bool, keep_worktrees: bool, no_canaries: bool, as_json: bool) -> None:
    """Run agents on golden tasks; every event goes to the journal."""
    if ray_address and executor == "local":
        raise UsageError("--ray-address needs --executor ray")
    if retry and not resume:
        raise UsageError("--retry infra needs --resume RUN")
    request = RunRequest(tiers=tiers, task_ids=task_ids, agents=agents, parallel=parallel,
                         repeat=repeat, timeout_s=timeout, trace=trace, sandbox=sandbox,
                         resume=resume, retry=retry,
                         executor=executor, ray_address=ray_address,
                         keep_worktrees=keep_worktrees, agent_base_url=agent_base_url,
                         canaries=not no_canaries, allow_image_change=allow_image_change)
    progress = LineProgress(quiet=True) if as_json else (
        BarProgress() if sys.stderr.isatty() else LineProgress())
    if no_save:
        with tempfile.TemporaryDirectory(prefix="ledger-nosave-") as tmp:
            home = LedgerHome(Path(tmp) / ".ledger")
            summary = execute_run(home, request, progress=progress, source=ctx.home)
            _render(summary, as_json, saved=False)
    else:
        summary = execute_run(ctx.home, request, progress=progress)
        delta = _compare_previous(ctx, summary.run_id) if compare_prev else None
        _render(summary, as_json, saved=True, compare=delta if compare_prev else _NO_COMPARE)
    if summary.status == "interrupted":
        sys.exit(130)
    if summary.idle_agents:
        boxed = [a for a in summary.unreached if a.no_work and a.kind == "sandbox_failed"]
        if boxed and len(boxed) == len(summary.idle_agents):
            click.echo(f"error: the sandbox never started {', '.join(a.agent for a in boxed)} "
                       f"({boxed[0].detail}); nothing was run", err=True)
        else:
            click.echo(f"error: no attempt of {', '.join(summary.idle_agents)} reached a model; "
                       "nothing was really run", err=True)
        sys.exit(3)


_NO_COMPARE: dict[str, Any] = {}


def _compare_previous(ctx: Ctx, run_id: str) -> dict[str, Any] | None:
    from cli.reading import Reader
    from ledger.errors import VerificationError
    from ledger.journal.journal import Journal
    from ledger.verify.previous import compare_with_previous

    with Journal.open(ctx.home.journal_path, readonly=True) as j:
        try:
            return compare_with_previous(j, run_id, Reader(ctx.home, unverified=False))
        except VerificationError as exc:
            click.echo(f"warning: no comparison with the previous run: it does not verify ({exc})",
                       err=True)
            return None


def _render(summary: RunSummary, as_json: bool, *, saved: bool,
            compare: dict[str, Any] | None = _NO_COMPARE) -> None:
    if as_json:
        data = summary.as_dict()
        data["saved"] = saved
        if not saved:
            data["next"] = []
        if compare is not _NO_COMPARE:
            data["compare"] = compare
        if saved and summary.status == "interrupted":
            data["resume"] = f"ledger run --resume {summary.run_id}"
        emit_json(data)
        return
    click.echo(render_summary(summary, saved))
    if compare is _NO_COMPARE:
        return
    if compare is None:
        click.echo("\ncompare: no earlier run of the same task set")
        return
    from cli.report_cmds import render_compare

    for w in compare["warnings"]:
        click.echo(f"warning: {w}", err=True)
    click.echo("\ncompare with the previous run of the same task set:")
    for line in render_compare(compare):
        click.echo(f"  {line}")


@click.command("runs")
@json_option
@pass_ctx
def runs_cmd(ctx: Ctx, as_json: bool) -> None:
    """List runs, newest first: id, start time, tiers, agents, state."""
    if not ctx.home.journal_path.exists():
        rows: list[dict[str, Any]] = []
    else:
        with Journal.open(ctx.home.journal_path, readonly=True) as journal:
            rows = [{
                "run": r.run_id,
                "started": datetime.fromtimestamp(r.started_ts / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tiers": list(r.config.get("tiers", [])),
                "agents": list(r.config.get("agents", [])),
                "state": r.state,
            } for r in journal.runs()]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no runs yet: start one with `ledger run`")
        return
    for line in _table(["run", "started", "tiers", "agents", "state"],
                       [[r["run"], r["started"], ",".join(r["tiers"]), ",".join(r["agents"]),
                         r["state"]] for r in rows]):
        click.echo(line)


def register(group: click.Group) -> None:
    group.add_command(run_cmd)
    group.add_command(runs_cmd)
