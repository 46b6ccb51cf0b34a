"""``ledger attest show HASH``: one clean-run attestation, as the journal holds it.

HASH is an attestation hash (or a unique prefix of one, at least 6 hex digits) or an attempt id
(``RUN/TASK/AGENT/REPEAT/TRY``). Showing checks nothing: ``ledger verify HASH`` does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from cli.output import output_file, output_folder, write_file
from ledger.errors import MalformedInput, NotFound, UsageError
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal

MIN_PREFIX = 6
_HEX = re.compile(r"[0-9a-f]+")


def find_attestation(journal: Journal, target: str) -> Entry:
    """The ``attestation`` entry that ``target`` names (hash, unique hash prefix, attempt id).

    An attempt id resolves to the attempt's first attestation, the one the run's structure counts
    (evaluators/structure.py); a later one was appended by someone else.
    """
    wanted = target.strip()
    if not wanted:
        raise UsageError("name an attestation: its hash (or a prefix) or an attempt id")
    by_attempt = "/" in wanted
    if not by_attempt:
        wanted = wanted.lower()
        if not _HEX.fullmatch(wanted) or len(wanted) > 64:
            raise UsageError(f"{target!r} is neither an attestation hash nor an attempt id")
        if len(wanted) < MIN_PREFIX:
            raise UsageError(f"an attestation hash prefix needs at least {MIN_PREFIX} hex digits")
    found: list[Entry] = []
    for e in journal.entries(kind="attestation"):
        if by_attempt:
            if e.data.get("attempt") == wanted and not found:
                found = [e]  # the first: the run writes one attestation per attempt
        elif str(e.data.get("hash", "")).lower().startswith(wanted):
            found.append(e)
    hashes = {str(e.data.get("hash")) for e in found}
    if not found:
        what = "attempt" if by_attempt else "hash"
        raise NotFound(f"no attestation with {what} {target!r}; `ledger run --json` lists them")
    if len(hashes) > 1:
        raise NotFound(f"attestation prefix {target!r} is ambiguous: "
                       + ", ".join(sorted(h[:16] for h in hashes)[:5]))
    return found[-1]


def attestation_view(entry: Entry) -> dict[str, Any]:
    """What ``attest show`` prints: the summary of the stored attestation and where it is."""
    from ledger.verify.attestations import show_attestation

    att = entry.data.get("attestation")
    if not isinstance(att, dict):
        raise MalformedInput(f"entry {entry.seq} holds no attestation map")
    view = show_attestation(att)
    view["seq"] = entry.seq
    view["recorded_hash"] = entry.data.get("hash")
    view["scope"] = att.get("scope")
    view["matches"] = [
        {k: m.get(k) for k in ("seq", "class", "kind", "detail", "digests", "digest_count")}
        for m in att.get("matches") or []
    ]
    return view


def render(view: dict[str, Any]) -> list[str]:
    act = view.get("activity") or {}
    kinds = ", ".join(f"{k} {v}" for k, v in sorted((act.get("kinds") or {}).items())) or "none"
    obs = view.get("observation") or {}
    cp = view.get("checkpoint") or {}
    commitment = view.get("commitment") or {}
    rng = view.get("range") or {}
    count = view.get("match_count") or 0
    lines = [
        f"attestation {view['hash']}",
        f"  verdict      {view.get('verdict')}" + (f" ({count} match{'es' if count != 1 else ''})"
                                                   if count else ""),
        f"  attempt      {view.get('attempt')}",
        f"  run / task   {view.get('run')} / {view.get('task')}",
        f"  commitment   seq {commitment.get('seq')}, digest {str(commitment.get('digest'))[:16]}...",
        f"  range        seq {rng.get('first_seq')}..{rng.get('last_seq')}",
        f"  checkpoint   tree size {cp.get('size')}, root {str(cp.get('root'))[:16]}...",
        f"  activity     {act.get('count')} entries ({kinds})",
        f"  observation  trace {obs.get('trace')}, transcript {'yes' if obs.get('transcript') else 'no'}"
        + ("" if obs.get("agent_started") else ", the agent never started"),
        f"  echoes       {view.get('echoes')}; answer digests {view.get('answer_digests')}",
        f"  recorded at  seq {view['seq']}",
    ]
    if view.get("injected"):
        lines.append("  WARNING: injected: the run's structure does not place this attestation (not the "
                     "attempt's first, or outside its span); every view ignores it")
    if view.get("recorded_hash") != view["hash"]:
        lines.append("  WARNING: the entry's hash field is not the hash of its attestation "
                     "(`ledger verify` will fail)")
    if view["matches"]:
        lines.append("  matches:")
        for m in view["matches"]:
            detail = f"  {m['detail']}" if m.get("detail") else ""
            lines.append(f"    seq {m['seq']:<6} {m['class']:<11} {m['kind']:<12}"
                         f" {m.get('digest_count') or 0} digest(s){detail}")
        if count > len(view["matches"]):
            lines.append(f"    ... {count - len(view['matches'])} more (counted in matches_digest)")
    refused = view.get("refused") or {}
    if refused.get("count"):
        lines.append(f"  refused      {refused['count']} request(s) the proxy refused (findings; the "
                     "verdict does not count them):")
        for item in refused.get("items") or []:
            lines.append(f"    seq {item.get('seq'):<6} {item.get('detail')}")
        if refused["count"] > len(refused.get("items") or []):
            lines.append(f"    ... {refused['count'] - len(refused.get('items') or [])} more "
                         "(counted in the refused digest)")
    lines.append(f"check it: ledger verify {view['hash']}")
    return lines


@click.group("attest")
def attest_group() -> None:
    """Clean-run attestations (one per attempt, written by `ledger run`)."""


@attest_group.command("show")
@click.argument("target", metavar="HASH")
@click.option("--dsse", is_flag=True,
              help="Print the DSSE envelope (in-toto Statement v1) instead of a summary.")
@json_option
@pass_ctx
def show(ctx: Ctx, target: str, dsse: bool, as_json: bool) -> None:
    """Show one attestation: HASH (or a unique prefix) or an attempt id."""
    if not ctx.home.journal_path.exists():
        raise NotFound(f"no journal at {ctx.home.journal_path}: run `ledger run` first")
    from evaluators.structure import trusted

    with Journal.open(ctx.home.journal_path, readonly=True) as journal:
        entry = find_attestation(journal, target)
        injected = {f.seq for f in trusted(list(journal.entries(run=entry.run)), entry.run).findings}
    if dsse:
        from attest.attestation import to_dsse

        emit_json(to_dsse(entry.data["attestation"]))
        return
    view = attestation_view(entry)
    view["injected"] = entry.seq in injected
    if as_json:
        emit_json(view)
        return
    for line in render(view):
        click.echo(line)


def _safe_name(attempt: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", attempt).strip("_") or "attestation"


@attest_group.command("export")
@click.argument("target", required=False, metavar="HASH")
@click.option("--dsse", is_flag=True,
              help="Write DSSE envelopes (in-toto Statement v1) signed with the ledger's key: the "
                   "only format, and the default.")
@click.option("--all", "all_run", metavar="RUN",
              help="Export every attestation of RUN (a run id or prefix); -o is then a folder.")
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="The envelope file (with --all: the folder for one file per attempt).")
@click.option("--bundle", "bundle_file", type=click.Path(dir_okay=False, path_type=Path),
              help="An exported bundle of the run: its SHA-256 joins the Statement's subjects.")
@json_option
@pass_ctx
def export(ctx: Ctx, target: str | None, dsse: bool, all_run: str | None, output: Path,
           bundle_file: Path | None, as_json: bool) -> None:
    """Export attestations as DSSE files any DSSE verifier checks (securesystemslib, in-toto).

    The subjects are digests you can recompute: the attempt's diff, the task folder, the bundle.
    """
    from ledger.view.dsse_export import export_envelopes

    if (target is None) == (all_run is None):
        raise UsageError("name one attestation (HASH) or use --all RUN")
    output = output_folder(output) if all_run is not None else output_file(output)
    if not ctx.home.journal_path.exists():
        raise NotFound(f"no journal at {ctx.home.journal_path}: run `ledger run` first")
    with Journal.open(ctx.home.journal_path, readonly=True) as journal:
        entries = ([find_attestation(journal, target)] if target is not None
                   else list(journal.entries(run=journal.resolve_run(all_run), kind="attestation")))
        if not entries:
            raise NotFound(f"run {all_run} has no attestations")
        written = export_envelopes(journal, entries, ctx.home.keys_dir, bundle_file=bundle_file)
    files = []
    if all_run is not None:
        output.mkdir(parents=True, exist_ok=True)
    for attempt, envelope in written:
        path = output / f"{_safe_name(attempt)}.dsse.json" if all_run is not None else output
        write_file(path, (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        files.append({"attempt": attempt, "path": str(path)})
    if as_json:
        emit_json({"files": files})
        return
    for f in files:
        click.echo(f"wrote {f['path']} ({f['attempt']})")
    click.echo("verify: ledger verify --dsse FILE --vkey \"$(ledger keys show --public)\"")


def register(group: click.Group) -> None:
    group.add_command(attest_group)
