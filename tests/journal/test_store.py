"""The SQLite store behind the journal: numbering, filters, durability, refusals, Merkle agreement."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.errors import (
    CodecError,
    JournalConflict,
    JournalFormatError,
    MalformedInput,
    NotFound,
    UsageError,
    VerificationError,
)
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.journal.note import open_checkpoint
from ledger.journal.store import Store
from tests.journal.tamper_cases import CLOCK_START, TRIGGERS, counter_clock, raw_db
from tests.journal.test_tiles import full_tiles


def fill(j: Journal, n: int) -> None:
    for i in range(n):
        j.append("agent.tool", {"i": i}, run="r1", task=f"t{i % 2}")


# --------------------------------------------------------------------------- appending


def test_append_numbers_from_zero(journal: Journal) -> None:
    """The first append gets seq 0 and each later one the next integer."""
    e0 = journal.append("run.started", {"config": {}}, run="r1")
    e1 = journal.append("agent.tool", {"name": "read"}, run="r1", task="t1")
    assert (e0.seq, e1.seq) == (0, 1)
    assert journal.size == 2
    assert e1.run == "r1" and e1.task == "t1" and e1.kind == "agent.tool"
    assert e1.data == {"name": "read"}


def test_append_many_is_contiguous(journal: Journal) -> None:
    """A batch gets consecutive seqs right after the current head, one tree head per batch."""
    journal.append("a", {})
    batch = journal.append_many([
        {"kind": "b", "data": {"n": 1}},
        {"kind": "c", "data": {"n": 2}, "run": "r", "task": "t"},
        ("d", {"n": 3}, None, "t"),
    ])
    assert [e.seq for e in batch] == [1, 2, 3]
    assert [e.kind for e in batch] == ["b", "c", "d"]
    assert [h[0] for h in journal.store.all_heads()] == [1, 4]
    assert len({e.ts for e in batch}) == 1  # one transaction, one timestamp


def test_append_many_empty_is_a_no_op(journal: Journal) -> None:
    """An empty batch appends nothing and records no head."""
    assert journal.append_many([]) == []
    assert journal.head() == (0, merkle.EMPTY_ROOT)
    assert journal.store.all_heads() == []


def test_append_uses_the_given_clock(journal: Journal) -> None:
    """Entry timestamps come from the injected clock, not the wall clock."""
    e = journal.append("a", {})
    assert e.ts == CLOCK_START


def test_returned_entry_is_what_was_stored(journal: Journal) -> None:
    """The Entry append returns carries the exact stored bytes and leaf hash."""
    e = journal.append("a", {"x": [1, 2.5, "s", b"b", None, True]})
    stored = journal.entry(0)
    assert stored.raw == e.raw
    assert journal.store.fetch_nodes([(0, 0)]) == {(0, 0): e.leaf_hash}
    assert e.leaf_hash == merkle.leaf_hash(e.raw) == merkle.leaf_hash(stored.raw)
    assert journal.find_leaf(e.leaf_hash) == 0
    assert journal.find_leaf(b"\x00" * 32) is None


@pytest.mark.parametrize("items", [
    [{"kind": "a"}],
    [{"data": {}}],
    [{"kind": "a", "data": {}, "extra": 1}],
    [{"kind": "", "data": {}}],
    [{"kind": 3, "data": {}}],
    [{"kind": "a", "data": [1]}],
    [{"kind": "a", "data": {}, "run": 5}],
    ["not an item"],
], ids=["no-data", "no-kind", "extra-field", "empty-kind", "int-kind", "list-data", "int-run", "str"])
def test_append_many_refuses_bad_items(journal: Journal, items: list[object]) -> None:
    """Malformed batch items are refused as MalformedInput and nothing is written."""
    journal.append("a", {})
    with pytest.raises(MalformedInput):
        journal.append_many([{"kind": "ok", "data": {}}, *items])  # type: ignore[list-item]
    assert journal.size == 1


@pytest.mark.parametrize("data", [{"x": float("nan")}, {1: 2}, {"x": object()}],
                         ids=["nan", "int-key", "object"])
def test_unstorable_data_writes_nothing(journal: Journal, data: dict[object, object]) -> None:
    """A batch with one unencodable item fails as a whole: no rows, no head, no partial write."""
    journal.append("a", {})
    with pytest.raises(CodecError):
        journal.append_many([{"kind": "ok", "data": {}}, {"kind": "bad", "data": data}])
    assert journal.size == 1
    assert journal.store.entry_count() == 1
    assert [h[0] for h in journal.store.all_heads()] == [1]
    journal.append("after", {})
    assert journal.verify()["size"] == 2


# --------------------------------------------------------------------------- reading


def test_entries_filters_combine(journal: Journal) -> None:
    """entries() filters by range, run, task and kind, and the filters combine."""
    journal.append_many([
        {"kind": "run.started", "data": {}, "run": "r1"},
        {"kind": "agent.tool", "data": {"n": 1}, "run": "r1", "task": "t1"},
        {"kind": "agent.tool", "data": {"n": 2}, "run": "r1", "task": "t2"},
        {"kind": "task.result", "data": {}, "run": "r1", "task": "t1"},
        {"kind": "run.started", "data": {}, "run": "r2"},
        {"kind": "agent.tool", "data": {"n": 3}, "run": "r2", "task": "t1"},
        {"kind": "note", "data": {}},
    ])

    def seqs(**kw: object) -> list[int]:
        return [e.seq for e in journal.entries(**kw)]  # type: ignore[arg-type]

    assert seqs() == list(range(7))
    assert seqs(start=2, stop=5) == [2, 3, 4]
    assert seqs(start=5) == [5, 6]
    assert seqs(run="r1") == [0, 1, 2, 3]
    assert seqs(task="t1") == [1, 3, 5]
    assert seqs(kind="agent.tool") == [1, 2, 5]
    assert seqs(run="r1", task="t1") == [1, 3]
    assert seqs(run="r2", kind="agent.tool") == [5]
    assert seqs(run="r1", kind="agent.tool", start=2) == [2]
    assert seqs(run="nope") == []
    assert seqs(start=7) == []


# --------------------------------------------------------------------------- the runs index


def runs_index(path: Path) -> dict[str, int]:
    """The runs table as {run: first}."""
    with raw_db(path) as c:
        return dict(c.execute("SELECT run, first FROM runs").fetchall())


def first_spans(path: Path) -> dict[str, int]:
    """Brute force over the spans: the first span of every run."""
    with raw_db(path) as c:
        return dict(c.execute("SELECT run, min(first) FROM spans WHERE run IS NOT NULL GROUP BY run").fetchall())


def test_query_by_a_run_that_returns_much_later_matches_brute_force(db_path: Path) -> None:
    """entries(run=R) for a run that stops and comes back after many other runs' spans is exactly the brute-force set."""
    with Journal.open(db_path, create=True, clock=counter_clock(), tile_height=2, harness=True) as j:
        j.append_many([("run.started", {}, "R", None), ("agent.tool", {"n": 0}, "R", "t1")])
        for i in range(60):  # 120 entries of other runs (and of none), two spans per append
            j.append_many([("agent.tool", {"i": i}, f"o{i % 3}", f"t{i % 2}"), ("note", {"i": i}, None, None)])
        j.append_many([("agent.tool", {}, "o1", None), *[("agent.tool", {"n": n}, "R", "t1") for n in (1, 2, 3)],
                       ("note", {}, None, None), ("task.result", {}, "R", "t1")])
        for i in range(12):
            j.append("agent.tool", {"i": i}, run="o2" if i % 3 else "R", task="t2")
        everything = list(j.entries())
        by_run = [e.seq for e in everything if e.run == "R"]
        # R is back at 123..125 (one span) and 127, then every third single append from 128
        assert by_run == [0, 1, 123, 124, 125, 127, 128, 131, 134, 137]
        for run in ("R", "o0", "o1", "o2", "nope"):
            for start, stop in ((0, None), (1, None), (2, 124), (100, 130), (124, None), (125, 126),
                                (0, 2), (130, 3)):
                for task in (None, "t1", "t2"):
                    for kind in (None, "agent.tool"):
                        want = [e.seq for e in everything if e.run == run and e.seq >= start
                                and (stop is None or e.seq < stop) and task in (None, e.task)
                                and kind in (None, e.kind)]
                        got = [e.seq for e in j.entries(run=run, start=start, stop=stop, task=task, kind=kind)]
                        assert got == want, (run, start, stop, task, kind)
        assert j.verify()["size"] == len(everything)


def test_runs_rows_are_written_once_per_run(db_path: Path) -> None:
    """Many appends, by two handles and a reopened one, leave one runs row per run at its first span."""
    a = Journal.open(db_path, create=True, clock=counter_clock(), harness=True)
    b = Journal.open(db_path, clock=counter_clock(), harness=True)
    try:
        for i in range(90):
            w = (a, b)[i % 2]  # each handle keeps its own cache of the runs it indexed
            w.append_many([("k", {"i": i}, f"r{i % 7}", None), ("k", {"i": i}, f"r{(i * 5) % 11}", "t")])
        for i in range(5):
            b.append("k", {"i": i}, run=f"r{i}")
    finally:
        a.close()
        b.close()
    with Journal.open(db_path, harness=True) as j:  # a cold cache: every run it appends to is already indexed
        j.append_many([("k", {}, f"r{i}", None) for i in range(11)] + [("k", {}, "new", None)])
        size = j.size
        assert j.verify()["size"] == size
    with raw_db(db_path) as c:
        (count,) = c.execute("SELECT count(*) FROM runs").fetchone()
    index = runs_index(db_path)
    assert count == len(index) == 12  # r0..r10 and new
    assert index == first_spans(db_path)
    assert index["new"] == size - 1


def test_run_first_seen_mid_batch_is_indexed_at_its_span(journal: Journal) -> None:
    """A run first seen in the middle span of a mixed batch is indexed at that span's first, once."""
    journal.append_many([("k", {}, "a", None)] * 2)
    journal.append_many([("k", {}, "a", None), ("x", {}, None, None), ("k", {}, "b", "t"),
                         ("k", {}, "b", "t"), ("k", {}, "c", None), ("k", {}, "b", None)])
    path = Path(journal.store.path)
    with raw_db(path) as c:
        spans = c.execute("SELECT first, last, run, root IS NOT NULL FROM spans ORDER BY first").fetchall()
    # batch two: [2] a, [3] no run, [4-5] b, [6] c, [7] b again; only [7] carries the tree head
    assert spans == [(0, 1, "a", 1), (2, 2, "a", 0), (3, 3, None, 0), (4, 5, "b", 0), (6, 6, "c", 0),
                     (7, 7, "b", 1)]
    assert runs_index(path) == {"a": 0, "b": 4, "c": 6}
    assert [e.seq for e in journal.entries(run="b")] == [4, 5, 7]
    assert [e.seq for e in journal.entries(run="c")] == [6]


def test_runs_differing_in_case_are_separate_runs(db_path: Path) -> None:
    """Runs 'r' and 'R' get a row each and verify; a second row under either name is refused even without triggers."""
    with Journal.open(db_path, create=True, clock=counter_clock(), harness=True) as j:
        j.append_many([("k", {}, "r", None), ("k", {}, "R", None), ("k", {}, "r", None)])
        assert [e.seq for e in j.entries(run="r")] == [0, 2]
        assert [e.seq for e in j.entries(run="R")] == [1]
        assert j.verify()["size"] == 3
    assert runs_index(db_path) == {"r": 0, "R": 1}
    with raw_db(db_path) as c:
        c.execute("DROP TRIGGER runs_no_dup")
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            c.execute("INSERT INTO runs(run, first) VALUES ('R', 0)")
    assert runs_index(db_path) == {"r": 0, "R": 1}


def test_runs_row_planted_before_its_run_is_written_is_caught(db_path: Path) -> None:
    """A runs row planted for a run not written yet misleads later queries by run; verify names the run's real first span."""
    with Journal.open(db_path, create=True, clock=counter_clock(), harness=True) as j:
        fill(j, 3)
    with raw_db(db_path) as c:
        try:
            c.execute("INSERT INTO runs(run, first) VALUES ('r9', 1000)")
            planted = True
        except sqlite3.IntegrityError as exc:  # a stricter trigger would refuse it outright
            assert "journal" in str(exc)
            planted = False
    with Journal.open(db_path, clock=counter_clock(), harness=True) as j:
        j.append_many([("k", {"i": i}, "r9", None) for i in range(4)])
        seen = [e.seq for e in j.entries(run="r9")]
        if not planted:
            assert seen == [3, 4, 5, 6] and j.verify()["size"] == 7
            return
        # the writer's INSERT ... WHERE NOT EXISTS keeps the planted row: r9 is hidden from queries
        assert seen == [] and runs_index(db_path)["r9"] == 1000
        with pytest.raises(VerificationError) as info:
            j.verify()
    assert (info.value.check, info.value.seq) == ("entry-index", 3)


def test_entry_lookup(journal: Journal) -> None:
    """entry(seq) returns that entry; a seq beyond the log is NotFound."""
    fill(journal, 3)
    assert journal.entry(2).data == {"i": 2}
    with pytest.raises(NotFound):
        journal.entry(3)


def test_durable_across_reopen(db_path: Path) -> None:
    """Entries, head and bytes are the same after closing and reopening the journal."""
    with Journal.open(db_path, create=True, clock=counter_clock(), harness=True) as j:
        fill(j, 5)
        j.append_many([{"kind": "b", "data": {"k": i}} for i in range(4)])
        head = j.head()
        raws = [e.raw for e in j.entries()]
    with Journal.open(db_path, harness=True) as j:
        assert j.head() == head
        assert [e.raw for e in j.entries()] == raws
        e = j.append("after", {})
        assert e.seq == 9
        assert j.verify()["size"] == 10


def test_open_by_directory(home: Path) -> None:
    """Journal.open accepts the ledger directory and finds journal.db inside it."""
    with Journal.open(home, create=True, harness=True) as j:
        j.append("a", {})
    assert (home / "journal.db").is_file()
    with Journal.open(home, harness=True) as j:
        assert j.size == 1


def test_two_handles_interleave(db_path: Path) -> None:
    """Two open handles on one file append in turn and still build one valid tree."""
    a = Journal.open(db_path, create=True, harness=True)
    b = Journal.open(db_path, harness=True)
    try:
        for i in range(10):
            (a if i % 3 else b).append("x", {"i": i})
        a.append_many([{"kind": "y", "data": {}}] * 3)
        b.append("z", {})
        assert a.size == b.size == 14
        assert b.verify()["size"] == 14
        leaves = [e.leaf_hash for e in a.entries()]
        assert a.head()[1] == merkle.root_from_leaves(leaves)
    finally:
        a.close()
        b.close()


def test_memory_journal() -> None:
    """A ':memory:' journal appends, proves and verifies without touching the disk."""
    with Journal.open(":memory:", harness=True) as j:
        fill(j, 9)
        assert j.home is None
        assert j.verify()["size"] == 9
        p = j.inclusion_proof(3, 9)
        merkle.verify_inclusion(3, 9, p.leaf_hash, list(p.hashes), p.root)


def test_readonly_refuses_writes(db_path: Path) -> None:
    """A read-only handle reads and verifies but refuses to append."""
    with Journal.open(db_path, create=True, harness=True) as j:
        fill(j, 2)
    with Journal.open(db_path, readonly=True) as j:
        assert j.size == 2
        assert j.verify()["size"] == 2
        with pytest.raises(JournalConflict):
            j.append("ext.a", {})


def test_missing_journal_is_not_created(tmp_path: Path) -> None:
    """Opening a journal that does not exist without create=True is NotFound and creates nothing."""
    path = tmp_path / "nope" / "journal.db"
    with pytest.raises(NotFound):
        Journal.open(path, harness=True)
    with pytest.raises(NotFound):
        Journal.open(path, readonly=True)
    assert not path.parent.exists()


def test_wal_mode(db_path: Path) -> None:
    """The journal runs in WAL mode (readers never block the writer)."""
    with Journal.open(db_path, create=True, harness=True) as j:
        fill(j, 1)
    with raw_db(db_path) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --------------------------------------------------------------------------- refusals via raw SQL

# The journal these run against (tile height 1): 8 entries of run r1 appended one at a time, so
# spans (0,0)..(7,7), each carrying the tree head of its commit (sizes 1..8) in root/ts, one runs
# row ('r1', 0), tiles (0,0)..(0,3), (1,0), (1,1) and (2,0), and a checkpoint at 8.
ENTRY = "INSERT {verb} INTO entries(seq, body) VALUES ({seq}, x'00')"
SPAN = "INSERT {verb} INTO spans(first, last, run, task, kind) VALUES ({first}, {last}, NULL, NULL, 'k')"
TILE = "INSERT {verb} INTO tiles(level, idx, hashes, root) VALUES ({level}, {idx}, x'00', x'00')"
REFUSED_SQL = {
    "entries-insert-or-replace": ENTRY.format(verb="OR REPLACE", seq=1),
    "entries-replace": ENTRY.format(verb="", seq=0).replace("INSERT ", "REPLACE", 1),
    "entries-insert-or-ignore-dup": ENTRY.format(verb="OR IGNORE", seq=2),
    "entries-insert-duplicate": ENTRY.format(verb="", seq=2),
    "entries-insert-gap": ENTRY.format(verb="", seq=9),
    "entries-insert-negative": ENTRY.format(verb="", seq=-1),
    "entries-insert-auto-seq": "INSERT INTO entries(body) VALUES (x'00')",
    "entries-update-body": "UPDATE entries SET body = x'00' WHERE seq = 1",
    "entries-update-seq": "UPDATE entries SET seq = 100 WHERE seq = 7",
    "entries-delete-one": "DELETE FROM entries WHERE seq = 7",
    "entries-delete-all": "DELETE FROM entries",
    "spans-insert-or-replace": SPAN.format(verb="OR REPLACE", first=1, last=1),
    "spans-replace": SPAN.format(verb="", first=0, last=0).replace("INSERT ", "REPLACE", 1),
    "spans-insert-duplicate": SPAN.format(verb="", first=5, last=8),
    "spans-insert-overlap": SPAN.format(verb="", first=7, last=9),    # does not follow (7,7)
    "spans-insert-gap": SPAN.format(verb="", first=9, last=9),
    "spans-insert-negative": SPAN.format(verb="", first=-1, last=-1),
    "spans-insert-last-before-first": SPAN.format(verb="", first=8, last=7),
    "spans-insert-auto-first": "INSERT INTO spans(last, kind) VALUES (8, 'k')",
    "spans-update-kind": "UPDATE spans SET kind = 'other' WHERE first = 2",
    "spans-update-last": "UPDATE spans SET last = 9 WHERE first = 5",
    "spans-delete-one": "DELETE FROM spans WHERE first = 5",
    "spans-delete-all": "DELETE FROM spans",
    "tiles-insert-or-replace": TILE.format(verb="OR REPLACE", level=0, idx=0),
    "tiles-replace": TILE.format(verb="", level=1, idx=0).replace("INSERT ", "REPLACE", 1),
    "tiles-insert-duplicate": TILE.format(verb="", level=2, idx=0),
    "tiles-update-hashes": "UPDATE tiles SET hashes = x'00' WHERE level = 0 AND idx = 1",
    "tiles-update-root": "UPDATE tiles SET root = x'00' WHERE level = 2",
    "tiles-update-idx": "UPDATE tiles SET idx = 7 WHERE level = 0 AND idx = 3",
    "tiles-delete-one": "DELETE FROM tiles WHERE level = 1 AND idx = 1",
    "tiles-delete-all": "DELETE FROM tiles",
    # tree heads live on the spans: a head cannot be rewritten, retyped, moved or deleted
    "spans-update-root": "UPDATE spans SET root = x'00' WHERE first = 3",
    "spans-update-root-as-text": "UPDATE spans SET root = hex(root) WHERE first = 3",
    "spans-update-root-null": "UPDATE spans SET root = NULL WHERE first = 7",  # the latest head
    "spans-update-root-onto-span": "UPDATE spans SET root = (SELECT root FROM spans WHERE first = 7) "
                                   "WHERE first = 6",
    "spans-update-ts": "UPDATE spans SET ts = 0 WHERE first = 3",
    "spans-update-all-heads": "UPDATE spans SET root = NULL, ts = NULL",
    "runs-insert-duplicate": "INSERT INTO runs(run, first) VALUES ('r1', 5)",
    "runs-insert-or-replace": "INSERT OR REPLACE INTO runs(run, first) VALUES ('r1', 5)",
    "runs-replace": "REPLACE INTO runs(run, first) VALUES ('r1', 3)",
    "runs-insert-or-ignore-dup": "INSERT OR IGNORE INTO runs(run, first) VALUES ('r1', 0)",
    "runs-update-first": "UPDATE runs SET first = 4 WHERE run = 'r1'",
    "runs-update-run": "UPDATE runs SET run = 'r2'",
    "runs-delete-one": "DELETE FROM runs WHERE run = 'r1'",
    "runs-delete-all": "DELETE FROM runs",
    "runs-insert-unknown-run": "INSERT INTO runs(run, first) VALUES ('r-unknown', 0)",
    "runs-insert-at-a-span-of-another-run": "INSERT INTO runs(run, first) VALUES ('R1', 0)",
    "runs-insert-name-as-blob": "INSERT INTO runs(run, first) VALUES (CAST('r1' AS BLOB), 0)",
    "runs-insert-first-as-text": "INSERT INTO runs(run, first) VALUES ('r9', 'zero')",
    "checkpoints-insert-or-replace": "INSERT OR REPLACE INTO checkpoints(size, note, ts) "
                                     "VALUES (8, 'x', 0)",
    "checkpoints-update": "UPDATE checkpoints SET note = 'x'",
    "checkpoints-delete": "DELETE FROM checkpoints",
}


HISTORY_TABLES = ("entries", "spans", "runs", "tiles", "checkpoints")


def table_snapshot(j: Journal) -> tuple[object, ...]:
    """Every stored row the triggers protect, as the store reads them."""
    return ([e.raw for e in j.entries()], j.store.span_rows(), j.store.all_tiles(),
            j.store.all_heads(), j.store.run_rows(), j.store.checkpoints())


def raw_snapshot(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every history table, all columns (span ts included), as SQLite returns them."""
    with raw_db(path) as c:
        return {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in HISTORY_TABLES}


@pytest.mark.parametrize("sql", REFUSED_SQL.values(), ids=list(REFUSED_SQL))
def test_raw_sql_cannot_rewrite_history(db_path: Path, keyring: KeyRing, sql: str) -> None:
    """Triggers refuse UPDATE, DELETE, REPLACE and out-of-order INSERT on every history table."""
    with Journal.open(db_path, create=True, tile_height=1, harness=True) as j:
        fill(j, 8)
        j.checkpoint(keyring)
        before = table_snapshot(j)
    raw_before = raw_snapshot(db_path)
    assert [(lv, ix) for lv, ix, _h, _r in before[2]] == [  # type: ignore[attr-defined]
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (2, 0)]
    assert [row[:2] for row in before[1]] == [(i, i) for i in range(8)]  # type: ignore[attr-defined]
    assert [h[0] for h in before[3]] == list(range(1, 9))  # type: ignore[attr-defined]
    assert raw_before["runs"] == [("r1", 0)]
    with raw_db(db_path) as c, pytest.raises(sqlite3.IntegrityError, match="journal"):
        c.execute(sql)
    assert raw_snapshot(db_path) == raw_before
    with Journal.open(db_path, harness=True) as j:
        assert table_snapshot(j) == before
        assert j.verify(verifier=keyring.verifier)["size"] == 8


def test_schema_triggers_are_the_ones_the_corpus_drops(db_path: Path) -> None:
    """The schema's triggers are exactly tamper_cases.TRIGGERS, so drop_triggers() leaves none behind."""
    with Journal.open(db_path, create=True, harness=True):
        pass
    with raw_db(db_path) as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert names == set(TRIGGERS)
    assert not any(n.startswith("heads_") for n in names)


def test_schema_tables_are_the_documented_ones(db_path: Path) -> None:
    """A new journal has exactly the tables of the format: heads live on spans, no heads table."""
    with Journal.open(db_path, create=True, harness=True):
        pass
    with raw_db(db_path) as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == {"meta", *HISTORY_TABLES}


def test_meta_version_mismatch_is_refused(db_path: Path) -> None:
    """A journal whose meta says format version 9 is refused as JournalFormatError."""
    with Journal.open(db_path, create=True, harness=True) as j:
        fill(j, 2)
    with raw_db(db_path) as c:
        c.execute("UPDATE meta SET value = '9' WHERE key = 'version'")
    with pytest.raises(JournalFormatError, match="version '9'"):
        Journal.open(db_path, harness=True)
    with pytest.raises(JournalFormatError):
        Journal.open(db_path, readonly=True)


def test_meta_format_name_mismatch_is_refused(db_path: Path) -> None:
    """A database with the journal's tables but another format name is not a journal."""
    with Journal.open(db_path, create=True, harness=True):
        pass
    with raw_db(db_path) as c:
        c.execute("UPDATE meta SET value = 'something-else' WHERE key = 'format'")
    with pytest.raises(JournalFormatError, match="not an eval-ledger journal"):
        Journal.open(db_path, harness=True)


@pytest.mark.parametrize("create", [False, True], ids=["open", "create"])
def test_random_bytes_are_not_a_journal(tmp_path: Path, create: bool) -> None:
    """A file of random bytes is refused (JournalFormatError) and left untouched."""
    path = tmp_path / "journal.db"
    blob = os.urandom(8192)
    path.write_bytes(blob)
    with pytest.raises(JournalFormatError):
        Journal.open(path, create=create, harness=True)
    assert path.read_bytes() == blob


@pytest.mark.parametrize("create", [False, True], ids=["open", "create"])
def test_unrelated_sqlite_db_is_not_a_journal(tmp_path: Path, create: bool) -> None:
    """Another application's SQLite database is refused and not modified."""
    path = tmp_path / "journal.db"
    with raw_db(path) as c:
        c.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users(name) VALUES ('ada')")
    blob = path.read_bytes()
    with pytest.raises(JournalFormatError, match="not an eval-ledger journal"):
        Journal.open(path, create=create, harness=True)
    assert path.read_bytes() == blob
    with raw_db(path) as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    assert names == {"users"}


def test_directory_named_like_the_db_is_refused(tmp_path: Path) -> None:
    """A directory where the database file should be is refused as JournalFormatError."""
    (tmp_path / "journal.db").mkdir()
    with pytest.raises(JournalFormatError):
        Store.open(tmp_path / "journal.db")


def test_journal_format_error_is_usage_error() -> None:
    """Not-a-journal is unusable input for the CLI (exit 2), not a failed check."""
    assert issubclass(JournalFormatError, UsageError) and JournalFormatError.exit_code == 2


# --------------------------------------------------------------------------- tree agreement

MAX_SIZE = 70
BATCH_PATTERN = (1, 2, 1, 5, 3, 8, 1, 16, 4, 1, 7, 21)  # sums to 70; crosses many subtree edges


@pytest.fixture(scope="module", params=[2, 4], ids=["h2", "h4"])
def grown(tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Iterator[tuple[Journal, list[bytes], list[int]]]:
    """A 70-entry journal grown in uneven batches, its leaf hashes, and its batch boundaries.

    At tile height 2 it holds tiles on three levels; at the default height 4, four leaf tiles.
    """
    assert sum(BATCH_PATTERN) == MAX_SIZE
    path = tmp_path_factory.mktemp("grown") / "journal.db"
    j = Journal.open(path, create=True, clock=counter_clock(), tile_height=request.param, harness=True)
    sizes = []
    n = 0
    for b in BATCH_PATTERN:
        j.append_many([{"kind": "k", "data": {"i": n + i}} for i in range(b)])
        n += b
        sizes.append(n)
    leaves = [e.leaf_hash for e in j.entries()]
    assert {lv for lv, _i, _h, _r in j.store.all_tiles()} == ({0, 1, 2} if request.param == 2 else {0})
    yield j, leaves, sizes
    j.close()


def test_roots_match_reference(grown: tuple[Journal, list[bytes], list[int]]) -> None:
    """root_at(size) equals the RFC 6962 reference root for every size 1..70 (and 0)."""
    j, leaves, _ = grown
    assert j.root_at(0) == merkle.EMPTY_ROOT
    for size in range(1, MAX_SIZE + 1):
        assert j.root_at(size) == merkle.root_from_leaves(leaves[:size]), size


def test_recorded_heads_match_reference(grown: tuple[Journal, list[bytes], list[int]]) -> None:
    """Each batch recorded exactly one head, and each head's root is the reference root."""
    j, leaves, sizes = grown
    heads = j.store.all_heads()
    assert [h[0] for h in heads] == sizes
    for size, root, _type in heads:
        assert root == merkle.root_from_leaves(leaves[:size])


TILE_PATTERNS = {
    "uneven": BATCH_PATTERN,
    "ones": (1,) * 40,
    "one-batch": (70,),
    "edges": (3, 1, 4, 8, 16, 32, 1, 5),  # lands on 4, 8, 16, 32, 64 exactly
    "with-empty": (0, 2, 0, 7, 0, 9),
}


@pytest.mark.parametrize("height", [1, 2, 3, 4])
@pytest.mark.parametrize("pattern", TILE_PATTERNS.values(), ids=list(TILE_PATTERNS))
def test_stored_tiles_match_memory_tree(height: int, pattern: tuple[int, ...]) -> None:
    """After every batch the stored tiles are exactly the full tiles of MemoryNodes' tree."""
    width = 1 << height
    with Journal.open(":memory:", clock=counter_clock(), tile_height=height, harness=True) as j:
        leaves: list[bytes] = []
        for b in pattern:
            leaves += [e.leaf_hash for e in j.append_many([("k", {"n": len(leaves) + i}, None, None)
                                                          for i in range(b)])]
            nodes = merkle.MemoryNodes(leaves).nodes()
            stored = j.store.all_tiles()
            # never a partial tile: every stored tile holds W hashes and a 32-byte root
            assert all(len(hashes) == 32 * width and len(root) == 32 for _l, _i, hashes, root in stored)
            assert {(lv, ix): (hashes, root) for lv, ix, hashes, root in stored} == full_tiles(
                nodes, len(leaves), height)
        assert j.verify()["tiles"] == len(full_tiles(nodes, len(leaves), height))


def test_inclusion_proofs_match_reference(grown: tuple[Journal, list[bytes], list[int]]) -> None:
    """Every inclusion proof for sizes 1..70 equals MemoryNodes' proof and verifies."""
    j, leaves, _ = grown
    mem = merkle.MemoryNodes(leaves)
    for size in range(1, MAX_SIZE + 1):
        root = merkle.root_from_leaves(leaves[:size])
        for seq in range(size):
            p = j.inclusion_proof(seq, size)
            assert list(p.hashes) == merkle.inclusion_proof(seq, size, mem.fetch), (seq, size)
            assert p.root == root and p.leaf_hash == leaves[seq]
            merkle.verify_inclusion(seq, size, p.leaf_hash, list(p.hashes), p.root)


def test_consistency_proofs_match_reference(grown: tuple[Journal, list[bytes], list[int]]) -> None:
    """Every consistency proof between sizes 1..70 equals MemoryNodes' proof and verifies."""
    j, leaves, _ = grown
    mem = merkle.MemoryNodes(leaves)
    for new in range(1, MAX_SIZE + 1):
        for old in range(1, new + 1):
            p = j.consistency_proof(old, new)
            assert list(p.hashes) == merkle.consistency_proof(old, new, mem.fetch), (old, new)
            assert p.old_root == merkle.root_from_leaves(leaves[:old])
            merkle.verify_consistency(old, new, p.old_root, p.new_root, list(p.hashes))


def test_proof_json_shape(grown: tuple[Journal, list[bytes], list[int]]) -> None:
    """Proofs serialize to the documented JSON fields with hex hashes."""
    j, leaves, _ = grown
    inc = j.inclusion_proof(5, 20).as_json()
    assert set(inc) == {"leaf_index", "tree_size", "leaf_hash", "root", "hashes"}
    assert inc["leaf_hash"] == leaves[5].hex() and inc["tree_size"] == 20
    con = j.consistency_proof(7, 20).as_json()
    assert set(con) == {"old_size", "new_size", "old_root", "new_root", "hashes"}
    assert all(len(h) == 64 for h in con["hashes"])


@pytest.mark.parametrize("args", [(70, 70), (-1, 10), (0, 71), (5, 4)], ids=["seq=size", "neg", "beyond", "seq>size"])
def test_inclusion_proof_bad_arguments(grown: tuple[Journal, list[bytes], list[int]],
                                       args: tuple[int, int]) -> None:
    """Inclusion proofs for a seq outside the tree or a size beyond the log are UsageError."""
    j, _, _ = grown
    with pytest.raises(UsageError):
        j.inclusion_proof(*args)


@pytest.mark.parametrize("args", [(5, 71), (6, 5), (-1, 5), (0, 5)], ids=["beyond", "old>new", "neg", "from-empty"])
def test_consistency_proof_bad_arguments(grown: tuple[Journal, list[bytes], list[int]],
                                         args: tuple[int, int]) -> None:
    """Consistency proofs with sizes out of order, negative or beyond the log are UsageError."""
    j, _, _ = grown
    with pytest.raises(UsageError):
        j.consistency_proof(*args)


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_is_stored_and_written(journal: Journal, keyring: KeyRing, home: Path) -> None:
    """checkpoint() signs the head, stores the note in the DB and in checkpoints/<size>.note."""
    fill(journal, 5)
    note = journal.checkpoint(keyring)
    cp = open_checkpoint(note, keyring.verifier)
    assert (cp.size, cp.root, cp.origin) == (5, journal.head()[1], keyring.key_name)
    assert journal.latest_checkpoint() == (5, note)
    assert (home / "checkpoints" / "5.note").read_text("utf-8") == note
    assert journal.verify(verifier=keyring.verifier)["checkpoints"] == 1


def test_checkpoint_is_idempotent(journal: Journal, keyring: KeyRing, home: Path) -> None:
    """Without new entries a second checkpoint returns the same note and adds no row or file."""
    fill(journal, 3)
    first = journal.checkpoint(keyring)
    assert journal.checkpoint(keyring) == first
    assert len(journal.store.checkpoints()) == 1
    assert sorted(p.name for p in (home / "checkpoints").iterdir()) == ["3.note"]
    fill(journal, 1)
    second = journal.checkpoint(keyring)
    assert second != first
    assert [s for s, _ in journal.store.checkpoints()] == [3, 4]


def test_checkpoint_file_restored_if_missing(journal: Journal, keyring: KeyRing, home: Path) -> None:
    """A checkpoint file deleted from the folder is written again by the next checkpoint call."""
    fill(journal, 2)
    note = journal.checkpoint(keyring)
    (home / "checkpoints" / "2.note").unlink()
    assert journal.checkpoint(keyring) == note
    assert (home / "checkpoints" / "2.note").read_text("utf-8") == note


def test_checkpoint_of_empty_journal(journal: Journal, keyring: KeyRing) -> None:
    """An empty journal can be checkpointed at size 0 with the empty root, and it verifies."""
    note = journal.checkpoint(keyring)
    cp = open_checkpoint(note, keyring.verifier)
    assert (cp.size, cp.root) == (0, merkle.EMPTY_ROOT)
    assert journal.verify(verifier=keyring.verifier, since=note)["size"] == 0


def test_verify_since_accepts_older_checkpoint(journal: Journal, keyring: KeyRing) -> None:
    """verify(since=old note) proves the grown log extends the old checkpoint."""
    fill(journal, 6)
    old = journal.checkpoint(keyring)
    fill(journal, 9)
    summary = journal.verify(since=old, verifier=keyring.verifier)
    assert summary["since"]["size"] == 6 and summary["size"] == 15
