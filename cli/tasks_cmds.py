"""``ledger tasks list|show|validate``: the golden tasks, and proof that each one is fair."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.main import Ctx, SandboxChoice, emit_json, json_option, pass_ctx
from ledger.errors import VerificationError
from ledger.run.task_runner import task_confinement
from ledger.tasks.loader import load_tasks, task_summary, tier_source
from ledger.tasks.model import Task
from ledger.tasks.validate import ValidationResult, validate_tasks


def _console(err: bool = False) -> Console:
    stream = sys.stderr if err else sys.stdout
    console = Console(file=stream)
    if not console.is_terminal:
        console = Console(file=stream, width=200, no_color=True)
    return console


def _select(ctx: Ctx, tiers: Sequence[str], ids: Sequence[str]) -> list[Task]:
    return load_tasks(tiers or None, ids or None, overrides=ctx.home.golden_dir)


def tier_option(func: Any) -> Any:
    return click.option(
        "--tier", "tiers", multiple=True, metavar="TIER",
        help="Only this tier (smoke, standard, stretch, adversarial, or an operator tier); repeatable.",
    )(func)


def task_option(func: Any) -> Any:
    return click.option("--task", "ids", multiple=True, metavar="ID", help="Only this task id; repeatable.")(func)


def register(group: click.Group) -> None:
    group.add_command(tasks)


@click.group()
def tasks() -> None:
    """Golden tasks: list them, show one, prove them fair."""


@tasks.command("list")
@tier_option
@task_option
@json_option
@pass_ctx
def list_cmd(ctx: Ctx, tiers: tuple[str, ...], ids: tuple[str, ...], as_json: bool) -> None:
    """List golden tasks (operator tasks in .ledger/golden/<tier>/ replace a packaged tier)."""
    selected = _select(ctx, tiers, ids)
    sources = {t.tier: str(tier_source(t.tier, overrides=ctx.home.golden_dir)) for t in selected}
    if as_json:
        emit_json({"tasks": [task_summary(t) for t in selected], "sources": sources})
        return
    table = Table(title=None, show_edge=False, header_style="bold")
    for name in ("tier", "id", "title", "signals", "budget", "hash"):
        table.add_column(name, no_wrap=name in ("tier", "id", "hash"))
    for t in selected:
        budget = f"{t.max_duration_s:g}s ${t.max_cost_usd:g} {t.max_tokens}tok"
        table.add_row(escape(t.tier), escape(t.id), escape(t.title), str(len(t.signals)), budget, t.hash[:12])
    console = _console()
    console.print(table)
    console.print(f"{len(selected)} task(s)")
    for tier, source in sources.items():
        console.print(f"  {tier}: {source}", highlight=False, markup=False)


@tasks.command("show")
@click.argument("task_ids", nargs=-1, metavar="[ID]...")
@tier_option
@task_option
@json_option
@pass_ctx
def show_cmd(
    ctx: Ctx, task_ids: tuple[str, ...], tiers: tuple[str, ...], ids: tuple[str, ...], as_json: bool
) -> None:
    """Show tasks as an agent would get them (hidden tests, solution and hidden fields are never shown)."""
    selected = _select(ctx, tiers, [*task_ids, *ids])
    if as_json:
        emit_json([{**task_summary(t), "prompt": t.prompt, "hidden_field_count": len(t.hidden_fields)} for t in selected])
        return
    console = _console()
    for n, t in enumerate(selected):
        if n:
            console.print()
        console.print(f"[bold]{escape(t.id)}[/bold]  {escape(t.title)}", highlight=False)
        rows = [
            ("tier", t.tier),
            ("hash", t.hash),
            ("folder", str(t.root)),
            ("budget", f"{t.max_duration_s:g} s, ${t.max_cost_usd:g}, {t.max_tokens} tokens"),
            ("role", t.role or "-"),
            ("owned files", ", ".join(t.owned_files) or "-"),
            ("expected files", ", ".join(t.expected_files_modified) or "-"),
            ("network allowlist", ", ".join(t.network_allowlist) or "(none)"),
            ("regression", " ".join(t.regression_command) or "(none)"),
            ("hidden tests", _hidden_text(t)),
            ("solution", t.solution.kind + " (not shown)"),
            ("needs", ", ".join(t.needs) or "-"),
            ("demo", f"{len(t.demo)} step(s)" if t.demo else "-"),
            ("hidden fields", f"{len(t.hidden_fields)} (not shown)" if t.hidden_fields else "-"),
        ]
        for i, sig in enumerate(t.signals):
            rows.append((f"signal {i}", _signal_text(sig.as_dict())))
        for key, value in rows:
            console.print(f"  {key:<18} {value}", highlight=False, markup=False)
        console.print("  prompt:")
        for line in t.prompt.splitlines():
            console.print(f"    {line}", highlight=False, markup=False)


def _hidden_text(t: Task) -> str:
    if t.graded_by_ids:  # the ids name hidden tests: counts only
        return (f"{' '.join(t.test_command)} + {len(t.fail_to_pass)} FAIL_TO_PASS and "
                f"{len(t.pass_to_pass)} PASS_TO_PASS test ids")
    if t.grading is not None:
        reward = f", reward from {t.grading.reward_file}" if t.grading.reward_file else ""
        return f"grading command{reward}"
    return " ".join(t.hidden_test_command)


def _signal_text(sig: dict[str, Any]) -> str:
    if sig["kind"] == "command":
        cmd = sig["command"]
        text = shlex.join(cmd) if isinstance(cmd, list) else cmd
        return f"command `{text}` exits {sig['expect_exit']}"
    if sig["kind"] == "path_exists":
        return f"path exists: {sig['path']}"
    return f"file {sig['path']} matches /{sig['pattern']}/"


@tasks.command("validate")
@tier_option
@task_option
@click.option("--parallel", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Tasks validated at the same time.")
@click.option("--verbose", "-v", is_flag=True, help="Show every check, not only the failed ones.")
@click.option("--sandbox", type=SandboxChoice(), default="auto", show_default=True,
              help="Run the test runs and signals in the grading sandbox of `ledger run` "
                   "(auto: when a sandbox backend works here; a backend's name: exit 3 where it "
                   "cannot).")
@json_option
@pass_ctx
def validate_cmd(
    ctx: Ctx, tiers: tuple[str, ...], ids: tuple[str, ...], parallel: int, verbose: bool,
    sandbox: str, as_json: bool,
) -> None:
    """Prove tasks fair: hidden tests fail before and pass with the reference solution,
    regression tests pass both times, a no-op agent fails. Exit 1 if any task fails."""
    selected = _select(ctx, tiers, ids)
    err = _console(err=True)
    done = [0]

    def progress(res: ValidationResult) -> None:
        done[0] += 1
        if err.is_terminal:
            mark = "ok" if res.ok else "FAIL"
            err.print(f"[{done[0]}/{len(selected)}] {res.task_id}: {mark}", highlight=False, markup=False)

    results = validate_tasks(selected, parallel=parallel, progress=progress,
                             confinement=task_confinement(sandbox, selected),
                             record=ctx.home.validated_dir,
                             at=datetime.now(UTC).isoformat(timespec="seconds"))
    failed = [r for r in results if not r.ok]
    if as_json:
        emit_json({"ok": not failed, "tasks": [r.as_dict() for r in results]})
    else:
        _render(results, verbose)
    if failed:
        raise VerificationError(
            "task-validation",
            f"{len(failed)} of {len(results)} task(s) failed: {', '.join(r.task_id for r in failed)}",
        )


def _render(results: list[ValidationResult], verbose: bool) -> None:
    table = Table(show_edge=False, header_style="bold")
    table.add_column("tier", no_wrap=True)
    table.add_column("task", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("sandboxed", no_wrap=True)
    table.add_column("checks")
    for r in results:
        shown = r.checks if verbose else r.failed
        lines = [f"{'ok  ' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in shown]
        if r.log_tail:
            lines += ["build log (tail):", *r.log_tail.splitlines()[-8:]]
        if r.environment and (verbose or not lines):
            lines.append(f"in {r.environment.get('image')} ({str(r.environment.get('digest'))[:19]})")
        summary = "\n".join(lines) if lines else f"all {len(r.checks)} checks passed"
        table.add_row(escape(r.tier), escape(r.task_id), "ok" if r.ok else "FAIL", f"{r.duration_s:.1f}s",
                      "yes" if r.sandbox != "none" else "no", escape(summary))
    console = _console()
    console.print(table)
    bad = sum(1 for r in results if not r.ok)
    console.print(f"{len(results) - bad} of {len(results)} task(s) valid")


# --------------------------------------------------------------------------- mine and import


def _progress_line(err: Console) -> Any:
    def say(line: str) -> None:
        err.print(line, highlight=False, markup=False)
    return say


@tasks.command("mine")
@click.argument("repo", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--commit", "commits", multiple=True, metavar="SHA", help="Examine this commit; repeatable (default: history of HEAD, newest first).")
@click.option("--since", metavar="DATE", help="Only commits after DATE (git's --since).")
@click.option("--max", "max_tasks", type=click.IntRange(1), metavar="N", help="Stop after N accepted tasks.")
@click.option("--tier", default="mined", show_default=True, metavar="T", help="Tier the tasks go to.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Tasks go to DIR/<tier>/<id>/ (default: the ledger's golden folder, so `ledger run --tier T` finds them).")
@click.option("--test-cmd", metavar="CMD", help="Test runner that takes test ids and prints pytest's -rA summary (default: python -m pytest -rA -p no:cacheprovider).")
@click.option("--statement", type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="FILE",
              help="Issue text added to each task statement (besides the commit message).")
@click.option("--statement-from", "statement_from", metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Pull-request or issue descriptions: DIR/<commit-prefix>.md, or DIR/pr-<N>.md for "
                   "a commit whose message names #N, added to that commit's statement.")
@click.option("--first-parent", is_flag=True,
              help="Walk only the first-parent line (default: every commit, merged branches' too).")
@click.option("--allow-thin", is_flag=True,
              help="Keep tasks whose statement names none of the functions the new tests call.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=120.0, show_default=True,
              metavar="S", help="Time limit of one test run, in seconds.")
@click.option("--environment", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              metavar="DOCKERFILE|REQUIREMENTS.txt",
              help="The mined tasks' environment: a Dockerfile, or pip requirements installed into "
                   "a Python image; the tests run in containers of it (exit 3 without an engine).")
@json_option
@pass_ctx
def mine_cmd(ctx: Ctx, repo: Path, commits: tuple[str, ...], since: str | None, max_tasks: int | None,
             tier: str, out: Path | None, test_cmd: str | None, statement: Path | None,
             statement_from: Path | None, first_parent: bool, allow_thin: bool, timeout_s: float,
             environment: Path | None, as_json: bool) -> None:
    """Turn fix commits of a git repository into golden tasks (the parent is the starting repo,
    test changes the hidden tests, the rest the reference solution). Exit 1 if none was accepted."""
    from ledger.tasks.mine import MineOptions, mine, parse_test_command

    extra: dict[str, Any] = {"test_command": parse_test_command(test_cmd)} if test_cmd else {}
    opts = MineOptions(
        repo=repo, commits=commits, since=since, max_tasks=max_tasks, tier=_tier_name(tier),
        out=out or ctx.home.golden_dir,
        statement=statement.read_text(encoding="utf-8") if statement else None, timeout_s=timeout_s,
        statement_from=statement_from, first_parent=first_parent, allow_thin=allow_thin,
        environment=environment, **extra,
    )
    report = mine(opts, progress=_progress_line(_console(err=True)),
                  confinement=task_confinement("auto", environments="required" if environment else ""))
    if as_json:
        emit_json(report.as_dict())
    else:
        _render_harvest([(r.commit[:12], r.accepted, r.task_id or "-", r.reason) for r in report.results],
                        "commit", f"{len(report.accepted)} accepted, {len(report.rejected)} rejected "
                        f"of {len(report.results)} commit(s) in {report.seconds:.1f}s -> {report.out}")
    if not report.accepted:
        raise VerificationError("mine", "no commit became a task")


def _tier_name(tier: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", tier):
        raise click.BadParameter(f"not a tier name: {tier!r}", param_hint="--tier")
    return tier


def _render_harvest(rows: list[tuple[str, bool, str, str]], first: str, footer: str) -> None:
    table = Table(show_edge=False, header_style="bold")
    for name in (first, "result", "task", "reason"):
        table.add_column(name, no_wrap=name != "reason")
    for key, ok, task_id, reason in rows:
        table.add_row(escape(key), "accepted" if ok else "rejected", escape(task_id), escape(reason))
    console = _console()
    console.print(table)
    console.print(footer, highlight=False, markup=False)


@tasks.group("import")
def import_group() -> None:
    """Import tasks of other suites (SWE-bench records, Harbor / Terminal-Bench folders)."""


def _render_import(report: Any, as_json: bool) -> None:
    if as_json:
        emit_json(report.as_dict())
    else:
        rows = [(r.name, r.accepted, r.task_id or "-", r.reason) for r in report.results]
        d = report.as_dict()
        _render_harvest(rows, "source", f"{d['imported']} imported ({d['runnable']} runnable here), "
                        f"{d['skipped']} skipped -> {report.out}")
    if not report.accepted:
        raise VerificationError("import", "nothing was imported")


@import_group.command("swebench")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--repos", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR",
              help="Local clones, one per repository, as DIR/<owner>__<name> (nothing is fetched).")
@click.option("--tier", default="swebench", show_default=True, metavar="T", help="Tier the tasks go to.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Tasks go to DIR/<tier>/<instance>/ (default: the ledger's golden folder).")
@click.option("--python", "python", metavar="PATH",
              help="Interpreter of a virtualenv with the repositories' dependencies (default: this one).")
@click.option("--environment", is_flag=True,
              help="Give each task its container environment (its Python, its requirements*.txt installed "
                   "with pip; docs/ENVIRONMENTS.md); tasks that need it are marked `needs: container`.")
@json_option
@pass_ctx
def import_swebench_cmd(ctx: Ctx, file: Path, repos: Path, tier: str, out: Path | None, python: str | None,
                        environment: bool, as_json: bool) -> None:
    """Import SWE-bench instances (JSONL) against local clones; instances whose environment cannot
    be built here are skipped with the reason (with --environment: marked `needs: container`).
    Exit 1 if nothing was imported."""
    from ledger.tasks.importers import import_swebench

    report = import_swebench(file, repos, out=out or ctx.home.golden_dir, tier=_tier_name(tier), python=python,
                             progress=_progress_line(_console(err=True)), environment=environment,
                             confinement=task_confinement("auto", environments="wanted" if environment else ""))
    _render_import(report, as_json)


@import_group.command("harbor")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tier", default="harbor", show_default=True, metavar="T", help="Tier the tasks go to.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Tasks go to DIR/<tier>/<name>/ (default: the ledger's golden folder).")
@json_option
@pass_ctx
def import_harbor_cmd(ctx: Ctx, folder: Path, tier: str, out: Path | None, as_json: bool) -> None:
    """Import a Harbor (task.toml) or Terminal-Bench (task.yaml) task folder, or a folder of them;
    tasks whose oracle fails on this host are marked `needs: container`. Exit 1 if nothing was imported."""
    from ledger.tasks.importers import import_harbor

    report = import_harbor(folder, out=out or ctx.home.golden_dir, tier=_tier_name(tier),
                           progress=_progress_line(_console(err=True)),
                           confinement=task_confinement("auto", environments="wanted"))
    _render_import(report, as_json)
