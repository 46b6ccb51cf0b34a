"""``ledger plan``: tasks and repeats needed to detect a difference (evaluators/stats_plan.py)."""

from __future__ import annotations

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from cli.reading import Reader, unverified_option
from ledger.errors import UsageError
from ledger.journal.journal import Journal


@click.command("plan")
@click.option("--detect", type=click.FloatRange(0.001, 0.999, min_open=False), required=True,
              help="The difference in pass rate to detect (0.05: five points).")
@click.option("--agents", nargs=2, metavar="A B", default=None,
              help="The two agents of the earlier run whose variances and correlation to use.")
@click.option("--from", "from_run", metavar="RUN", default=None,
              help="Use the observed per-task variance and correlation of this earlier run.")
@click.option("--power", type=click.FloatRange(0.5, 0.999), default=0.8, show_default=True)
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True,
              help="Confidence level (the test's alpha is 1 - level).")
@json_option
@unverified_option
@pass_ctx
def plan_cmd(ctx: Ctx, detect: float, agents: tuple[str, str] | None, from_run: str | None,
             power: float, level: float, as_json: bool, unverified: bool) -> None:
    """Tasks and repeats needed to detect a pass-rate difference between two agents at the given
    power: from an earlier run's observed variances and correlation (--from), else from stated
    assumptions."""
    from cli.stats_render import plan_lines
    from evaluators.stats_plan import plan
    from evaluators.stats_view import stats_of

    stats = None
    if from_run is not None:
        reader = Reader(ctx.home, unverified=unverified)
        with Journal.open(ctx.home.journal_path, readonly=True) as j:
            run_id = j.resolve_run(from_run)
            stats = stats_of(reader.entries(j, run_id), run_id)
    elif agents:
        raise UsageError("--agents names agents of an earlier run: give it with --from RUN")
    try:
        p = plan(detect, stats=stats, agents=agents or (), power=power, level=level)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc
    if as_json:
        emit_json(p)
        return
    for line in plan_lines(p):
        click.echo(line)


def register(group: click.Group) -> None:
    group.add_command(plan_cmd)
