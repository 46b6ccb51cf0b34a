"""DSSE export (`ledger attest export --dsse`), `ledger verify --dsse`, and public key formats."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def run_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real mini run: oracle (passes, DIRTY by construction) and noop (fails) on fix-add."""
    home = make_ledger(tmp_path_factory.mktemp("dsse"), tasks=("fix-add",))
    code, out, err = invoke(home, "run", "--trace", "none", "--json", "--tier", "mini",
                            "--agent", "oracle", "--agent", "noop")
    assert code in (0, 1), err
    return home, json.loads(out)["run"]


def _attempt(run: str, agent: str) -> str:
    return f"{run}/fix-add/{agent}/1/1"


def _export(home: Path, target: str, out: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    code, _, err = invoke(home, "attest", "export", target, "--dsse", "-o", str(out), *extra)
    assert code == 0, err
    return json.loads(out.read_text(encoding="utf-8"))


def _statement(env: dict) -> dict:  # type: ignore[type-arg]
    return json.loads(base64.b64decode(env["payload"]))


def test_subjects_are_digests_outsiders_can_recompute(run_home: tuple[Path, str],
                                                      tmp_path: Path) -> None:
    """Subjects: activity digest, sha256 of the patch text, the task folder hash, the bundle file."""
    home, run = run_home
    bundle = tmp_path / "run.bundle"
    assert invoke(home, "export", run, "-o", str(bundle))[0] == 0
    env = _export(home, _attempt(run, "oracle"), tmp_path / "a.json", "--bundle", str(bundle))
    subjects = {s["name"]: s["digest"]["sha256"] for s in _statement(env)["subject"]}
    with Journal.open(home / "journal.db", readonly=True) as j:
        diff = next(e for e in j.entries(run=run, kind="diff")
                    if e.data["attempt"] == _attempt(run, "oracle"))
        started = next(j.entries(run=run, kind="run.started"))
    assert subjects[f"diff/{_attempt(run, 'oracle')}"] == hashlib.sha256(
        diff.data["patch"].encode("utf-8")).hexdigest()
    assert diff.data["patch"]  # the oracle changed something
    assert subjects["task/fix-add"] == started.data["tasks"][0]["hash"]
    assert subjects["bundle/run.bundle"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert f"eval-ledger/attempt/{_attempt(run, 'oracle')}" in subjects


@pytest.mark.parametrize("fmt", ["vkey", "pem", "sslib"])
def test_verify_dsse_accepts_every_key_format(run_home: tuple[Path, str], tmp_path: Path,
                                              fmt: str) -> None:
    """`ledger verify --dsse FILE --vkey KEY` exits 0 with the key as vkey, PEM or sslib JSON."""
    home, run = run_home
    out = tmp_path / "a.json"
    _export(home, _attempt(run, "noop"), out)
    code, key, _ = invoke(home, "keys", "show", "--public", "--format", fmt)
    assert code == 0
    keyfile = tmp_path / f"key.{fmt}"
    keyfile.write_text(key, encoding="utf-8")
    elsewhere = tmp_path / "no-ledger-here"  # an outsider: the file and the key, no journal
    code, stdout, err = invoke(elsewhere, "verify", "--dsse", str(out), "--vkey", str(keyfile))
    assert code == 0, err
    assert "OK: DSSE envelope" in stdout and not elsewhere.exists()


# One tamper case per field of the envelope; each must be refused with exit 1.
def _flip_payload(env: dict) -> None:  # type: ignore[type-arg]
    raw = bytearray(base64.b64decode(env["payload"]))
    raw[len(raw) // 2] ^= 0x01
    env["payload"] = base64.b64encode(bytes(raw)).decode()


def _flip_sig(env: dict) -> None:  # type: ignore[type-arg]
    raw = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    raw[0] ^= 0x01
    env["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()


def _other_type(env: dict) -> None:  # type: ignore[type-arg]
    env["payloadType"] = "application/json"


def _verdict_clean(env: dict) -> None:  # type: ignore[type-arg]
    env["payload"] = base64.b64encode(base64.b64decode(env["payload"]).replace(
        b'"verdict":"DIRTY"', b'"verdict":"CLEAN"')).decode()


TAMPER = {"flipped-payload-bit": _flip_payload, "flipped-signature-bit": _flip_sig,
          "payload-type-changed": _other_type, "verdict-rewritten-clean": _verdict_clean}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_tampered_envelope_is_rejected(run_home: tuple[Path, str], tmp_path: Path,
                                       case: str) -> None:
    """A changed byte anywhere the signature covers makes `verify --dsse` exit 1."""
    home, run = run_home
    out = tmp_path / "a.json"
    env = _export(home, _attempt(run, "oracle"), out)
    TAMPER[case](env)
    out.write_text(json.dumps(env), encoding="utf-8")
    vkey = invoke(home, "keys", "show", "--public")[1].strip()
    code, _, err = invoke(home, "verify", "--dsse", str(out), "--vkey", vkey)
    assert code == 1 and err.startswith("error:"), (case, code, err)


def test_securesystemslib_verifies_the_export_and_rejects_a_flipped_byte(
        run_home: tuple[Path, str], tmp_path: Path) -> None:
    """securesystemslib's Envelope.verify accepts the envelope with the sslib key; one flipped bit fails."""
    pytest.importorskip("securesystemslib", reason="securesystemslib is in the test extra")
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError as SslibVerificationError
    from securesystemslib.signer import SSlibKey

    home, run = run_home
    env = _export(home, _attempt(run, "oracle"), tmp_path / "a.json")
    key_json = json.loads(invoke(home, "keys", "show", "--public", "--format", "sslib")[1])
    key = SSlibKey.from_dict(key_json.pop("keyid"), key_json)
    accepted = Envelope.from_dict(copy.deepcopy(env)).verify([key], 1)  # from_dict consumes
    assert key.keyid in accepted
    _flip_payload(env)
    with pytest.raises(SslibVerificationError):
        Envelope.from_dict(env).verify([key], 1)


def test_export_all_writes_one_file_per_attempt(run_home: tuple[Path, str], tmp_path: Path) -> None:
    """--all RUN writes one verifiable envelope per attestation into the -o folder."""
    home, run = run_home
    code, stdout, _ = invoke(home, "attest", "export", "--all", run, "--dsse",
                             "-o", str(tmp_path / "out"), "--json")
    assert code == 0
    files = json.loads(stdout)["files"]
    assert sorted(f["attempt"] for f in files) == sorted(
        [_attempt(run, "oracle"), _attempt(run, "noop")])
    vkey = invoke(home, "keys", "show", "--public")[1].strip()
    for f in files:
        assert invoke(home, "verify", "--dsse", f["path"], "--vkey", vkey)[0] == 0


def test_export_needs_exactly_one_target(run_home: tuple[Path, str], tmp_path: Path) -> None:
    """Neither HASH nor --all (or both) is a usage error (exit 2)."""
    home, run = run_home
    assert invoke(home, "attest", "export", "--dsse", "-o", str(tmp_path / "x"))[0] == 2
    assert invoke(home, "attest", "export", "abcdef", "--all", run, "--dsse",
                  "-o", str(tmp_path / "x"))[0] == 2


def test_verify_dsse_needs_a_key(run_home: tuple[Path, str], tmp_path: Path) -> None:
    """--dsse without --vkey is an input error (exit 2), never a silent pass."""
    home, run = run_home
    out = tmp_path / "a.json"
    _export(home, _attempt(run, "noop"), out)
    code, _, err = invoke(home, "verify", "--dsse", str(out))
    assert code == 2 and "--vkey" in err


def test_pem_and_sslib_name_the_same_key_as_vkey(run_home: tuple[Path, str]) -> None:
    """The three formats carry the same 32 raw bytes."""
    from attest.dsse import parse_public_key
    from ledger.journal.note import Verifier

    home, _ = run_home
    raw = Verifier.from_vkey(invoke(home, "keys", "show", "--public")[1].strip()).public_key
    assert parse_public_key(invoke(home, "keys", "show", "--public", "--format", "pem")[1]) == raw
    assert parse_public_key(invoke(home, "keys", "show", "--public", "--format", "sslib")[1]) == raw
