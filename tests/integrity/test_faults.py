"""Journal faults mid-run: one clear line and exit 1, never a traceback; earlier runs survive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from cli.main import cli
from ledger.errors import JournalUnreadable
from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


def _agent(tmp_path: Path, body: str) -> str:
    script = tmp_path / "saboteur.py"
    script.write_text(body)
    return f"cmd:{sys.executable} {script}"


def _run(home: Path, agent: str) -> Result:
    return ledger(home, "run", "--task", "fix-sub", "--trace", "none", "--sandbox", "none",
                  "--agent", agent)


def test_journal_overwritten_mid_run_ends_with_one_line(tmp_path: Path) -> None:
    """An agent that overwrites journal.db in place: exit 1, one clear line, no traceback."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    agent = _agent(tmp_path, f"f = open({str(home / 'journal.db')!r}, 'r+b')\n"
                             "f.write(b'\\0' * 8192)\nf.close()\n")
    res = _run(home, agent)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    err = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "journal" in err[0], res.stderr


def test_journal_replaced_mid_run_stops_writing_and_earlier_runs_still_verify(tmp_path: Path) -> None:
    """An agent that replaces journal.db: the harness stops, saves what it held open, and the
    earlier run still verifies against the checkpoint taken before."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    first = ledger(home, "run", "--json", "--task", "fix-sub", "--trace", "none", "--sandbox", "none",
                   "--agent", "noop")
    assert first.exit_code == 0, first.output
    run1 = json.loads(first.stdout)["run"]
    kept = tmp_path / "kept.note"
    kept.write_text(json.loads(ledger(home, "checkpoint", "--json").stdout)["note"])
    agent = _agent(tmp_path, "import os\n"
                             f"db = {str(home / 'journal.db')!r}\n"
                             "open(db + '.new', 'wb').write(b'not a journal')\n"
                             "os.replace(db + '.new', db)\n")
    res = _run(home, agent)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "replaced" in res.stderr and "rescued-" in res.stderr
    assert (home / "journal.db").read_bytes() == b"not a journal"  # nothing written over it
    [rescued] = list(home.glob("rescued-*/journal.db"))
    vkey = str(home / "keys" / "signing.vkey")
    res = ledger(rescued.parent, "verify", "--vkey", vkey, "--since", str(kept), "--no-remember")
    assert res.exit_code == 0, res.output
    res = ledger(rescued.parent, "verify", run1, "--vkey", vkey, "--no-remember")
    assert res.exit_code == 0, res.output


def test_store_refuses_to_write_after_the_file_was_replaced(tmp_path: Path) -> None:
    """The store compares the file's identity before each commit and stops writing for good."""
    db = tmp_path / "j.db"
    with Journal.open(db, create=True, harness=True) as j:
        j.append("ext.a", {})
        db.rename(tmp_path / "moved.db")
        db.write_bytes(b"")
        try:
            j.append("ext.b", {})
        except JournalUnreadable as exc:
            assert "replaced" in str(exc)
        else:
            raise AssertionError("the append went through")
        try:
            j.append("ext.c", {})
        except JournalUnreadable:
            pass
        else:
            raise AssertionError("the store wrote again")
    assert db.read_bytes() == b""
