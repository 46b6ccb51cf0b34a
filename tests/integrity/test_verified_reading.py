"""What people read is verified (issue 24): `report`, `failures`, `compare`, `view` and `export`
check the run's entries against the tree and the signed checkpoint before they show anything.

The tampered copy is the issue's own: the journal's triggers dropped and one byte of the failed
attempt's ``test.result`` flipped (``passed: false`` -> ``true``), which keeps the entry canonical
and turns the failed task into a passed one on every page that believes the bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger

# The flipped byte is caught by the root check (its leaf recomputed from the body) or by the leaf
# check (its leaf read from the stored tree), depending on where the run's entries fall in the
# tree's stored levels; either names the failed check.
CAUGHT = ("checkpoint-journal", "leaf-hash")


def _caught(text: str) -> bool:
    return any(check in text for check in CAUGHT)


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real run: oracle passes fix-sub, noop fails it."""
    home = make_ledger(tmp_path_factory.mktemp("reading"), tasks=("fix-sub",))
    res = ledger(home, "run", "--json", "--task", "fix-sub", "--trace", "none", "--sandbox", "none",
                 "--agent", "oracle", "--agent", "noop")
    assert res.exit_code == 0, res.output
    return home, json.loads(res.stdout)["run"]


def _flip_noop_result(home: Path) -> int:
    """Drop the triggers and flip the noop attempt's hidden ``test.result`` to passed; its seq."""
    with Journal.open(home / "journal.db", readonly=True) as j:
        victim = next(e for e in j.entries(kind="test.result")
                      if "/noop/" in e.data["attempt"] and e.data["passed"] is False)
    key = b"\xa6passed\xc2"  # msgpack: the key "passed", then false
    assert victim.raw.count(key) == 1
    forged = victim.raw.replace(key, b"\xa6passed\xc3")
    c = sqlite3.connect(home / "journal.db")
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    c.execute("UPDATE entries SET body = ? WHERE seq = ?", (forged, victim.seq))
    c.commit()
    c.close()
    return victim.seq


@pytest.fixture()
def tampered(real: tuple[Path, str], tmp_path: Path) -> tuple[Path, str, int]:
    home, run_id = real
    copy = tmp_path / "copy" / ".ledger"
    shutil.copytree(home, copy)
    return copy, run_id, _flip_noop_result(copy)


def _noop_passed(report: dict[str, object]) -> bool:
    rows = report["attempts"]
    assert isinstance(rows, list)
    return next(a for a in rows if a["agent"] == "noop")["passed"] is True


def test_report_of_an_intact_run_says_what_it_was_verified_against(real: tuple[Path, str]) -> None:
    """The report ends with `verified against checkpoint N`, N the latest signed checkpoint."""
    home, run_id = real
    with Journal.open(home / "journal.db", readonly=True) as j:
        size = max(s for s, _ in j.store.checkpoints())
    res = ledger(home, "report", run_id)
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip().splitlines()[-1] == f"verified against checkpoint {size}"
    body = json.loads(ledger(home, "report", run_id, "--json").stdout)
    assert body["verification"]["verified"] is True and body["verification"]["checkpoint"] == size
    assert not _noop_passed(body)


def test_report_refuses_a_flipped_result_byte(tampered: tuple[Path, str, int]) -> None:
    """`report` of the tampered copy exits 1 naming the failed check, showing no score."""
    home, run_id, _seq = tampered
    res = ledger(home, "report", run_id)
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert _caught(res.stderr) and "Traceback" not in res.output


def test_report_unverified_shows_the_page_under_a_banner(tampered: tuple[Path, str, int]) -> None:
    """`report --unverified` shows what the bytes say, with the failure as the first line."""
    home, run_id, _seq = tampered
    res = ledger(home, "report", run_id, "--unverified")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("UNVERIFIED: ") and _caught(res.stdout.splitlines()[0])
    body = json.loads(ledger(home, "report", run_id, "--unverified", "--json").stdout)
    assert body["verification"]["verified"] is False
    assert _noop_passed(body)  # the forged byte is what the unverified page shows


@pytest.mark.parametrize("args", [("failures",), ("compare", "{run}", "{run}")],
                         ids=["failures", "compare"])
def test_every_reader_refuses_the_tampered_copy(tampered: tuple[Path, str, int],
                                                args: tuple[str, ...]) -> None:
    """`failures` and `compare` refuse like `report`."""
    home, run_id, _seq = tampered
    res = ledger(home, *(a.format(run=run_id) for a in args))
    assert res.exit_code == 1 and _caught(res.stderr), res.output


def test_view_refuses_and_with_unverified_bannered(tampered: tuple[Path, str, int],
                                                  tmp_path: Path) -> None:
    """`view` writes no page of the tampered copy; `view --unverified` writes one whose first
    element is the banner saying what failed."""
    home, run_id, _seq = tampered
    out = tmp_path / "page.html"
    res = ledger(home, "view", run_id, "-o", str(out))
    assert res.exit_code == 1 and not out.exists(), res.output
    res = ledger(home, "view", run_id, "-o", str(out), "--unverified")
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert page.index("id=unverified") < page.index("<h1>") and _caught(page)


def test_export_refuses_to_sign_a_tampered_run(tampered: tuple[Path, str, int], tmp_path: Path) -> None:
    """`export` checks first: no bundle (whose fresh checkpoint would sign the forged byte)."""
    home, run_id, _seq = tampered
    for args in (("export", run_id), ("export",)):
        out = tmp_path / "x.bundle"
        res = ledger(home, *args, "-o", str(out))
        assert res.exit_code == 1 and not out.exists(), res.output


def _zero_page(db: Path, page: int) -> None:
    with open(db, "r+b") as fh:
        fh.seek(4096 * page)
        fh.write(b"\x00" * 4096)


def test_run_refuses_to_append_to_a_damaged_journal(real: tuple[Path, str], tmp_path: Path) -> None:
    """With a page of the database zeroed, `ledger run` appends nothing and says what to do."""
    home, _run = real
    copy = tmp_path / "d" / ".ledger"
    shutil.copytree(home, copy)
    db = copy / "journal.db"
    for suffix in ("-wal", "-shm"):
        assert not (copy / f"journal.db{suffix}").exists()
    _zero_page(db, 3)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    res = ledger(copy, "run", "--task", "fix-sub", "--agent", "noop", "--trace", "none",
                 "--sandbox", "none")
    assert res.exit_code == 1, res.output
    assert "damaged" in res.stderr and "nothing was appended" in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    res = ledger(copy, "report")
    assert res.exit_code != 0 and "Traceback" not in res.output and res.stdout == "", res.output
