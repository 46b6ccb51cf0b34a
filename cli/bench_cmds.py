"""``ledger bench``: one task to several agents, a blinded meta-judge, a ranked leaderboard.

Exit codes follow the existing benchmark tool (so scripts written for it keep working):
0 at least one agent scored (a partial run says PARTIAL), 1 bad arguments, 2 no agent available,
3 all agents failed.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, SandboxChoice, emit_json, json_option, pass_ctx
from ledger.errors import LedgerError, NothingToRun, UsageError

EXIT_OK, EXIT_BAD_ARGS, EXIT_NO_AGENT, EXIT_ALL_FAILED = 0, 2, 3, 3  # the documented codes


class BenchUsageError(click.UsageError):
    """A bad argument to ``ledger bench``: exit 2, like every other command's usage errors."""

    exit_code = EXIT_BAD_ARGS


class BenchCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise BenchUsageError(exc.format_message(), exc.ctx) from None


def _bad(message: str) -> click.UsageError:
    return BenchUsageError(message)


def _fail(ctx: Ctx, exc: LedgerError) -> None:
    if ctx.debug:
        traceback.print_exc()
    click.echo(f"error: {exc}", err=True)
    if isinstance(exc, NothingToRun):
        sys.exit(EXIT_NO_AGENT)
    if isinstance(exc, UsageError):
        sys.exit(EXIT_BAD_ARGS)
    sys.exit(exc.exit_code or 1)


def _progress(line: str) -> None:
    click.echo(line, err=True)


@click.command("bench", cls=BenchCommand)
@click.argument("words", nargs=-1, metavar="[TEXT | RUN_A RUN_B]")
@click.option("--prompt", "--task", "prompt", metavar="TEXT", help="A literal prompt as the task (alias --task).")
@click.option("--files", "files", multiple=True, metavar="PATH",
              help="Files (repeat, or comma/newline separated) whose contents are the task.")
@click.option("--diff", "diff_ref", is_flag=False, flag_value="HEAD~1", default=None, metavar="[REF]",
              help="The change `git diff REF` shows is the task (default input; REF HEAD~1).")
@click.option("--corpus", is_flag=True, help="The packaged corpus tasks (same prompt every time).")
@click.option("--mode", type=click.Choice(["default", "corpus"]), default=None,
              help="Existing tool's flag: --mode corpus is --corpus.")
@click.option("--agent", "--provider", "--providers", "agents", multiple=True, metavar="SPEC",
              help="Agent spec (repeat or comma-separate); default: every agent CLI on PATH.")
@click.option("--judge", "judges", multiple=True, metavar="SPEC",
              help="Judge spec (repeat for a jury; 'offline' for the deterministic judge).")
@click.option("--with-tests", is_flag=True, help="Agents write tests for their code; the tests are executed.")
@click.option("--with-review", "--with-adversarial", "with_review", is_flag=True,
              help="Cross-review by the other agents, then a revision; reports the delta.")
@click.option("--with-test-review", "--with-test-adversarial", "with_test_review", is_flag=True,
              help="Cross-review of the tests (needs --with-tests).")
@click.option("--with-static-checks", "with_static", is_flag=True,
              help="ruff, mypy, pytest (Python) or tsc, jest (TypeScript) where installed.")
@click.option("--swap-check", is_flag=True,
              help="Judge twice, the second time in reversed order; report flipped verdicts.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              metavar="SECONDS", help="Time limit per agent call.")
@click.option("--seed", type=int, default=None, help="Seed of the judges' presentation order.")
@click.option("--parallel", type=click.IntRange(1, 64), default=None,
              help="Calls at a time (default: all agents at once).")
@click.option("--no-snapshot", is_flag=True, help="Do not store the task text (secrets, PII).")
@click.option("--dry-run", is_flag=True, help="Print the prompt and agents; run nothing.")
@click.option("--show-costs", is_flag=True, help="Print the price table ($ per million tokens).")
@click.option("--compare", is_flag=True, help="Compare two bench runs (default: the last two).")
@click.option("--replay-last", is_flag=True, help="Run again with the task of the latest bench run.")
@click.option("--out", "out_dir", default="audit-results", show_default=True, metavar="DIR",
              help="Folder for benchmark-NNN-<run_id>.md and .json.")
@click.option("--no-report", is_flag=True, help="Do not write the report files.")
@click.option("--pricing", "pricing_file", type=click.Path(dir_okay=False), default=None,
              help="Price table file (TOML or JSON) for estimated costs.")
@click.option("--sandbox", type=SandboxChoice(), default=None,
              help="Where every agent call and check runs: auto (bubblewrap where it works, "
                   "default; or [run] sandbox of ledger.toml), a backend (exit 3 without it) "
                   "or none.")
@json_option
@pass_ctx
def bench_cmd(ctx: Ctx, /, as_json: bool, **params: Any) -> None:
    """Send one task to several coding agents at once; judge blind; rank them.

    The task is a prompt (--prompt or TEXT), files (--files), a git diff (--diff, the default) or
    the packaged corpus (--corpus). Every step is a journal entry, so `ledger replay RUN` rebuilds
    the leaderboard without calling a model. Exit: 0 scored (PARTIAL when some failed), 1 bad
    arguments, 2 no agent available, 3 all agents failed.
    """
    try:
        code = _bench(ctx, BenchArgs(**params), as_json)
    except LedgerError as exc:
        _fail(ctx, exc)
        return
    sys.exit(code)


def _journal(ctx: Ctx) -> Any:
    from ledger.journal.journal import Journal

    if not ctx.home.journal_path.exists():
        return None
    return Journal.open(ctx.home.journal_path, readonly=True)


@dataclass(frozen=True)
class BenchArgs:
    """What `ledger bench` was given (the click parameters, as one value)."""

    words: tuple[str, ...]
    prompt: str | None
    files: tuple[str, ...]
    diff_ref: str | None
    corpus: bool
    mode: str | None
    agents: tuple[str, ...]
    judges: tuple[str, ...]
    with_tests: bool
    with_review: bool
    with_test_review: bool
    with_static: bool
    swap_check: bool
    timeout_s: float
    seed: int | None
    parallel: int | None
    no_snapshot: bool
    dry_run: bool
    show_costs: bool
    compare: bool
    replay_last: bool
    out_dir: str
    no_report: bool
    pricing_file: str | None
    sandbox: str | None

    @property
    def use_corpus(self) -> bool:
        return self.corpus or self.mode == "corpus"

    def inputs_given(self) -> list[str]:
        given = (("--prompt", self.prompt is not None), ("--files", bool(self.files)),
                 ("--diff", self.diff_ref is not None), ("--corpus", self.use_corpus))
        return [name for name, yes in given if yes]

    def options(self) -> Any:
        from ledger.bench.runner import BenchOptions

        return BenchOptions(agents=self.agents, judges=self.judges, with_tests=self.with_tests,
                            with_review=self.with_review, with_test_review=self.with_test_review,
                            with_static=self.with_static, swap_check=self.swap_check,
                            timeout_s=self.timeout_s, no_snapshot=self.no_snapshot, seed=self.seed,
                            parallel=self.parallel, sandbox=self.sandbox,
                            pricing_file=Path(self.pricing_file) if self.pricing_file else None)


def _bench(ctx: Ctx, a: BenchArgs, as_json: bool) -> int:
    out_dir = Path(a.out_dir)
    if a.show_costs:
        return _show_costs(ctx.home.path, a.pricing_file, as_json)
    if a.compare:
        given = a.inputs_given()
        if given or a.replay_last:
            raise _bad(f"--compare takes only run ids, not {', '.join(given) or '--replay-last'}")
        return _compare(ctx, a.words, out_dir, as_json)
    if a.with_test_review and not a.with_tests:
        raise _bad("--with-test-review (--with-test-adversarial) needs --with-tests")
    if a.timeout_s <= 0:
        raise _bad("--timeout must be a positive number of seconds")
    task = _task_input(ctx, a, out_dir)
    if a.dry_run:
        return _dry_run(ctx, task, a.options(), as_json)
    return _run(ctx, task, a.options(), out_dir, a.no_report, as_json)


def _task_input(ctx: Ctx, a: BenchArgs, out_dir: Path) -> Any:
    """The one task input given (TEXT, --prompt, --files, --diff, --corpus, --replay-last)."""
    from ledger.bench import inputs

    given = a.inputs_given()
    prompt = a.prompt
    if a.words:
        if prompt is not None:
            raise _bad("give the prompt either as TEXT or with --prompt, not both")
        prompt = " ".join(a.words)
        given.insert(0, "TEXT")
    if len(given) > 1:
        raise _bad(f"choose one task input, not {' and '.join(given)}")
    if a.replay_last:
        if a.use_corpus:
            raise _bad("--replay-last cannot be combined with --corpus (the corpus prompt is fixed)")
        if given:
            raise _bad(f"--replay-last takes the task of the latest run; drop {given[0]}")
        return _replay_task(ctx, out_dir)
    if a.use_corpus:
        return inputs.corpus_task()
    if prompt is not None:
        return inputs.task_from_prompt(prompt)
    if a.files:
        return inputs.task_from_files(list(a.files))
    return inputs.task_from_diff(a.diff_ref or "HEAD~1")


def _show_costs(ledger_dir: Path, pricing_file: str | None, as_json: bool) -> int:
    from ledger.agents.costs import PRICES_AS_OF, pricing_rows, resolve_pricing

    table, user_file = resolve_pricing(ledger_dir, Path(pricing_file) if pricing_file else None)
    rows = pricing_rows(table)
    if as_json:
        emit_json({"as_of": PRICES_AS_OF, "user_file": str(user_file) if user_file else None,
                   "models": rows})
        return EXIT_OK
    from cli.table import grid as _grid

    click.echo(f"Prices in $ per million tokens (built-in table as of {PRICES_AS_OF}; "
               "--pricing FILE overrides)")
    for line in _grid(["model", "input", "output", "source"],
                      [[r["model"], f"{r['input_per_mtok']:g}", f"{r['output_per_mtok']:g}",
                        r["source"]] for r in rows], False):
        click.echo(line)
    return EXIT_OK


def _compare(ctx: Ctx, refs: tuple[str, ...], out_dir: Path, as_json: bool) -> int:
    from cli.reading import Reader
    from cli.table import grid as _grid
    from ledger.bench.compare import compare_runs

    journal = _journal(ctx)
    reader = Reader(ctx.home, unverified=False)  # the leaderboards shown are verified first
    try:
        d = compare_runs(refs, journal, out_dir, reader.entries)
    finally:
        if journal is not None:
            journal.close()
    if as_json:
        emit_json(d)
        return EXIT_OK
    for w in d["warnings"]:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"{d['run_a']} -> {d['run_b']}")

    def f(x: Any, spec: str = "") -> str:
        return "-" if x is None else format(x, spec)

    rows = [[a["provider"], f(a["quality_a"]), f(a["quality_b"]), f(a["quality_delta"], "+g"),
             f(a["time_a"], ".0f"), f(a["time_b"], ".0f"), f(a["time_delta"], "+.0f"),
             f(a["cost_a"], ".3f"), f(a["cost_b"], ".3f"), f(a["cost_delta"], "+.3f"),
             f"{a['status_a'] or '-'} -> {a['status_b'] or '-'}"] for a in d["agents"]]
    for line in _grid(["agent", "quality A", "quality B", "Δ", "time A", "time B", "Δ",
                       "cost A", "cost B", "Δ", "status"], rows, False):
        click.echo(line)
    return EXIT_OK


def _replay_task(ctx: Ctx, out_dir: Path) -> Any:
    from ledger.bench.compare import latest_task
    from ledger.bench.inputs import SNAPSHOT_LIMIT, task_from_snapshot

    journal = _journal(ctx)
    try:
        source, snapshot, run_id, chars = latest_task(journal, out_dir)
    finally:
        if journal is not None:
            journal.close()
    if source != "corpus" and not snapshot:
        raise UsageError(f"--replay-last: run {run_id} stored no task snapshot (--no-snapshot)")
    if source != "corpus" and chars > SNAPSHOT_LIMIT:
        click.echo(f"warning: run {run_id} stored the first {SNAPSHOT_LIMIT} of {chars} characters "
                   "of its task; the replay's task hash will differ", err=True)
    click.echo(f"replaying the task of {run_id} ({source})", err=True)
    return task_from_snapshot(source, snapshot or "", run_id)


def _dry_run(ctx: Ctx, task: Any, opts: Any, as_json: bool) -> int:
    from ledger.bench.runner import resolve_contestants, resolve_judges

    try:
        contestants, skipped = resolve_contestants(opts.agents, ctx.home)
        judges, fallback, why = resolve_judges(opts.judges, contestants, ctx.home)
        names = [c.name for c in contestants]
        judge_names = ["offline"] if fallback else [j.name for j in judges]
        code = EXIT_OK
    except NothingToRun as exc:
        names, skipped, judge_names, why, code = [], [str(exc)], [], "", EXIT_NO_AGENT
    info = {"mode": task.mode, "task_source": task.source, "task_hash": task.task_hash,
            "prompt": task.agent_prompt(), "providers": names, "skipped": skipped,
            "judges": judge_names, "judge_choice": why,
            "options": {"with_tests": opts.with_tests, "with_adversarial": opts.with_review,
                        "with_test_adversarial": opts.with_test_review,
                        "with_static_checks": opts.with_static, "swap_check": opts.swap_check}}
    if as_json:
        emit_json(info)
        return code
    click.echo("BENCHMARK DRY RUN (nothing dispatched)")
    click.echo(f"Mode: {task.mode} | Source: {task.source} | Task: {task.title} | "
               f"Hash: {task.task_hash[:12]}")
    click.echo(f"Agents: {', '.join(names) or '(none available)'}")
    for s in skipped:
        click.echo(f"  skipped: {s}")
    click.echo(f"Judges: {', '.join(judge_names) or '-'} ({why})")
    o = info["options"]
    click.echo(f"Options: tests={o['with_tests']} review={o['with_adversarial']} "
               f"test-review={o['with_test_adversarial']} static={o['with_static_checks']} "
               f"swap-check={o['swap_check']}")
    click.echo("--- prompt ---")
    click.echo(task.agent_prompt())
    return code


def _run(ctx: Ctx, task: Any, opts: Any, out_dir: Path, no_report: bool, as_json: bool) -> int:
    from cli.bench_report import render_summary, render_table, write_reports
    from evaluators.leaderboard import export_v2
    from ledger.bench.runner import run_bench

    _progress(f"BENCHMARK RUN | Mode: {task.mode} | Task: {task.title} | hash {task.task_hash[:12]}")
    written: list[str] = []

    def on_view(view: dict[str, Any]) -> list[str]:
        if no_report:
            return []
        written.extend(write_reports(view, out_dir))
        return list(written)

    result = run_bench(ctx.home, task, opts, progress=_progress, on_view=on_view)
    if as_json:
        click.echo(json.dumps(export_v2(result.view), indent=2, ensure_ascii=False))
    else:
        view = result.view
        click.echo(f"## Benchmark Results — {view['run_id']}")
        click.echo(f"Task: {task.title} | Mode: {task.mode}")
        click.echo("")
        click.echo(render_table(view))
        click.echo("")
        click.echo("Tokens: ~ = estimated (words x 1.3); cost ~ = estimated from the price table.")
        click.echo("")
        click.echo(render_summary(view, written))
    if result.verdict == "PARTIAL":
        _progress("PARTIAL: some agents failed or timed out; the others were scored")
    elif result.verdict == "UNSCORED":
        _progress("UNSCORED: agents answered but no judge produced usable scores")
    elif result.verdict == "FAIL":
        _progress("FAIL: every agent failed")
    return result.exit_code


def register(group: click.Group) -> None:
    group.add_command(bench_cmd)
