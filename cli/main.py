"""The ``ledger`` command: one click group, shared options, errors mapped to exit codes here."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

import ledger

if TYPE_CHECKING:
    from ledger.home import LedgerHome

F = TypeVar("F", bound=Callable[..., Any])

# Each module defines ``register(group: click.Group) -> None``. Modules are imported only when
# one of their commands runs (or for ``--help``), so ``ledger --version``, ``ledger log`` and the
# other journal commands never import the run, the bench, the tasks or Ray.
COMMAND_MODULES: list[str] = [
    "cli.journal_cmds",
    "cli.report_cmds",
    "cli.run_cmds",
    "cli.costs_cmds",
    "cli.tasks_cmds",
    "cli.bench_cmds",
    "cli.attest_cmds",
    "cli.view_cmds",
    "cli.witness_cmds",
    "cli.publish_cmds",
    "cli.stats_cmds",
]


# Which module registers each command (``ledger NAME`` imports just that one). A command missing
# here still works: an unknown name loads every module of COMMAND_MODULES before giving up.
COMMANDS: dict[str, str] = {
    **dict.fromkeys(("append", "log", "checkpoint", "keys", "proof", "verify", "export"),
                    "cli.journal_cmds"),
    **dict.fromkeys(("report", "failures", "compare", "replay"), "cli.report_cmds"),
    **dict.fromkeys(("run", "runs"), "cli.run_cmds"),
    "costs": "cli.costs_cmds",
    "tasks": "cli.tasks_cmds",
    "bench": "cli.bench_cmds",
    "attest": "cli.attest_cmds",
    "view": "cli.view_cmds",
    "witness": "cli.witness_cmds",
    **dict.fromkeys(("publish", "serve", "monitor"), "cli.publish_cmds"),
    "plan": "cli.stats_cmds",
}


class Ctx:
    """What every command gets: where the ledger is, and whether to show tracebacks. (A plain
    class: ``ledger --version`` imports neither dataclasses nor ``ledger.home``.)"""

    __slots__ = ("home", "debug")

    def __init__(self, home: LedgerHome, debug: bool) -> None:
        self.home = home
        self.debug = debug


pass_ctx = click.make_pass_decorator(Ctx)


def json_option(func: F) -> F:
    """Add ``--json`` (machine-readable output) to a command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


class SandboxChoice(click.Choice):  # type: ignore[type-arg]
    """``--sandbox``: the modes of the sandbox registry (``ledger.sandbox.registry.modes``), read
    when the option is parsed or shown, so a backend registered later is a choice too and start-up
    imports no sandbox."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from ledger.sandbox.registry import modes

        return modes()

    @choices.setter
    def choices(self, _value: Any) -> None:  # click.Choice.__init__ assigns; the registry decides
        pass


def emit_json(value: Any) -> None:
    import json

    click.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


class LedgerGroup(click.Group):
    """A group that turns LedgerError into one line on stderr and the error's exit code, and
    imports a command's module only when that command is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()

    def _load(self, module: str) -> None:
        if module not in self._loaded:
            self._loaded.add(module)
            importlib.import_module(module).register(self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self._load(COMMANDS[cmd_name])
        if cmd_name not in self.commands:
            for module in COMMAND_MODULES:
                self._load(module)
        return self.commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in COMMAND_MODULES:
            self._load(module)
        return sorted(self.commands)

    def all_commands(self) -> dict[str, click.Command]:
        """Every command, each module loaded (for help and documentation checks)."""
        self.list_commands(click.Context(self))
        return dict(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        from ledger.errors import LedgerError  # here: ``--version`` ends before any command

        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            debug = bool(ctx.params.get("debug"))
            if debug:
                import traceback

                traceback.print_exc()
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except RecursionError:  # a parser met input nested deeper than Python's stack
            click.echo("error: input nested too deeply to read", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=LedgerGroup)
@click.option("--ledger", "ledger_path", metavar="PATH", envvar="LEDGER_HOME",
              help="Ledger directory (default ./.ledger; also LEDGER_HOME).")
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
@click.option("--log-format", type=click.Choice(["console", "json"]), default=None,
              help="Format of the harness's diagnostic log on stderr (also LEDGER_LOG_FORMAT); "
                   "its level is LEDGER_LOG=debug|info|warning|error|off (default warning).")
@click.version_option(version=ledger.__version__, prog_name="ledger")
@click.pass_context
def cli(ctx: click.Context, ledger_path: str | None, debug: bool, log_format: str | None) -> None:
    """eval-ledger: run coding agents on golden tasks; every event in a verifiable journal."""
    if log_format is not None:  # through the environment, so worker processes log alike
        os.environ["LEDGER_LOG_FORMAT"] = log_format
    from ledger.home import LedgerHome

    ctx.obj = Ctx(home=LedgerHome.resolve(ledger_path), debug=debug)


def main() -> None:
    cli(prog_name="ledger")
