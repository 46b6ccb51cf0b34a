"""Remembered checkpoints: a rewritten or truncated history is caught without --since."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from cli.main import cli
from ledger.journal.seen import seen_dir


def ledger(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], input=input)


def build(home: Path, n: int, tag: str) -> None:
    """A journal of n ext entries signed by the keys in ``home/keys`` (made when missing)."""
    if not (home / "keys").exists():
        assert ledger(home, "keys", "init", "--name", "example.org/remembered").exit_code == 0
    lines = "".join(json.dumps({"kind": "ext.ev", "data": {"i": i, "tag": tag}}) + "\n" for i in range(n))
    assert ledger(home, "append", "--batch", "-", input=lines).exit_code == 0
    assert ledger(home, "checkpoint").exit_code == 0


def rebuild(home: Path, n: int, tag: str) -> None:
    """The attacker's move: a new database (and checkpoint folder) signed with the key beside it."""
    (home / "journal.db").unlink()
    for p in home.glob("journal.db-*"):
        p.unlink()
    shutil.rmtree(home / "checkpoints")
    build(home, n, tag)


def test_first_verify_remembers_outside_the_ledger(tmp_path: Path) -> None:
    """The first verify stores the checkpoint under $XDG_CONFIG_HOME/eval-ledger/seen (0600)."""
    home = tmp_path / "L"
    build(home, 5, "a")
    res = ledger(home, "verify")
    assert res.exit_code == 0 and "first verify" in res.stdout and "remembering size 5" in res.stdout
    [note] = list(seen_dir().glob("*.note"))
    assert str(seen_dir()).startswith(os.environ["XDG_CONFIG_HOME"])
    assert oct(note.stat().st_mode & 0o777) == "0o600" and not str(note).startswith(str(home))
    build(home, 3, "b")
    res = ledger(home, "verify")
    assert res.exit_code == 0 and "proved consistent with the checkpoint of size 5" in res.stdout
    assert "remembering size 8" in res.stdout


def test_rewritten_and_resigned_history_is_caught(tmp_path: Path) -> None:
    """A history rebuilt and re-signed with the key beside it fails remembered-checkpoint (exit 1)."""
    home = tmp_path / "L"
    build(home, 6, "honest")
    assert ledger(home, "verify").exit_code == 0
    rebuild(home, 9, "forged")
    assert ledger(home, "verify", "--no-remember").exit_code == 0  # the rebuilt file is self-consistent
    res = ledger(home, "verify")
    assert res.exit_code == 1 and "remembered-checkpoint" in res.stderr and "rewritten" in res.stderr


def test_same_size_rewrite_and_truncation_are_caught(tmp_path: Path) -> None:
    """A rewrite of the same size (another root) and a shorter rebuild both fail."""
    home = tmp_path / "L"
    build(home, 6, "honest")
    assert ledger(home, "verify").exit_code == 0
    rebuild(home, 6, "forged")
    res = ledger(home, "verify")
    assert res.exit_code == 1 and "remembered-checkpoint" in res.stderr
    rebuild(home, 4, "honest")
    res = ledger(home, "verify", "--json")
    assert res.exit_code == 1 and "truncated or rolled back" in res.stderr


def test_no_remember_neither_checks_nor_writes(tmp_path: Path) -> None:
    """--no-remember leaves the seen folder untouched."""
    home = tmp_path / "L"
    build(home, 3, "a")
    assert ledger(home, "verify", "--no-remember").exit_code == 0
    assert not seen_dir().exists() or not list(seen_dir().glob("*.note"))


def test_whole_log_bundle_is_proved_against_the_remembered_checkpoint(tmp_path: Path) -> None:
    """verify --bundle of a whole-log export proves consistency with what the journal verify saw."""
    home = tmp_path / "L"
    build(home, 5, "a")
    assert ledger(home, "verify").exit_code == 0
    build(home, 4, "b")
    out = tmp_path / "b.json"
    assert ledger(home, "export", "-o", str(out)).exit_code == 0
    vkey = ledger(home, "keys", "show", "--public").stdout.strip()
    res = ledger(tmp_path / "elsewhere", "verify", "--bundle", str(out), "--vkey", vkey)
    assert res.exit_code == 0 and "proved consistent with the checkpoint of size 5" in res.stdout


def test_an_older_bundle_is_not_a_rollback(tmp_path: Path) -> None:
    """A bundle exported before the journal grew still verifies after a larger size was remembered."""
    home = tmp_path / "L"
    build(home, 4, "a")
    out = tmp_path / "old.json"
    assert ledger(home, "export", "-o", str(out)).exit_code == 0
    build(home, 4, "b")
    assert ledger(home, "verify").exit_code == 0  # remembers size 8
    vkey = ledger(home, "keys", "show", "--public").stdout.strip()
    res = ledger(tmp_path / "elsewhere", "verify", "--bundle", str(out), "--vkey", vkey)
    assert res.exit_code == 0 and "not proved" in res.stdout, res.output
