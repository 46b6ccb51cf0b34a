"""`ledger export --format sqlite`: the database opens with sqlite-utils, has every table with
its foreign keys, rows that name their entry (seq, leaf hash), full-text search over
transcripts, and a query joining attempts and tests returns the report's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from ledger.journal.journal import Journal
from tests.cli.test_report_cmds import invoke, write
from tests.cli.test_stats_cmds import RUN_1, RUN_2, TASKS, agents_run

TABLES = ("runs", "agents", "tasks", "attempts", "tests", "signals", "costs", "verdicts",
          "statistics", "events")


@pytest.fixture()
def exported(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "L"
    home.mkdir()
    b = agents_run(RUN_1, {"alpha": set(TASKS[:9]), "beta": set(TASKS[:4])}, repeat=2)
    b.add("agent.output", {"attempt": f"{RUN_1}/t00/alpha/1/1",
                           "text": "ModuleNotFoundError: no module named zebra"}, task="t00")
    write(home, b)
    write(home, agents_run(RUN_2, {"alpha": set(TASKS[:2])}))
    out = tmp_path / "results.db"
    code, stdout, err = invoke(home, "export", RUN_1, RUN_2, "--format", "sqlite", "-o", str(out),
                               "--json")
    assert code == 0, err
    assert json.loads(stdout)["rows"]["attempts"] == 14 * 2 * 2 + 14
    return home, out


def test_tables_foreign_keys_and_indexes(exported: tuple[Path, Path]) -> None:
    """Every table exists; attempts reference runs, tasks and agents; tests reference attempts."""
    _, out = exported
    db = sqlite_utils.Database(out)
    assert set(TABLES) <= set(db.table_names())
    fks = {(fk.column, fk.other_table) for fk in db["attempts"].foreign_keys}
    assert fks == {("run_id", "runs"), ("task_id", "tasks"), ("agent_id", "agents")}
    assert {(fk.column, fk.other_table) for fk in db["tests"].foreign_keys} == {
        ("attempt", "attempts")}
    assert any(ix.columns == ["attempt"] for ix in db["tests"].indexes)
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_join_of_attempts_and_tests_returns_the_reports_numbers(
        exported: tuple[Path, Path]) -> None:
    """Per agent of RUN_1: attempts whose hidden tests all passed = the report's passed; the
    statistics table holds the report's Wilson bounds."""
    home, out = exported
    code, stdout, _ = invoke(home, "report", RUN_1, "--json")
    report = json.loads(stdout)
    db = sqlite_utils.Database(out)
    rows = db.execute("""
        select a.agent, count(*) from attempts a
         where a.run_id = ? and not exists (
               select 1 from tests t where t.attempt = a.attempt and t.suite = 'hidden'
                  and t.outcome != 'passed')
           and exists (select 1 from tests t where t.attempt = a.attempt and t.suite = 'hidden')
         group by a.agent order by a.agent""", [RUN_1]).fetchall()
    assert dict(rows) == {a: r["passed"] for a, r in report["per_agent"].items()}
    stat = db.execute("select pass_low, pass_high from statistics where run_id = ? and "
                      "scope = 'agent' and name = 'beta'", [RUN_1]).fetchone()
    pr = report["statistics"]["per_agent"]["beta"]["pass_rate"]
    assert stat == (pr["low"], pr["high"])


def test_rows_name_the_entry_they_came_from(exported: tuple[Path, Path]) -> None:
    """An attempt row's seq and leaf hash are its attempt.finished entry's, in the journal."""
    home, out = exported
    db = sqlite_utils.Database(out)
    attempt, seq, leaf = db.execute("select attempt, seq, leaf_hash from attempts "
                                    "order by attempt limit 1").fetchone()
    with Journal.open(home / "journal.db", readonly=True) as j:
        e = next(x for x in j.entries(run=attempt.split("/")[0]) if x.seq == seq)
    assert e.kind == "attempt.finished" and e.data["attempt"] == attempt
    assert e.leaf_hash.hex() == leaf


def test_full_text_search_over_transcripts(exported: tuple[Path, Path]) -> None:
    """The agent's output is found by a word of it."""
    _, out = exported
    db = sqlite_utils.Database(out)
    hits = list(db["events"].search("zebra"))
    assert [h["kind"] for h in hits] == ["agent.output"]


def test_the_full_text_index_holds_each_transcript_entry_once(exported: tuple[Path, Path]) -> None:
    """Every entry with a transcript text is indexed once, and nothing else is (the index was
    populated twice before, and over every entry)."""
    _, out = exported
    db = sqlite_utils.Database(out)
    with_text = db.execute("select count(*) from events where text != ''").fetchone()[0]
    indexed = db.execute("select count(*) from events_fts_docsize").fetchone()[0]
    hits = db.execute("select count(*) from events_fts where events_fts match 'zebra'").fetchone()[0]
    assert with_text >= 1 and indexed == with_text and hits == 1


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite_utils.Database(path)
    return {t: db.execute(f"select * from [{t}] order by rowid").fetchall() for t in TABLES}


def test_rows_from_the_verified_leaf_level_equal_rows_hashed_again(
        exported: tuple[Path, Path], tmp_path: Path) -> None:
    """The CLI hands the export the tree's leaf level its reading checked (no entry hashed
    twice); the library hashing each entry itself writes the very same rows."""
    from ledger.view.sqlite_export import export_sqlite

    home, out = exported
    with Journal.open(home / "journal.db", readonly=True) as j:
        runs = {r.run_id: list(j.entries(run=r.run_id)) for r in j.runs()}
    again = tmp_path / "again.db"
    info = export_sqlite([RUN_1, RUN_2], runs.__getitem__, again)
    assert info["rows"]["events"] == sum(len(es) for es in runs.values())
    assert _dump(again) == _dump(out)
    leaves = _dump(out)["events"]
    assert all(len(row[-1]) == 64 for row in leaves)


def test_entry_values_of_any_shape_are_stored_as_json_cells(tmp_path: Path) -> None:
    """A signal's detail, a cost field or a test message that is a map or a list (malformed
    data the fold ignores) is stored as JSON text, never a crash of the export."""
    from ledger.view.sqlite_export import export_sqlite

    b = agents_run(RUN_1, {"alpha": {TASKS[0]}})
    a = f"{RUN_1}/{TASKS[0]}/alpha/1/1"
    for i, e in enumerate(b.entries):
        if e.kind == "signal.result" and e.data["attempt"] == a:
            b.entries[i] = e._replace(data={**e.data, "detail": {"why": ["x"]}})
        if e.kind == "test.result" and e.data["attempt"] == a:
            tests = [{**t, "message": ["m", 1]} for t in e.data["tests"]]
            b.entries[i] = e._replace(data={**e.data, "tests": tests})
    out = tmp_path / "r.db"
    export_sqlite([RUN_1], lambda _: b.entries, out)
    db = sqlite_utils.Database(out)
    details = {r[0] for r in db.execute("select detail from signals where attempt = ?", [a])}
    assert '{"why": ["x"]}' in details
    messages = {r[0] for r in db.execute("select message from tests where attempt = ? and "
                                         "suite = 'hidden'", [a])}
    assert messages == {'["m", 1]'}


def test_a_failed_export_leaves_no_file(tmp_path: Path) -> None:
    """A read that fails half way (the second run does not verify) removes the half-written
    database: no file is left that looks like a finished export."""
    from ledger.errors import VerificationError
    from ledger.view.sqlite_export import export_sqlite

    b = agents_run(RUN_1, {"alpha": {TASKS[0]}})
    reads: list[str] = []

    def read(run_id: str) -> list:
        reads.append(run_id)
        if run_id == RUN_2:
            raise VerificationError("leaf-hash", "the entry's bytes do not hash to the tree's leaf")
        return b.entries

    out = tmp_path / "r.db"
    with pytest.raises(VerificationError):
        export_sqlite([RUN_1, RUN_2], read, out)
    assert reads == [RUN_1, RUN_2] and not out.exists()


def test_the_export_does_not_import_pandas() -> None:
    """sqlite-utils imports pandas and numpy when installed; the export loads it without them
    (about 0.4 s CPU), and pandas still imports afterwards in the same process."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed: nothing to keep out")
    code = ("import sys; import ledger.view.sqlite_export as m; db = m._sqlite_utils();"
            "print('pandas' in sys.modules, 'numpy' in sys.modules, db.Database.__name__);"
            "import pandas; print(pandas.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "Database", "pandas"]
