"""The journal commands through click's CliRunner: exact shapes, exit codes, bad input."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal import merkle


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return tmp_path / "L"


def run(home: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    res = runner.invoke(cli, ["--ledger", str(home), *args], input=input)
    return res.exit_code, res.stdout, res.stderr


def populated(home: Path, n: int = 5) -> None:
    assert run(home, "keys", "init", "--name", "example.org/test-log")[0] == 0
    lines = "".join(json.dumps({"kind": "ext.ev", "data": {"i": i}, "run": "r-1"}) + "\n" for i in range(n))
    code, out, _ = run(home, "append", "--batch", "-", input=lines)
    assert code == 0, out


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_append_prints_seq_and_leaf_hash(home: Path) -> None:
    """`append` prints the new seq and the RFC 6962 leaf hash of the stored bytes."""
    code, out, _ = run(home, "append", "ext.note", "--run", "r", "--data", '{"x": 1}')
    assert code == 0
    seq, leaf = out.split()
    assert seq == "0"
    code, out, _ = run(home, "log", "--json", "--raw")
    row = json.loads(out.splitlines()[0])
    import base64
    raw = base64.b64decode(row["bytes"])
    assert leaf == hashlib.sha256(b"\x00" + raw).hexdigest() == row["leaf_hash"]
    assert set(row) == {"seq", "ts", "run", "task", "kind", "data", "leaf_hash", "bytes"}


@pytest.mark.parametrize("args, needle", [
    (["append", "k", "--data", "{not json"], "not valid JSON"),
    (["append", "k", "--data", "[1, 2]"], "expected a JSON object"),
    (["append", "k"], "--data"),
    (["append", "ext.k", "--data", '{"x": NaN}'], "NaN"),
])
def test_append_bad_input_exits_2_and_writes_nothing(home: Path, args: list[str], needle: str) -> None:
    """Malformed append input is one clear line, exit 2, and no entry."""
    code, _, err = run(home, *args)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    if (home / "journal.db").exists():
        assert run(home, "log", "--json")[1] == ""


def test_batch_with_bad_line_appends_none(home: Path) -> None:
    """A batch is all or nothing: one bad line leaves the journal untouched."""
    populated(home, 2)
    code, _, err = run(home, "append", "--batch", "-", input='{"kind":"ext.a","data":{}}\n{"kind":"ext.b"}\n')
    assert code == 2 and "line 2" not in err or "data" in err
    assert len(run(home, "log", "--json")[1].splitlines()) == 2


def test_checkpoint_json_and_note_file(home: Path) -> None:
    """`checkpoint --json` gives origin/size/root/note and writes checkpoints/<size>.note."""
    populated(home, 5)
    code, out, _ = run(home, "checkpoint", "--json")
    assert code == 0
    cp = json.loads(out)
    assert cp["origin"] == "example.org/test-log" and cp["size"] == 5
    assert (home / "checkpoints" / "5.note").read_text() == cp["note"]
    assert cp["note"].splitlines()[:2] == ["example.org/test-log", "5"]


def test_proofs_verify_with_the_merkle_verifier(home: Path) -> None:
    """Proof JSON from the CLI checks with an RFC 6962 verifier."""
    populated(home, 11)
    p = json.loads(run(home, "proof", "inclusion", "3", "--size", "9", "--json")[1])
    assert set(p) == {"leaf_index", "tree_size", "leaf_hash", "root", "hashes"}
    merkle.verify_inclusion(3, 9, bytes.fromhex(p["leaf_hash"]), [bytes.fromhex(h) for h in p["hashes"]],
                            bytes.fromhex(p["root"]))
    c = json.loads(run(home, "proof", "consistency", "4", "11", "--json")[1])
    merkle.verify_consistency(4, 11, bytes.fromhex(c["old_root"]), bytes.fromhex(c["new_root"]),
                              [bytes.fromhex(h) for h in c["hashes"]])
    assert run(home, "proof", "inclusion", "11", "--json")[0] == 2


def _flip_ts_byte(db_path: Path, seq: int) -> None:
    """Change one byte of an entry's timestamp in place (the triggers dropped first)."""
    db = sqlite3.connect(db_path)
    db.execute("DROP TRIGGER entries_no_update")
    body = bytearray(db.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()[0])
    body[-5] ^= 1  # inside the 8-byte ts value: the envelope still agrees with the span
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(body), seq))
    db.commit()
    db.close()


def test_verify_ok_then_tamper_exits_1_naming_check(home: Path, tmp_path: Path) -> None:
    """verify passes on an honest journal; a flipped byte fails naming the check and seq."""
    # With the default 16-hash tiles, entry 4 of 20 sits in a stored leaf tile (leaf-hash names
    # it); entry 18 is in the partial tail, where only the tree head over it notices (head-root).
    populated(home, 20)
    run(home, "checkpoint")
    code, out, _ = run(home, "verify", "--json")
    assert code == 0 and json.loads(out)["size"] == 20 and json.loads(out)["tiles"] == 1
    _flip_ts_byte(home / "journal.db", 4)
    code, _, err = run(home, "verify")
    assert code == 1
    assert "leaf-hash" in err and "seq=4" in err
    tail = tmp_path / "tail"
    populated(tail, 20)
    _flip_ts_byte(tail / "journal.db", 18)
    code, _, err = run(tail, "verify")
    assert code == 1
    assert "head-root" in err and "seq=19" in err


def test_verify_never_writes(home: Path) -> None:
    """verify leaves every file of the ledger byte-identical and creates no keys."""
    populated(home, 4)
    run(home, "checkpoint")
    before = snapshot(home)
    assert run(home, "verify")[0] == 0
    assert snapshot(home) == before
    other = home.parent / "nokeys"
    code, _, err = run(other, "verify")
    assert code == 2 and "no journal" in err
    assert not other.exists()


def test_since_detects_truncation(home: Path, tmp_path: Path) -> None:
    """A log cut back across a tile boundary verifies alone but fails --since with consistency."""
    populated(home, 14)
    run(home, "checkpoint")
    for n in range(4):  # 18 entries: the first 16-hash leaf tile is now full and stored
        run(home, "append", "ext.late", "--data", json.dumps({"n": n}))
    note = json.loads(run(home, "checkpoint", "--json")[1])["note"]
    kept = tmp_path / "kept.note"
    kept.write_text(note)
    db = sqlite3.connect(home / "journal.db")
    h = int(db.execute("SELECT value FROM meta WHERE key = 'tile_height'").fetchone()[0])
    assert db.execute("SELECT level, idx FROM tiles").fetchall() == [(0, 0)]
    assert db.execute("SELECT max(last) FROM spans WHERE first < 14").fetchone() == (13,)
    # the span ending at 13 closed the first append, so it carries the tree head of size 14
    assert db.execute("SELECT last + 1, typeof(root) FROM spans WHERE last = 13").fetchone() == (14, "blob")
    for t in ("entries", "spans", "runs", "tiles", "checkpoints"):
        db.execute(f"DROP TRIGGER {t}_no_delete")
    db.execute("DELETE FROM entries WHERE seq >= 14")
    db.execute("DELETE FROM spans WHERE first >= 14")  # the later tree heads go with their spans
    db.execute("DELETE FROM runs WHERE first >= 14")
    db.execute("DELETE FROM tiles WHERE ((idx + 1) << (? * (level + 1))) > 14", (h,))
    db.execute("DELETE FROM checkpoints WHERE size > 14")
    assert db.execute("SELECT count(*) FROM tiles").fetchone() == (0,)
    db.commit()
    db.close()
    (home / "checkpoints" / "18.note").unlink()
    assert run(home, "verify")[0] == 0  # the documented limit: no outside copy, no detection
    code, _, err = run(home, "verify", "--since", str(kept))
    assert code == 1 and "consistency" in err


def test_missing_keys_and_loose_permissions(home: Path) -> None:
    """checkpoint without keys points at `ledger keys init`; a 0644 secret key is refused."""
    run(home, "append", "ext.a", "--data", "{}")
    code, _, err = run(home, "checkpoint")
    assert code == 2 and "ledger keys init" in err
    assert run(home, "keys", "init")[0] == 0
    os.chmod(home / "keys" / "master.key", 0o644)
    code, _, err = run(home, "checkpoint")
    assert code == 2 and "master.key" in err


def test_not_a_journal(home: Path) -> None:
    """A file that is not a journal is exit 2 with one line, never a traceback."""
    home.mkdir(parents=True)
    (home / "journal.db").write_bytes(os.urandom(4096))
    code, _, err = run(home, "log")
    assert code == 2 and "not a journal" in err and "Traceback" not in err


def test_bundle_round_trip_and_tamper(home: Path, tmp_path: Path) -> None:
    """An exported bundle verifies with the vkey alone; a changed entry or a stale head fails."""
    populated(home, 7)
    out = tmp_path / "b.json"
    assert run(home, "export", "-o", str(out))[0] == 0
    vkey = run(home, "keys", "show", "--public")[1].strip()
    empty = tmp_path / "elsewhere"
    code, text, _ = run(empty, "verify", "--bundle", str(out), "--vkey", vkey)
    assert code == 0 and "7 entries" in text
    b = json.loads(out.read_text())
    import base64
    raw = bytearray(base64.b64decode(b["entries"][2]["bytes"]))
    raw[-1] ^= 1
    b["entries"][2]["bytes"] = base64.b64encode(bytes(raw)).decode()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(b))
    code, _, err = run(empty, "verify", "--bundle", str(bad), "--vkey", vkey)
    assert code == 1
    b = json.loads(out.read_text())
    b["entries"].pop()
    b["last_seq"] -= 1
    b["tree_size"] -= 1
    bad.write_text(json.dumps(b))
    code, _, err = run(empty, "verify", "--bundle", str(bad), "--vkey", vkey)
    assert code == 1 and "bundle-checkpoint" in err
    bad.write_text("{]")
    assert run(empty, "verify", "--bundle", str(bad), "--vkey", vkey)[0] == 2


def test_every_command_has_help_and_is_documented() -> None:
    """Every command has help text and appears in the README or docs."""
    docs = Path(__file__).resolve().parents[2]
    text = (docs / "README.md").read_text() + "".join(p.read_text() for p in (docs / "docs").glob("*.md"))
    for name, cmd in cli.all_commands().items():
        assert cmd.help, name
        assert f"ledger {name}" in text, f"`ledger {name}` is not documented"
