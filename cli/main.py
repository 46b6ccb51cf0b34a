"""The ``ledger`` command: one click group, shared options, errors mapped to exit codes here."""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ledger.errors import LedgerError
from ledger.home import LedgerHome

F = TypeVar("F", bound=Callable[..., Any])

# Each module defines ``register(group: click.Group) -> None``.
COMMAND_MODULES: list[str] = [
    "cli.journal_cmds",
    "cli.report_cmds",
    "cli.run_cmds",
    "cli.costs_cmds",
    "cli.tasks_cmds",
    "cli.bench_cmds",
    "cli.attest_cmds",
    "cli.view_cmds",
]


@dataclass
class Ctx:
    """What every command gets: where the ledger is, and whether to show tracebacks."""

    home: LedgerHome
    debug: bool


pass_ctx = click.make_pass_decorator(Ctx)


def json_option(func: F) -> F:
    """Add ``--json`` (machine-readable output) to a command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


class LedgerGroup(click.Group):
    """A group that turns LedgerError into one line on stderr and the error's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            debug = bool(ctx.params.get("debug"))
            if debug:
                traceback.print_exc()
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=LedgerGroup)
@click.option("--ledger", "ledger_path", metavar="PATH", envvar="LEDGER_HOME",
              help="Ledger directory (default ./.ledger; also LEDGER_HOME).")
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
@click.version_option(package_name="eval-ledger", prog_name="ledger")
@click.pass_context
def cli(ctx: click.Context, ledger_path: str | None, debug: bool) -> None:
    """eval-ledger: run coding agents on golden tasks; every event in a verifiable journal."""
    ctx.obj = Ctx(home=LedgerHome.resolve(ledger_path), debug=debug)


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main() -> None:
    cli(prog_name="ledger")
