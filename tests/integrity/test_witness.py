"""Witness cosignatures (C2SP tlog-cosignature v1): byte-exact lines, round trip, forgeries."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from ledger.journal.note import (
    KEY_TYPE_COSIGNATURE_V1,
    SIGNATURE_PREFIX,
    Verifier,
    cosignature_line,
    key_id,
    open_note,
    parse_note,
)

HERE_VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "note-vectors.json"


def _vectors() -> dict[str, Any]:
    for p in (HERE_VECTORS, Path("/work/shared/vectors/note-vectors.json")):
        if p.exists():
            return json.loads(p.read_text())
    pytest.skip("note vectors not available")


def ledger(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], input=input)


def test_cosignature_line_is_byte_exact_with_the_vector() -> None:
    """The witness line for the vector's checkpoint, key and timestamp is the published one."""
    v = next(x for x in _vectors()["cosignature_vectors"] if x["id"] == "ledger-witness-cosig-size8")
    w = _vectors()["keys"]["ledger_witness"]
    text, _ = parse_note(v["note"])
    line = cosignature_line(text, w["name"], bytes.fromhex(w["seed_hex"]), v["expect_timestamp"])
    assert line == next(x for x in v["note"].splitlines(keepends=True) if x.startswith(SIGNATURE_PREFIX + w["name"]))
    blob = base64.b64decode(line.split()[-1])
    public = bytes.fromhex(w["public_key_hex"])
    assert blob[:4] == key_id(w["name"], KEY_TYPE_COSIGNATURE_V1, public).to_bytes(4, "big")
    assert int.from_bytes(blob[4:12], "big") == v["expect_timestamp"] and len(blob) == 4 + 8 + 64


def _setup(tmp_path: Path, n: int) -> tuple[Path, str, Path, str]:
    home = tmp_path / "L"
    assert ledger(home, "keys", "init", "--name", "example.org/witnessed").exit_code == 0
    lines = "".join(json.dumps({"kind": "ext.ev", "data": {"i": i}}) + "\n" for i in range(n))
    assert ledger(home, "append", "--batch", "-", input=lines).exit_code == 0
    note = tmp_path / "cp.note"
    note.write_text(ledger(home, "checkpoint").stdout)
    wdir = tmp_path / "witness"
    res = ledger(home, "witness", "init", "--name", "witness.example/w1", "--witness-dir", str(wdir), "--json")
    assert res.exit_code == 0, res.output
    return home, str(home / "keys" / "signing.vkey"), wdir, json.loads(res.stdout)["vkey"]


def test_witness_round_trip(tmp_path: Path) -> None:
    """init, cosign, checkpoint --add-cosignature, verify --witness; the next size needs a proof."""
    home, log_vkey, wdir, wvkey = _setup(tmp_path, 5)
    assert Verifier.from_vkey(wvkey).key_type == KEY_TYPE_COSIGNATURE_V1
    out = tmp_path / "cosigned.note"
    res = ledger(home, "witness", "cosign", str(tmp_path / "cp.note"), "--log-vkey", log_vkey,
                 "--witness-dir", str(wdir), "-o", str(out))
    assert res.exit_code == 0, res.output
    opened = open_note(out.read_text(), [Verifier.from_vkey(Path(log_vkey).read_text()), Verifier.from_vkey(wvkey)])
    assert len(opened.signed_by) == 2
    assert ledger(home, "verify", "--witness", wvkey).exit_code == 1  # not added yet
    assert ledger(home, "checkpoint", "--add-cosignature", str(out)).exit_code == 0
    res = ledger(home, "verify", "--witness", wvkey)
    assert res.exit_code == 0 and "1 of 1 cosigned" in res.stdout, res.output
    # the log grows: the witness needs a consistency proof from the size it cosigned
    assert ledger(home, "append", "ext.more", "--data", "{}").exit_code == 0
    (tmp_path / "cp2.note").write_text(ledger(home, "checkpoint").stdout)
    res = ledger(home, "witness", "cosign", str(tmp_path / "cp2.note"), "--log-vkey", log_vkey,
                 "--witness-dir", str(wdir))
    assert res.exit_code == 2 and "--proof" in res.stderr
    (tmp_path / "proof.json").write_text(ledger(home, "proof", "consistency", "5", "6", "--json").stdout)
    res = ledger(home, "witness", "cosign", str(tmp_path / "cp2.note"), "--log-vkey", log_vkey,
                 "--proof", str(tmp_path / "proof.json"), "--witness-dir", str(wdir), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert ledger(home, "checkpoint", "--add-cosignature", str(out)).exit_code == 0
    assert ledger(home, "verify", "--witness", wvkey, "--witness-threshold", "1").exit_code == 0


def test_forged_cosignature_is_rejected(tmp_path: Path) -> None:
    """A cosignature line under the witness's name and key ID but a wrong signature fails."""
    home, log_vkey, wdir, wvkey = _setup(tmp_path, 4)
    out = tmp_path / "cosigned.note"
    assert ledger(home, "witness", "cosign", str(tmp_path / "cp.note"), "--log-vkey", log_vkey,
                  "--witness-dir", str(wdir), "-o", str(out)).exit_code == 0
    note = out.read_text()
    head, last = note.rstrip("\n").rsplit("\n", 1)
    name, b64 = last[len(SIGNATURE_PREFIX):].split(" ")
    blob = bytearray(base64.b64decode(b64))
    blob[-1] ^= 1  # flip one bit of the Ed25519 signature
    forged = f"{head}\n{SIGNATURE_PREFIX}{name} {base64.b64encode(bytes(blob)).decode()}\n"
    (tmp_path / "forged.note").write_text(forged)
    assert ledger(home, "checkpoint", "--add-cosignature", str(tmp_path / "forged.note")).exit_code == 0
    res = ledger(home, "verify", "--witness", wvkey)
    assert res.exit_code == 1 and "witness-cosignature" in res.stderr, res.output


def test_witness_refuses_a_split_view(tmp_path: Path) -> None:
    """A second log with the same key and origin but another root at the same size is refused."""
    home, log_vkey, wdir, _ = _setup(tmp_path, 3)
    assert ledger(home, "witness", "cosign", str(tmp_path / "cp.note"), "--log-vkey", log_vkey,
                  "--witness-dir", str(wdir)).exit_code == 0
    other = tmp_path / "other"
    other.mkdir()
    shutil.copytree(home / "keys", other / "L" / "keys")
    lines = "".join(json.dumps({"kind": "ext.fork", "data": {"i": i}}) + "\n" for i in range(3))
    assert ledger(other / "L", "append", "--batch", "-", input=lines).exit_code == 0
    (tmp_path / "fork.note").write_text(ledger(other / "L", "checkpoint").stdout)
    res = ledger(home, "witness", "cosign", str(tmp_path / "fork.note"), "--log-vkey", log_vkey,
                 "--witness-dir", str(wdir))
    assert res.exit_code == 1 and "split view" in res.stderr
