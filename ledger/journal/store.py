"""SQLite storage of the journal: the only module that imports ``sqlite3``.

Schema (format version 1; see docs/FORMAT.md):

    meta(key TEXT PRIMARY KEY, value TEXT)              format, version
    entries(seq INTEGER PRIMARY KEY, leaf BLOB, body BLOB, run TEXT, task TEXT, kind TEXT)
    nodes(level, idx, hash) WITHOUT ROWID               complete aligned subtrees, level >= 1
    heads(size INTEGER PRIMARY KEY, root BLOB, ts)      the tree head every commit produced
    checkpoints(size INTEGER PRIMARY KEY, note TEXT, ts)

Every append runs in one ``BEGIN IMMEDIATE`` transaction that reads the head, assigns the next
sequence numbers, and writes the entry rows, the new tree nodes and the new head together.
Triggers refuse UPDATE and DELETE on every table but meta, and refuse an INSERT at any seq other
than the next one (which also stops ``INSERT OR REPLACE``). Triggers are a seat belt; ``verify``
is the check.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ledger.errors import JournalConflict, JournalFormatError, LedgerError, NotFound
from ledger.journal import merkle
from ledger.journal.codec import Entry, encode_entry

FORMAT_NAME = "eval-ledger-journal"
FORMAT_VERSION = "1"
BUSY_TIMEOUT_MS = 60_000

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries(
    seq INTEGER PRIMARY KEY,
    leaf BLOB NOT NULL,
    body BLOB NOT NULL,
    run TEXT,
    task TEXT,
    kind TEXT NOT NULL
);
CREATE INDEX entries_run ON entries(run) WHERE run IS NOT NULL;
CREATE INDEX entries_runkind ON entries(kind) WHERE kind GLOB 'run.*';
CREATE TABLE nodes(level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL,
                   PRIMARY KEY(level, idx)) WITHOUT ROWID;
CREATE TABLE heads(size INTEGER PRIMARY KEY, root BLOB NOT NULL, ts INTEGER NOT NULL);
CREATE TABLE checkpoints(size INTEGER PRIMARY KEY, note TEXT NOT NULL, ts INTEGER NOT NULL);

CREATE TRIGGER entries_append_only BEFORE INSERT ON entries
WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq) + 1, 0) FROM entries)
BEGIN SELECT RAISE(ABORT, 'journal: entries are append-only (seq must be the next one)'); END;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'journal: entries cannot be updated'); END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'journal: entries cannot be deleted'); END;

CREATE TRIGGER nodes_no_dup BEFORE INSERT ON nodes
WHEN EXISTS (SELECT 1 FROM nodes WHERE level = NEW.level AND idx = NEW.idx)
BEGIN SELECT RAISE(ABORT, 'journal: tree nodes cannot be replaced'); END;
CREATE TRIGGER nodes_no_update BEFORE UPDATE ON nodes
BEGIN SELECT RAISE(ABORT, 'journal: tree nodes cannot be updated'); END;
CREATE TRIGGER nodes_no_delete BEFORE DELETE ON nodes
BEGIN SELECT RAISE(ABORT, 'journal: tree nodes cannot be deleted'); END;

CREATE TRIGGER heads_append_only BEFORE INSERT ON heads
WHEN NEW.size <= (SELECT COALESCE(MAX(size), -1) FROM heads)
BEGIN SELECT RAISE(ABORT, 'journal: tree heads only grow'); END;
CREATE TRIGGER heads_no_update BEFORE UPDATE ON heads
BEGIN SELECT RAISE(ABORT, 'journal: tree heads cannot be updated'); END;
CREATE TRIGGER heads_no_delete BEFORE DELETE ON heads
BEGIN SELECT RAISE(ABORT, 'journal: tree heads cannot be deleted'); END;

CREATE TRIGGER checkpoints_no_dup BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints WHERE size = NEW.size)
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be replaced'); END;
CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be updated'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be deleted'); END;
"""

_TABLES = {"meta", "entries", "nodes", "heads", "checkpoints"}

# One append item: (kind, data, run, task).
Item = tuple[str, dict[str, Any], str | None, str | None]


class Store:
    """A journal database on disk (or ``:memory:``)."""

    def __init__(self, conn: sqlite3.Connection, path: str, readonly: bool) -> None:
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self._frontier_size = -1
        self._frontier: dict[merkle.Key, bytes] = {}
        self._create = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False, readonly: bool = False,
             synchronous: str = "FULL") -> Store:
        spath = str(path)
        memory = spath == ":memory:"
        if not memory:
            p = Path(spath)
            if not p.exists():
                if not create or readonly:
                    raise NotFound(f"no journal at {p}: run `ledger run` or `ledger append` first")
                p.parent.mkdir(parents=True, exist_ok=True)
            elif p.is_dir():
                raise JournalFormatError(f"{p} is a directory, not a journal file")
        try:
            if readonly and not memory:
                # A read-only reader must not leave files behind. With no -wal file every committed
                # transaction is in the main file, and immutable=1 reads it without creating the
                # -shm/-wal pair; with a -wal present (a writer is active, or crashed) read through it.
                resolved = Path(spath).resolve()
                wal = resolved.with_name(resolved.name + "-wal")
                flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
                conn = sqlite3.connect(f"file:{resolved}?{flags}", uri=True,
                                       isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(spath, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            raise JournalFormatError(f"cannot open journal {spath}: {exc}") from exc
        store = cls(conn, spath, readonly)
        store._create = create or memory
        try:
            store._init_or_check(synchronous)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JournalFormatError(f"{spath} is not a journal: {exc}") from exc
        except LedgerError:
            conn.close()
            raise
        return store

    def _init_or_check(self, synchronous: str) -> None:
        c = self._conn
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly or not self._create:
                raise JournalFormatError(f"{self.path} is empty, not a journal")
            c.execute("PRAGMA journal_mode = WAL")
            c.execute(f"PRAGMA synchronous = {synchronous}")
            c.execute("BEGIN IMMEDIATE")
            try:
                again = c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if again == 0:
                    for stmt in _split_sql(_SCHEMA):
                        c.execute(stmt)
                    c.execute("INSERT INTO meta VALUES ('format', ?), ('version', ?)",
                              (FORMAT_NAME, FORMAT_VERSION))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            tables = _TABLES
        if not tables >= _TABLES:
            raise JournalFormatError(f"{self.path} is not an eval-ledger journal (tables missing)")
        meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT_NAME:
            raise JournalFormatError(f"{self.path} is not an eval-ledger journal")
        if meta.get("version") != FORMAT_VERSION:
            raise JournalFormatError(
                f"{self.path}: journal format version {meta.get('version')!r} is not supported "
                f"(this build reads version {FORMAT_VERSION})")
        if not self.readonly:
            c.execute(f"PRAGMA synchronous = {synchronous}")

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------------ writing

    @contextmanager
    def _write_tx(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise JournalConflict("journal opened read-only")
        c = self._conn
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise JournalConflict(f"could not lock the journal for writing: {exc}") from exc
        try:
            yield c
        except BaseException:
            with suppress(sqlite3.Error):
                c.execute("ROLLBACK")
            self._frontier_size = -1
            raise
        try:
            c.execute("COMMIT")
        except sqlite3.Error as exc:
            self._frontier_size = -1
            raise JournalConflict(f"commit failed: {exc}") from exc

    def append(self, items: Sequence[Item], clock: Callable[[], int]) -> list[Entry]:
        """Append items as one transaction; return the entries with their seqs and bytes."""
        if not items:
            return []
        with self._write_tx() as c:
            row = c.execute("SELECT size FROM heads ORDER BY size DESC LIMIT 1").fetchone()
            size = row[0] if row else 0
            frontier = self._load_frontier(size)
            ts = clock()
            entries = [
                encode_entry(seq=size + i, ts=ts, kind=kind, data=data, run=run, task=task)
                for i, (kind, data, run, task) in enumerate(items)
            ]
            leaves = [merkle.leaf_hash(e.raw) for e in entries]
            new_nodes, new_frontier = merkle.extend(size, frontier, leaves)
            new_size = size + len(entries)
            root = merkle.root(new_size, lambda keys: {k: new_frontier[k] for k in keys})
            try:
                c.executemany(
                    "INSERT INTO entries(seq, leaf, body, run, task, kind) VALUES (?,?,?,?,?,?)",
                    [(e.seq, lf, e.raw, e.run, e.task, e.kind) for e, lf in zip(entries, leaves, strict=True)],
                )
                if new_nodes:
                    c.executemany("INSERT INTO nodes(level, idx, hash) VALUES (?,?,?)", new_nodes)
                c.execute("INSERT INTO heads(size, root, ts) VALUES (?,?,?)", (new_size, root, ts))
            except sqlite3.IntegrityError as exc:
                raise JournalConflict(f"journal refused the append: {exc}") from exc
        self._frontier = new_frontier
        self._frontier_size = new_size
        return entries

    def _load_frontier(self, size: int) -> dict[merkle.Key, bytes]:
        if size == self._frontier_size:
            return self._frontier
        keys = merkle.frontier_keys(size)
        return dict(self.fetch_nodes(keys))

    def add_checkpoint(self, size: int, note: str, ts: int) -> bool:
        """Record a signed checkpoint; False when one for that size exists already."""
        with self._write_tx() as c:
            if c.execute("SELECT 1 FROM checkpoints WHERE size = ?", (size,)).fetchone():
                return False
            c.execute("INSERT INTO checkpoints(size, note, ts) VALUES (?,?,?)", (size, note, ts))
        return True

    # ------------------------------------------------------------------ reading

    def fetch_nodes(self, keys: Sequence[merkle.Key]) -> dict[merkle.Key, bytes]:
        """Return the hashes of (level, index) keys; level 0 comes from the entry rows."""
        out: dict[merkle.Key, bytes] = {}
        leaves = [k[1] for k in keys if k[0] == 0]
        inner = [k for k in keys if k[0] != 0]
        c = self._conn
        for chunk in _chunks(leaves, 400):
            marks = ",".join("?" * len(chunk))
            for seq, leaf in c.execute(f"SELECT seq, leaf FROM entries WHERE seq IN ({marks})", chunk):
                out[(0, seq)] = leaf
        for chunk2 in _chunks(inner, 200):
            cond = " OR ".join("(level = ? AND idx = ?)" for _ in chunk2)
            params = [v for k in chunk2 for v in k]
            for level, idx, h in c.execute(f"SELECT level, idx, hash FROM nodes WHERE {cond}", params):
                out[(level, idx)] = h
        missing = [k for k in keys if k not in out]
        if missing:
            raise KeyError(f"tree nodes missing from the journal: {missing[:4]}")
        return out

    def head(self) -> tuple[int, bytes]:
        row = self._conn.execute("SELECT size, root FROM heads ORDER BY size DESC LIMIT 1").fetchone()
        if row is None:
            return 0, merkle.EMPTY_ROOT
        return int(row[0]), bytes(row[1])

    def rows(self, *, start: int = 0, stop: int | None = None, run: str | None = None,
             task: str | None = None, kind: str | None = None,
             batch: int = 5000) -> Iterator[tuple[int, bytes]]:
        """Yield (seq, body) in seq order, filtered on the indexed columns."""
        where = ["seq >= ?"]
        params: list[Any] = [start]
        if stop is not None:
            where.append("seq < ?")
            params.append(stop)
        if run is not None:
            where.append("run = ?")
            params.append(run)
        if task is not None:
            where.append("task = ?")
            params.append(task)
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        sql = f"SELECT seq, body FROM entries WHERE {' AND '.join(where)} ORDER BY seq"
        cur = self._conn.execute(sql, params)
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return
            yield from chunk

    def raw_rows(self, batch: int = 20000) -> Iterator[tuple[Any, ...]]:
        """Every entry row for verification: (seq, leaf, body, run, task, kind), all as BLOBs.

        Reading every column as a BLOB means a tampered column of another SQLite type cannot
        crash the reader; ``misfiled_rows`` reports columns stored with the wrong type.
        """
        cur = self._conn.execute(
            "SELECT seq, CAST(leaf AS BLOB), CAST(body AS BLOB), CAST(run AS BLOB), "
            "CAST(task AS BLOB), CAST(kind AS BLOB) FROM entries ORDER BY seq")
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return
            yield from chunk

    def misfiled_rows(self) -> tuple[int, str] | None:
        """The first row whose columns have the wrong SQLite type, with the types found."""
        row = self._conn.execute(
            "SELECT seq, typeof(leaf) || ',' || typeof(body) || ',' || typeof(run) || ',' || "
            "typeof(task) || ',' || typeof(kind) FROM entries WHERE typeof(leaf) != 'blob' "
            "OR typeof(body) != 'blob' OR typeof(run) NOT IN ('text', 'null') "
            "OR typeof(task) NOT IN ('text', 'null') OR typeof(kind) != 'text' "
            "ORDER BY seq LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def all_nodes(self) -> Iterator[tuple[int, int, bytes, str]]:
        """(level, idx, hash as BLOB, SQLite type of the stored hash) in (level, idx) order."""
        yield from self._conn.execute(
            "SELECT level, idx, CAST(hash AS BLOB), typeof(hash) FROM nodes ORDER BY level, idx")

    def node_levels(self) -> list[int]:
        return [int(r[0]) if isinstance(r[0], int) else r[0]
                for r in self._conn.execute("SELECT DISTINCT level FROM nodes ORDER BY level")]

    def level_nodes(self, level: int) -> list[tuple[int, bytes]]:
        """(idx, hash as BLOB) of one level, in idx order."""
        return self._conn.execute(
            "SELECT idx, CAST(hash AS BLOB) FROM nodes WHERE level = ? ORDER BY idx", (level,)).fetchall()

    def misfiled_node(self) -> tuple[int, int, str] | None:
        row = self._conn.execute(
            "SELECT level, idx, typeof(hash) FROM nodes WHERE typeof(hash) != 'blob' "
            "OR typeof(level) != 'integer' OR typeof(idx) != 'integer' ORDER BY level, idx LIMIT 1").fetchone()
        return None if row is None else (row[0], row[1], str(row[2]))

    def all_heads(self) -> list[tuple[int, bytes, str]]:
        """(size, root as BLOB, SQLite type of the stored root) in size order."""
        return [(s, bytes(r) if r is not None else b"", t) for s, r, t in self._conn.execute(
            "SELECT size, CAST(root AS BLOB), typeof(root) FROM heads ORDER BY size")]

    def checkpoints(self) -> list[tuple[int, str]]:
        return [(int(s), str(n)) for s, n in self._conn.execute("SELECT size, note FROM checkpoints ORDER BY size")]

    def entry_count(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def run_level_rows(self) -> list[tuple[int, bytes]]:
        return list(self._conn.execute(
            "SELECT seq, body FROM entries WHERE kind GLOB 'run.*' ORDER BY seq"))

    def leaf_of(self, seq: int) -> bytes | None:
        row = self._conn.execute("SELECT leaf FROM entries WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else bytes(row[0])

    def seq_of_leaf(self, leaf: bytes) -> int | None:
        row = self._conn.execute("SELECT seq FROM entries WHERE leaf = ?", (leaf,)).fetchone()
        return None if row is None else int(row[0])


def _chunks(seq: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _split_sql(script: str) -> list[str]:
    """Split the schema into statements (trigger bodies contain ';' so split on 'END;')."""
    out: list[str] = []
    buf: list[str] = []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if not text:
            buf = []
            continue
        if text.upper().startswith("CREATE TRIGGER"):
            if text.upper().endswith("END;"):
                out.append(text)
                buf = []
        elif text.endswith(";"):
            out.append(text)
            buf = []
    return out
