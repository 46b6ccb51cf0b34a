"""``ledger view``: one self-contained HTML report of one or more runs (or served on 127.0.0.1)."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from cli.reading import Reader, unverified_option
from ledger.errors import LedgerError, NotFound, UsageError

DEFAULT_PORT = 8765


class NoBrowser(LedgerError):
    """``--open`` found no browser to start (exit 1: the page is written, what was asked is not done)."""

    exit_code = 1
REFRESH_S = 5


def _need_journal(ctx: Ctx) -> None:
    if not ctx.home.journal_path.exists():
        raise NotFound(f"no journal at {ctx.home.journal_path}: run `ledger run` first")


@click.command("view")
@click.argument("runs", nargs=-1, metavar="[RUN ...]")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path),
              help="Write the page here (default report.html).")
@click.option("--open", "open_browser", is_flag=True, help="Open the written page in a browser.")
@click.option("--serve", is_flag=True,
              help="Serve the page on 127.0.0.1 instead; it refreshes while a run is in progress.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port for --serve (0 picks a free one).")
@json_option
@unverified_option
@pass_ctx
def view_cmd(ctx: Ctx, runs: tuple[str, ...], output: Path | None, open_browser: bool,
             serve: bool, port: int, as_json: bool, unverified: bool) -> None:
    """Write one self-contained HTML report (no network) of RUN (default: the latest run).

    Several runs are shown side by side; with two, a paired comparison of their common tasks.
    """
    _need_journal(ctx)
    if serve:
        if output is not None or open_browser:
            raise UsageError("--serve writes no file: leave out -o and --open")
        from ledger.view.serve import serve_reports

        def reading() -> tuple[Any, Any]:
            reader = Reader(ctx.home, unverified=unverified)
            return reader.entries, lambda: (reader.reading.verified, reader.reading.line())

        serve_reports(ctx.home.journal_path, list(runs), port=port, refresh_s=REFRESH_S,
                      ready=lambda url: click.echo(f"serving {url} (Ctrl-C stops)", err=True),
                      reading=reading)
        return
    from cli.output import output_file
    from ledger.view.write import write_report

    target = output_file(output or Path("report.html"))
    reader = Reader(ctx.home, unverified=unverified)
    result = write_report(ctx.home.journal_path, list(runs), target,
                          read=reader.entries,
                          verification=lambda: (reader.reading.verified, reader.reading.line()))
    if as_json:
        emit_json({**result, "verification": reader.reading.as_dict()})
    else:
        click.echo(f"wrote {result['path']} ({result['size_bytes']} bytes, "
                   f"{result['attempts']} attempt(s) of {len(result['runs'])} run(s))")
        click.echo(f"wrote {result['comparison']} (the comparison page: who passed what)")
        click.echo(reader.reading.line())
    if open_browser and not webbrowser.open(Path(result["path"]).resolve().as_uri()):
        raise NoBrowser(f"--open: no browser could be started here; the page is written at "
                        f"{result['path']}")


def register(group: click.Group) -> None:
    group.add_command(view_cmd)
