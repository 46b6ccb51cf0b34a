"""Journal commands: append, log, checkpoint, keys, proof, verify, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from ledger.errors import KeyMaterialError, MalformedInput, NotFound, UsageError
from ledger.journal.journal import Journal

if TYPE_CHECKING:  # keys and notes load cryptography: imported by the commands that sign or check
    from ledger.journal.note import Verifier
    from ledger.verify.steps import Verification


def open_journal(ctx: Ctx, *, create: bool = False, readonly: bool = False) -> Journal:
    return Journal.open(ctx.home.journal_path, create=create, readonly=readonly)


def resolve_verifier(ctx: Ctx, vkey: str | None) -> Verifier | None:
    """The verifier key from --vkey (a key string or a file holding one), else the ledger's own."""
    from ledger.journal.keys import load_verifier
    from ledger.journal.note import Verifier

    if vkey:
        p = Path(vkey)
        text = p.read_text(encoding="utf-8").strip() if p.is_file() else vkey
        return Verifier.from_vkey(text)
    try:
        return load_verifier(ctx.home.keys_dir)
    except KeyMaterialError:
        return None


def _parse_json_object(text: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError:
        raise MalformedInput(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise MalformedInput(f"{where}: expected a JSON object")
    return obj


@click.command()
@click.argument("kind", required=False)
@click.option("--run", "run_id", help="Run id to file the entry under.")
@click.option("--task", "task_id", help="Task id to file the entry under.")
@click.option("--data", "data_json", help="The entry's data, a JSON object.")
@click.option("--batch", "batch_file", type=click.File("r"), help="JSON lines {kind, data, run?, task?}; '-' for stdin.")
@json_option
@pass_ctx
def append(ctx: Ctx, kind: str | None, run_id: str | None, task_id: str | None,
           data_json: str | None, batch_file: Any, as_json: bool) -> None:
    """Append one entry (KIND --data JSON) or a batch (--batch FILE) to the journal."""
    if batch_file is not None:
        if kind or data_json:
            raise UsageError("use either KIND --data JSON or --batch FILE, not both")
        items = []
        for lineno, line in enumerate(batch_file, 1):
            if not line.strip():
                continue
            items.append(_parse_json_object(line, f"line {lineno}"))
        if not items:
            raise UsageError("the batch is empty")
    else:
        if not kind or data_json is None:
            raise UsageError("give KIND and --data JSON (or --batch FILE)")
        items = [{"kind": kind, "data": _parse_json_object(data_json, "--data"), "run": run_id,
                  "task": task_id}]
    with open_journal(ctx, create=True) as j:
        entries = j.append_many(items)
    if as_json:
        for e in entries:
            click.echo(json.dumps({"seq": e.seq, "leaf_hash": e.leaf_hash.hex()}))
    else:
        for e in entries:
            click.echo(f"{e.seq} {e.leaf_hash.hex()}")


@click.command()
@click.argument("run_arg", required=False, metavar="[RUN]")
@click.option("--run", "run_id", help="Only this run (id or unique prefix; the same as RUN).")
@click.option("--task", "task_id", help="Only this task.")
@click.option("--kind", help="Only this entry kind.")
@click.option("--raw", is_flag=True, help="With --json: add the stored entry bytes (base64).")
@json_option
@pass_ctx
def log(ctx: Ctx, run_arg: str | None, run_id: str | None, task_id: str | None, kind: str | None,
        raw: bool, as_json: bool) -> None:
    """Print the raw events of the journal (of RUN only, when given)."""
    if run_arg and run_id and run_arg != run_id:
        raise UsageError("name the run once: RUN or --run")
    run_id = run_arg or run_id
    with open_journal(ctx, readonly=True) as j:
        run = j.resolve_run(run_id) if run_id else None
        for e in j.entries(run=run, task=task_id, kind=kind):
            if as_json:
                click.echo(json.dumps(e.as_json(raw=raw), sort_keys=True, ensure_ascii=False))
            else:
                data = json.dumps(e.as_json()["data"], sort_keys=True, ensure_ascii=False)
                if len(data) > 160:
                    data = data[:157] + "..."
                click.echo(f"{e.seq:>6} {e.kind:<16} {e.run or '-'} {e.task or '-'} {data}")


@click.command()
@click.option("--add-cosignature", "cosigned_file", metavar="FILE",
              help="Keep a witness-cosigned note of one of this ledger's checkpoints "
                   "(<ledger>/cosigned/<size>.note; the log's signature is re-checked).")
@json_option
@pass_ctx
def checkpoint(ctx: Ctx, cosigned_file: str | None, as_json: bool) -> None:
    """Print the signed checkpoint of the current tree head (signing a new one if it grew)."""
    from ledger.journal.keys import load_keys, load_verifier

    if cosigned_file:
        text = _read_file(cosigned_file, "cosigned note").decode("utf-8", "replace")
        with open_journal(ctx) as j:
            size, merged = j.add_cosignature(text, load_verifier(ctx.home.keys_dir))
        if as_json:
            emit_json({"size": size, "note": merged})
        else:
            click.echo(f"kept the cosigned checkpoint of size {size} in "
                       f"{ctx.home.path / 'cosigned' / f'{size}.note'}")
        return
    keys = load_keys(ctx.home.keys_dir)
    with open_journal(ctx) as j:
        note = j.checkpoint(keys)
        size, root = j.head()
    if as_json:
        emit_json({"origin": keys.key_name, "size": size, "root": root.hex(), "note": note})
    else:
        click.echo(note, nl=False)


@click.group()
def keys() -> None:
    """Key material: the master secret and the Ed25519 checkpoint key."""


@keys.command("init")
@click.option("--name", help="Key name, also the checkpoint origin (default eval-ledger/<random>).")
@click.option("--force", is_flag=True, help="Replace existing keys (old checkpoints stop verifying with the new key).")
@json_option
@pass_ctx
def keys_init(ctx: Ctx, name: str | None, force: bool, as_json: bool) -> None:
    """Create the master secret and signing key under <ledger>/keys (mode 0600)."""
    from ledger.journal.keys import init_keys, new_key_name

    ring = init_keys(ctx.home.keys_dir, name=name or new_key_name(), force=force)
    if as_json:
        emit_json({"keys_dir": str(ctx.home.keys_dir), "name": ring.key_name, "vkey": ring.verifier.vkey})
    else:
        click.echo(f"created keys in {ctx.home.keys_dir}")
        click.echo(f"verifier key: {ring.verifier.vkey}")


@keys.command("show")
@click.option("--public", "public", is_flag=True, help="Print only the public key (C2SP vkey by default).")
@click.option("--format", "fmt", type=click.Choice(["vkey", "pem", "sslib"]), default="vkey",
              help="With --public: vkey (C2SP line), pem (SubjectPublicKeyInfo), sslib "
                   "(securesystemslib key JSON).")
@json_option
@pass_ctx
def keys_show(ctx: Ctx, public: bool, fmt: str, as_json: bool) -> None:
    """Show the key name and verifier key (never a secret)."""
    from attest.dsse import public_key_pem, public_key_sslib
    from ledger.journal.keys import load_verifier

    verifier = load_verifier(ctx.home.keys_dir)
    if fmt != "vkey" and not public:
        raise UsageError("--format applies to --public")
    if public and not as_json:
        if fmt == "pem":
            click.echo(public_key_pem(verifier.public_key), nl=False)
        elif fmt == "sslib":
            click.echo(json.dumps(public_key_sslib(verifier.public_key), sort_keys=True))
        else:
            click.echo(verifier.vkey)
        return
    info = {"name": verifier.name, "key_id": verifier.key_id_hex, "vkey": verifier.vkey,
            "pem": public_key_pem(verifier.public_key),
            "sslib": public_key_sslib(verifier.public_key),
            "keys_dir": str(ctx.home.keys_dir)}
    if as_json:
        emit_json(info)
    else:
        for k, v in info.items():
            click.echo(f"{k}: {v}")


@click.group()
def proof() -> None:
    """RFC 6962 proofs from the journal, as JSON."""


@proof.command("inclusion")
@click.argument("seq", type=int)
@click.option("--size", type=int, help="Tree size (default: current).")
@json_option
@pass_ctx
def proof_inclusion(ctx: Ctx, seq: int, size: int | None, as_json: bool) -> None:
    """Inclusion proof of entry SEQ in the tree of --size entries."""
    with open_journal(ctx, readonly=True) as j:
        p = j.inclusion_proof(seq, size)
    emit_json(p.as_json())


@proof.command("consistency")
@click.argument("old", type=int)
@click.argument("new", type=int, required=False)
@json_option
@pass_ctx
def proof_consistency(ctx: Ctx, old: int, new: int | None, as_json: bool) -> None:
    """Consistency proof between tree sizes OLD and NEW (default: current)."""
    with open_journal(ctx, readonly=True) as j:
        p = j.consistency_proof(old, new)
    emit_json(p.as_json())


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise NotFound(f"cannot read {what} {path}: {exc.strerror}") from exc


@click.command()
@click.argument("target", required=False, metavar="[HASH]")
@click.option("--since", "since_file", help="An older checkpoint file: prove the journal extends it.")
@click.option("--bundle", "bundle_file", help="Verify an exported bundle instead of the journal.")
@click.option("--vkey", help="Verifier key (string or file). Default: <ledger>/keys/signing.vkey.")
@click.option("--deep", is_flag=True, help="Also re-check the canonical encoding of every entry.")
@click.option("--no-remember", "no_remember", is_flag=True,
              help="Neither prove consistency with nor update the remembered checkpoint "
                   "($XDG_CONFIG_HOME/eval-ledger/seen/).")
@click.option("--witness", "witness_vkeys", multiple=True, metavar="VKEY",
              help="Require this witness's cosignature on the latest checkpoint (vkey or file; repeatable).")
@click.option("--witness-threshold", type=click.IntRange(min=1), default=None,
              help="How many of the --witness keys must have cosigned (default: all).")
@click.option("--dsse", "dsse_file", help="Verify an exported DSSE attestation file (needs --vkey).")
@json_option
@pass_ctx
def verify(ctx: Ctx, target: str | None, since_file: str | None, bundle_file: str | None,
           vkey: str | None, deep: bool, no_remember: bool, witness_vkeys: tuple[str, ...],
           witness_threshold: int | None, dsse_file: str | None, as_json: bool) -> None:
    """Audit offline: the whole journal, a bundle, or one run/entry/checkpoint/attestation (HASH).

    Writes nothing but the remembered checkpoint (--no-remember: not even that). Exit 0 when
    every check holds, 1 when one fails (named, with the first bad seq), 2 for unusable input.
    """
    from ledger.verify import Bundle, FindingsError, VerifyOptions
    from ledger.verify import verify as run_verify

    if dsse_file:
        _verify_dsse(dsse_file, vkey, as_json)
        return
    verifier = resolve_verifier(ctx, vkey)
    since = _read_file(since_file, "checkpoint").decode("utf-8", "replace") if since_file else None
    try:
        if bundle_file:
            if verifier is None:
                raise KeyMaterialError("--bundle needs --vkey (the publisher's verifier key)")
            from ledger.journal.bundle import load_bundle_bytes
            bundle = Bundle(load_bundle_bytes(_read_file(bundle_file, "bundle")))
            result = run_verify(bundle, verifier, VerifyOptions(target=target, since=since, deep=deep,
                                                                remember=not no_remember),
                                keys_dir=ctx.home.keys_dir)
        else:
            witnesses = tuple(_witness_verifier(v) for v in witness_vkeys)
            if witness_threshold is not None and witness_threshold > len(witnesses):
                raise UsageError(f"--witness-threshold {witness_threshold} is more than the "
                                 f"{len(witnesses)} --witness key(s) given")
            options = VerifyOptions(target=target, since=since, deep=deep, remember=not no_remember,
                                    witnesses=witnesses,
                                    witness_threshold=witness_threshold or len(witnesses))
            with open_journal(ctx, readonly=True) as j:
                result = run_verify(j, verifier, options, keys_dir=ctx.home.keys_dir)
    except FindingsError as exc:  # every step is shown, then the first finding is the error
        _render_verification(exc.verification, as_json)
        raise
    _render_verification(result, as_json)


def _render_verification(v: Verification, as_json: bool) -> None:
    from cli.verify_render import render_lines

    lines = render_lines(v)
    if as_json:
        emit_json({"ok": v.ok, **v.as_dict(), "lines": lines})
        return
    for line in lines:
        click.echo(line)
    if v.ok:
        click.echo("OK: " + v.summary)


def _witness_verifier(vkey: str) -> Verifier:
    from ledger.journal.note import Verifier

    p = Path(vkey)
    text = p.read_text(encoding="utf-8").strip() if p.is_file() else vkey
    return Verifier.from_vkey(text)


def public_key_arg(vkey: str) -> bytes:
    """The raw Ed25519 key of --vkey: a C2SP vkey, PEM or securesystemslib JSON (text or file)."""
    from attest.dsse import parse_public_key
    from ledger.journal.note import Verifier

    p = Path(vkey)
    text = p.read_text(encoding="utf-8") if p.is_file() else vkey
    raw = parse_public_key(text)
    return raw if raw is not None else Verifier.from_vkey(text.strip()).public_key


def _verify_dsse(dsse_file: str, vkey: str | None, as_json: bool) -> None:
    from attest.dsse import parse_envelope, verify_export

    if not vkey:
        raise KeyMaterialError("--dsse needs --vkey (the publisher's key: vkey, PEM or sslib JSON)")
    result = verify_export(parse_envelope(_read_file(dsse_file, "DSSE")), public_key_arg(vkey))
    if as_json:
        emit_json({"ok": True, **result.as_dict()})
        return
    for line in result.checks:
        click.echo(line)
    for name, digest in result.subjects:
        click.echo(f"subject {name} sha256:{digest}")
    click.echo(f"OK: DSSE envelope of {result.attempt} verifies ({result.verdict})")


@click.command()
@click.argument("run_args", nargs=-1, metavar="[RUN]...")
@click.option("--run", "run_opt", help="Run id or prefix (default: the whole log).")
@click.option("-o", "--output", "--out", "out", required=True, help="File to write.")
@click.option("--format", "fmt", type=click.Choice(["bundle", "inspect", "atif", "sqlite"]),
              default="bundle", show_default=True,
              help="bundle: the evidence bundle; inspect: an Inspect AI log (.eval) of the run; "
                   "atif: a folder of Harbor ATIF trajectories, one per attempt; "
                   "sqlite: an analysis database of the runs (docs/export-sqlite.md).")
@json_option
@pass_ctx
def export(ctx: Ctx, run_args: tuple[str, ...], run_opt: str | None, out: str, fmt: str,
           as_json: bool) -> None:
    """Write a self-contained evidence bundle that verifies elsewhere with the public key alone.

    With --format inspect, write the run as an Inspect AI log instead (one sample per attempt);
    with --format atif, a folder of ATIF trajectories (DIR/<trial>/agent/trajectory.json each);
    with --format sqlite, the runs (RUN..., default every run) as a SQLite database of tables.
    """
    if fmt == "sqlite":
        from cli.reading import Reader as _Reader
        from ledger.view.sqlite_export import export_sqlite

        sreader = _Reader(ctx.home, unverified=False)
        with open_journal(ctx) as j:
            prefixes = [*run_args, *([run_opt] if run_opt else [])]
            runs = ([j.resolve_run(p) for p in prefixes] if prefixes
                    else [r.run_id for r in j.runs()])
            info_s = export_sqlite(runs, lambda rid: sreader.entries(j, rid), Path(out),
                                   leaves=sreader.leaves.get)
        if as_json:
            emit_json(info_s)
        else:
            click.echo(f"wrote {out}: {len(runs)} run(s), "
                       + ", ".join(f"{n} {k}" for k, n in info_s["rows"].items()))
        return
    if len(run_args) > 1:
        raise UsageError("--format bundle, inspect and atif take one RUN")
    run_arg = run_args[0] if run_args else None
    from cli.output import output_file, output_folder, write_file
    from cli.reading import Reader
    from ledger.journal.bundle import export_bundle
    from ledger.journal.keys import load_keys

    if fmt == "atif":
        from ledger.view.write import write_atif

        folder = output_folder(out)
        info_a = write_atif(ctx.home.journal_path, run_arg or run_opt, folder,
                            read=Reader(ctx.home, unverified=False).entries)
        if as_json:
            emit_json(info_a)
        else:
            click.echo(f"wrote {out}: {info_a['trajectories']} ATIF trajectory file(s) of run "
                       f"{info_a['run']} ({info_a['schema_version']}, <trial>/agent/trajectory.json)")
        return
    out = str(output_file(out))
    reader = Reader(ctx.home, unverified=False)  # what is sent elsewhere is checked first
    if fmt == "inspect":
        from ledger.view.write import write_inspect

        info_i = write_inspect(ctx.home.journal_path, run_arg or run_opt, Path(out),
                               read=reader.entries)
        if as_json:
            emit_json(info_i)
        else:
            click.echo(f"wrote {out}: {info_i['samples']} sample(s) of run {info_i['run']} "
                       "(Inspect AI log; `inspect view` opens it)")
        return

    keys_ring = load_keys(ctx.home.keys_dir)
    with open_journal(ctx) as j:
        prefix = run_arg or run_opt
        run = j.resolve_run(prefix) if prefix else None
        if run is None:
            j.verify(verifier=keys_ring.verifier)
        else:
            reader.entries(j, run)
        bundle = export_bundle(j, keys_ring, run=run)
    write_file(Path(out), (json.dumps(bundle, sort_keys=True) + "\n").encode("utf-8"))
    info = {"out": out, "run": bundle["run"], "entries": len(bundle["entries"]),
            "tree_size": bundle["tree_size"], "root": bundle["root"], "vkey": keys_ring.verifier.vkey}
    if as_json:
        emit_json(info)
    else:
        click.echo(f"wrote {out}: {info['entries']} entries, tree size {info['tree_size']}")
        click.echo(f"verify elsewhere with: ledger verify --bundle {out} --vkey '{info['vkey']}'")


def register(group: click.Group) -> None:
    for cmd in (append, log, checkpoint, keys, proof, verify, export):
        group.add_command(cmd)

