"""Publishing commands: ``ledger publish DIR``, ``ledger serve DIR``, ``ledger monitor URL|DIR``
(docs/PUBLISHING.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from ledger.errors import MalformedInput, UsageError, VerificationError

MAX_INTERVAL = 3600.0


def _vkey(text: str) -> Any:
    from ledger.journal.note import Verifier

    p = Path(text)
    return Verifier.from_vkey(p.read_text(encoding="utf-8").strip() if p.is_file() else text)


@click.command()
@click.argument("directory", metavar="DIR")
@click.option("--public", "public", metavar="KINDS",
              help="Publish only entries of these kinds (comma-separated, globs allowed); withhold the rest.")
@click.option("--withhold", "withhold", metavar="KINDS",
              help="Withhold entries of these kinds (published as their leaf hash only).")
@click.option("--witness", "witness_urls", multiple=True, metavar="URL",
              help="A tlog-witness submission prefix to ask for a cosignature (repeatable, with --witness-vkey).")
@click.option("--witness-vkey", "witness_vkeys", multiple=True, metavar="VKEY",
              help="The key of each --witness, in the same order (vkey or file).")
@json_option
@pass_ctx
def publish(ctx: Ctx, directory: str, public: str | None, withhold: str | None, witness_urls: tuple[str, ...],
            witness_vkeys: tuple[str, ...], as_json: bool) -> None:
    """Write the journal as a static C2SP tlog-tiles directory (only what is new; checkpoint last)."""
    from ledger.journal.journal import Journal
    from ledger.journal.keys import load_keys
    from ledger.publish.writer import make_policy
    from ledger.publish.writer import publish as run_publish

    if len(witness_urls) != len(witness_vkeys):
        raise UsageError(f"{len(witness_urls)} --witness URL(s) but {len(witness_vkeys)} --witness-vkey(s): "
                         "give one key per witness")
    config = None
    if public is None and withhold is None and ctx.home.config_path.is_file():
        import tomllib

        try:
            config = tomllib.loads(ctx.home.config_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise MalformedInput(f"{ctx.home.config_path}: invalid TOML: {exc}") from None
    policy = make_policy(public, withhold, config)
    witnesses = [(u, _vkey(k)) for u, k in zip(witness_urls, witness_vkeys, strict=True)]
    keys = load_keys(ctx.home.keys_dir)
    with Journal.open(ctx.home.journal_path) as j:
        result = run_publish(j, Path(directory), keys, policy=policy, witnesses=witnesses)
    if as_json:
        emit_json(result.as_dict())
        return
    what = "up to date" if result.size == result.old_size and not result.written else \
        f"{result.old_size} -> {result.size} entries, {len(result.written)} file(s) written"
    extra = []
    if result.withheld:
        extra.append(f"{result.withheld} withheld")
    if result.large:
        extra.append(f"{result.large} large")
    if result.cosigned_by:
        extra.append("cosigned by " + ", ".join(result.cosigned_by))
    click.echo(f"published {result.origin} to {directory}: {what}" + (f" ({'; '.join(extra)})" if extra else ""))


@click.command()
@click.argument("directory", metavar="DIR")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--allow-remote", is_flag=True, help="Allow an address other than loopback.")
def serve(directory: str, host: str, port: int, allow_remote: bool) -> None:
    """Serve a published directory over HTTP with the tlog-tiles caching rules (Ctrl-C stops)."""
    from ledger.publish.http import serve_directory

    server = serve_directory(Path(directory), host, port, allow_remote=allow_remote,
                             access_log=lambda line: click.echo(line, err=True))
    click.echo(f"serving {directory} at {server.url}/", err=True)
    try:
        server.serve_forever()
    finally:
        server.httpd.server_close()


def _render(report: Any) -> None:
    r = report
    cos = f", cosigned by {', '.join(r.cosigned_by)}" if r.cosigned_by else ""
    since = "first check" if r.previous_size is None else f"was {r.previous_size}"
    click.echo(f"{r.origin}: {r.size} entries ({since}){cos}; root {r.root[:16]}…; "
               f"{r.withheld} withheld, {r.large} large")
    for run in r.new_runs:
        click.echo(f"new run {run['run']} (seq {run['seq']})")
    for v in r.new_views:
        score = "" if v.get("score") is None else f": score {v['score']}"
        click.echo(f"new view of run {v['run']} by {v['evaluator']} {v['version']} (seq {v['seq']}){score}")
    for rep in r.replayed:
        click.echo(f"replayed run {rep['run']} ({rep['evaluator']}): "
                   f"{'reproduced' if rep['reproduced'] else 'DOES NOT REPRODUCE'}")
    for nr in r.not_replayed:
        kinds = ", ".join(f"{k} x{n}" for k, n in nr["withheld_kinds"].items())
        click.echo(f"not replayed: run {nr['run']}: {nr['reason']} ({kinds})")
    for f in r.findings:
        click.echo(f"FAIL {f['check']}: {f['message']}")
    if r.ok:
        click.echo(f"OK: {r.entries} entries recomputed to the signed root")


@click.command()
@click.argument("source", metavar="URL|DIR")
@click.option("--vkey", required=True, help="The log's verifier key (string or file).")
@click.option("--witness", "witness_vkeys", multiple=True, metavar="VKEY",
              help="A witness whose cosignature counts (vkey or file; repeatable).")
@click.option("--witness-threshold", type=click.IntRange(min=1), default=None,
              help="How many --witness cosignatures are required (default: all).")
@click.option("--state", "state_dir", help="Where remembered checkpoints live (default: the one "
              "`ledger verify` uses, $XDG_CONFIG_HOME/eval-ledger/seen).")
@click.option("--no-remember", is_flag=True, help="Neither prove consistency with nor update the remembered checkpoint.")
@click.option("--follow", is_flag=True, help="Check again every --interval seconds until a check fails (Ctrl-C stops).")
@click.option("--interval", type=click.FloatRange(0.1, MAX_INTERVAL), default=30.0, show_default=True,
              help=f"Seconds between checks with --follow (0.1..{MAX_INTERVAL:.0f}).")
@click.option("--max-checks", type=click.IntRange(min=1), default=None,
              help="With --follow: stop after this many checks.")
@json_option
def monitor(source: str, vkey: str, witness_vkeys: tuple[str, ...], witness_threshold: int | None,
            state_dir: str | None, no_remember: bool, follow: bool, interval: float, max_checks: int | None,
            as_json: bool) -> None:
    """Follow a published log: verify it, recompute it, replay its views, report what is new.

    Exit 0 when every check holds, 1 when one fails (a log rewritten or rolled back, a tile or
    bundle that does not match, a view that does not replay, an injected entry), 2 for unusable input.
    """
    from ledger.publish.monitor import check_log, open_source

    verifier = _vkey(vkey)
    witnesses = [_vkey(w) for w in witness_vkeys]
    if witness_threshold is not None and witness_threshold > len(witnesses):
        raise UsageError(f"--witness-threshold {witness_threshold} is more than the {len(witnesses)} --witness key(s)")
    src = open_source(source)
    checks = 0
    prior = None
    while True:
        checks += 1
        try:
            report = check_log(src, verifier, witnesses=witnesses, threshold=witness_threshold or len(witnesses),
                               state_dir=Path(state_dir) if state_dir else None, remember=not no_remember,
                               prior=prior)
        except VerificationError as exc:
            if as_json:
                emit_json({"ok": False, "source": source, "error": {"check": exc.check, "message": str(exc)}})
            raise
        if as_json:
            emit_json(report.as_dict())
        else:
            _render(report)
        if not report.ok:
            first = report.findings[0]
            raise VerificationError(first["check"], first["message"], seq=first.get("seq"))
        if not follow or (max_checks is not None and checks >= max_checks):
            return
        prior = report.verified  # the next check reads only what the log adds
        time.sleep(interval)


def register(group: click.Group) -> None:
    group.add_command(publish)
    group.add_command(serve)
    group.add_command(monitor)
