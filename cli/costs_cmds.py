"""``ledger costs``: the price table used to estimate an attempt's cost from its tokens."""

from __future__ import annotations

from pathlib import Path

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from ledger.agents.costs import PRICES_AS_OF, pricing_rows, resolve_pricing


@click.command()
@click.option("--pricing", "pricing_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A pricing file (TOML or JSON) that overrides the built-in table "
                   "(default: <ledger>/pricing.toml or pricing.json when present).")
@json_option
@pass_ctx
def costs(ctx: Ctx, pricing_file: Path | None, as_json: bool) -> None:
    """Print the price table ($ per million tokens) used to estimate costs."""
    table, user_file = resolve_pricing(ctx.home.path, pricing_file)
    rows = pricing_rows(table)
    if as_json:
        emit_json({"as_of": PRICES_AS_OF, "user_file": str(user_file) if user_file else None,
                   "models": rows})
        return
    width = max(len(r["model"]) for r in rows)
    click.echo(f"{'model':<{width}}  {'$/Mtok in':>10}  {'$/Mtok out':>10}  source")
    for r in rows:
        click.echo(f"{r['model']:<{width}}  {r['input_per_mtok']:>10.3f}  "
                   f"{r['output_per_mtok']:>10.3f}  {r['source']}")
    click.echo(f"built-in prices are approximate list prices as of {PRICES_AS_OF}; "
               "a cost an agent reports itself is used as reported")


def register(group: click.Group) -> None:
    group.add_command(costs)
