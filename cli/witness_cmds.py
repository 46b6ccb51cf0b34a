"""Witness commands: a witness key of one's own, and cosignatures of checked checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cli.main import Ctx, emit_json, json_option, pass_ctx
from ledger.errors import MalformedInput, NotFound
from ledger.journal.note import Verifier


def _folder(witness_dir: str | None) -> Path:
    from ledger.journal.witness import witness_dir as default

    return Path(witness_dir) if witness_dir else default()


def _text(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise NotFound(f"cannot read {what} {path}: {exc.strerror}") from exc


@click.group()
def witness() -> None:
    """A witness: cosign checkpoints (C2SP tlog-cosignature) after checking their consistency."""


@witness.command("init")
@click.option("--name", default="eval-ledger/witness", show_default=True, help="The witness's key name.")
@click.option("--witness-dir", help="Where the witness key lives (default $XDG_CONFIG_HOME/eval-ledger/witness).")
@json_option
def witness_init(name: str, witness_dir: str | None, as_json: bool) -> None:
    """Create the witness's Ed25519 key and print its verifier key (type 0x04 vkey)."""
    from ledger.journal.witness import init_witness

    w = init_witness(_folder(witness_dir), name)
    if as_json:
        emit_json({"vkey": w.verifier.vkey})
    else:
        click.echo(w.verifier.vkey)


@witness.command("cosign")
@click.argument("note_file")
@click.option("--log-vkey", required=True, help="The log's verifier key (string or file).")
@click.option("--proof", "proof_file", help="`ledger proof consistency OLD NEW --json` output, from the "
              "size this witness cosigned last.")
@click.option("--out", "-o", "out", help="Write the cosigned note here (default: stdout).")
@click.option("--witness-dir", help="Where the witness key lives (default $XDG_CONFIG_HOME/eval-ledger/witness).")
@json_option
@pass_ctx
def witness_cosign(ctx: Ctx, note_file: str, log_vkey: str, proof_file: str | None, out: str | None,
                   witness_dir: str | None, as_json: bool) -> None:
    """Check a checkpoint (log signature, consistency with the last one cosigned) and cosign it."""
    from ledger.journal.witness import cosign, load_witness

    p = Path(log_vkey)
    verifier = Verifier.from_vkey(p.read_text(encoding="utf-8").strip() if p.is_file() else log_vkey)
    proof: Any = None
    if proof_file:
        try:
            proof = json.loads(_text(proof_file, "proof"))
        except json.JSONDecodeError as exc:
            raise MalformedInput(f"{proof_file}: not JSON ({exc.msg})") from exc
        except RecursionError:
            raise MalformedInput(f"{proof_file}: not JSON (nested too deeply)") from None
    note, cp = cosign(load_witness(_folder(witness_dir)), _text(note_file, "checkpoint note"),
                      verifier, proof=proof)
    if out:
        Path(out).write_text(note, encoding="utf-8")
    if as_json:
        emit_json({"origin": cp.origin, "size": cp.size, "root": cp.root.hex(), "note": note,
                   "out": out})
    elif out:
        click.echo(f"cosigned {cp.origin} at size {cp.size}: wrote {out}", err=True)
    else:
        click.echo(note, nl=False)


@witness.command("serve")
@click.option("--log-vkey", "log_vkeys", multiple=True, required=True, metavar="VKEY",
              help="A log this witness witnesses: its verifier key (string or file; repeatable). The key's "
                   "name is the log's origin.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8081, show_default=True, type=click.IntRange(0, 65535))
@click.option("--allow-remote", is_flag=True, help="Allow an address other than loopback.")
@click.option("--witness-dir", help="Where the witness key lives (default $XDG_CONFIG_HOME/eval-ledger/witness).")
def witness_serve(log_vkeys: tuple[str, ...], host: str, port: int, allow_remote: bool,
                  witness_dir: str | None) -> None:
    """Serve C2SP tlog-witness: POST /add-checkpoint cosigns consistent checkpoints (Ctrl-C stops)."""
    from ledger.journal.witness import load_witness
    from ledger.publish.http import serve_witness

    logs: dict[str, list[Verifier]] = {}
    for text in log_vkeys:
        p = Path(text)
        v = Verifier.from_vkey(p.read_text(encoding="utf-8").strip() if p.is_file() else text)
        logs.setdefault(v.name, []).append(v)
    w = load_witness(_folder(witness_dir))
    server = serve_witness(w, logs, host, port, allow_remote=allow_remote,
                           access_log=lambda line: click.echo(line, err=True))
    click.echo(f"witness {w.verifier.vkey} for {', '.join(sorted(logs))} at {server.url}/add-checkpoint", err=True)
    try:
        server.serve_forever()
    finally:
        server.httpd.server_close()


def register(group: click.Group) -> None:
    group.add_command(witness)
