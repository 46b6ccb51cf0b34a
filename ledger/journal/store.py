"""SQLite storage of the journal: the only module that imports ``sqlite3``.

The schema and the pure helpers of an append are ``ledger/journal/schema.py``. Every append
runs in one ``BEGIN IMMEDIATE`` transaction that reads the head, assigns the next sequence
numbers, and writes the entry rows, their spans (the last one with the new tree head), any new
run and the tiles that became full together.
"""

from __future__ import annotations

import functools
import inspect
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ledger.errors import (
    JournalConflict,
    JournalFormatError,
    JournalUnreadable,
    LedgerError,
    NotFound,
    UsageError,
)
from ledger.journal import merkle
from ledger.journal.codec import MAX_ENTRY_BYTES, Entry, encode_entries
from ledger.journal.schema import (
    _SCHEMA,
    _TABLES,
    BUSY_TIMEOUT_MS,
    FORMAT_NAME,
    FORMAT_VERSION,
    Item,
    Span,
    _chunks,
    _refuse_oversized,
    _spans_of,
    _split_sql,
)
from ledger.journal.tiles import (
    DEFAULT_HEIGHT,
    HASH_SIZE,
    TileEdge,
    check_height,
    nodes_from_tiles,
)

_SQLITE_MAX_INT = 2**63 - 1  # seqs and indexes beyond SQLite's integer are not in any journal


class Store:
    """A journal database on disk (or ``:memory:``)."""

    def __init__(self, conn: sqlite3.Connection, path: str, readonly: bool) -> None:
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self.tile_height = DEFAULT_HEIGHT
        self._edge: TileEdge | None = None
        self._known_runs: set[str] = set()  # runs this store saw indexed (rows are never removed)
        self._create = False
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file when opened
        self._broken: str | None = None  # why this store stopped writing

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False, readonly: bool = False,
             synchronous: str = "FULL", tile_height: int = DEFAULT_HEIGHT) -> Store:
        """Open (or with ``create``, make) a journal; ``tile_height`` applies to a new one only."""
        check_height(tile_height)
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
            store._init_or_check(synchronous, tile_height)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JournalFormatError(f"{spath} is not a journal: {exc}") from exc
        except LedgerError:
            conn.close()
            raise
        if not memory and not readonly:
            st = os.stat(spath)
            store._identity = (st.st_dev, st.st_ino)
        return store

    # ------------------------------------------------------------------ faults

    def _check_file(self) -> None:
        """Before each commit: the file must still be the one this store opened (same device and
        inode) and still start with the SQLite header. Otherwise something outside rewrote or
        replaced the journal: stop writing (and keep what this store still holds open)."""
        if self._broken is not None:
            raise JournalUnreadable(self._broken)
        if self._identity is None:
            return
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as fh:
                header = fh.read(len(_SQLITE_MAGIC))
            same = (st.st_dev, st.st_ino) == self._identity
        except OSError as exc:
            same, header = False, b""
            why = f"the journal file {self.path} is gone ({exc.strerror})"
        else:
            why = f"the journal file {self.path} was replaced by another file"
        if same and header == _SQLITE_MAGIC:
            return
        if same:
            why = f"the journal file {self.path} was overwritten (its SQLite header is gone)"
            rescued = None
        else:
            rescued = self._rescue()
        self._broken = (f"{why} while the harness held it open; no more entries are written"
                        + (f"; the journal as this process held it is saved in {rescued} (verify it "
                           f"with `ledger --ledger {Path(rescued).parent} verify --vkey VKEY --since "
                           "CHECKPOINT`)" if rescued else ""))
        raise JournalUnreadable(self._broken)

    def _rescue(self) -> str | None:
        """Copy the database this connection still holds (the replaced file's inode) aside."""
        folder = Path(self.path).parent / f"rescued-{time.time_ns()}"
        try:
            folder.mkdir(parents=True)
            dest = sqlite3.connect(str(folder / "journal.db"))
            try:
                self._conn.backup(dest)
            finally:
                dest.close()
        except (OSError, sqlite3.Error):
            return None
        return str(folder / "journal.db")

    def _init_or_check(self, synchronous: str, tile_height: int) -> None:
        c = self._conn
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly or not self._create:
                raise JournalFormatError(f"{self.path} is empty, not a journal")
            _set_wal(c)
            c.execute(f"PRAGMA synchronous = {synchronous}")
            c.execute("BEGIN IMMEDIATE")
            try:
                again = c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if again == 0:
                    for stmt in _split_sql(_SCHEMA):
                        c.execute(stmt)
                    c.execute("INSERT INTO meta VALUES ('format', ?), ('version', ?), ('tile_height', ?)",
                              (FORMAT_NAME, FORMAT_VERSION, str(tile_height)))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        meta: dict[Any, Any] = {}
        if "meta" in tables:
            meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT_NAME:
            raise JournalFormatError(f"{self.path} is not an eval-ledger journal")
        if meta.get("version") != FORMAT_VERSION:
            raise JournalFormatError(
                f"{self.path}: journal format version {meta.get('version')!r} is not supported "
                f"(this build reads version {FORMAT_VERSION})")
        if not tables >= _TABLES:
            raise JournalFormatError(f"{self.path} is not an eval-ledger journal (tables missing)")
        try:
            self.tile_height = check_height(int(meta.get("tile_height", "")))
        except (ValueError, UsageError) as exc:
            raise JournalFormatError(f"{self.path}: journal meta has a bad tile_height "
                                     f"{meta.get('tile_height')!r}") from exc
        if not self.readonly:
            c.execute(f"PRAGMA synchronous = {synchronous}")

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------------ writing

    def _begin(self) -> sqlite3.Connection:
        """Start a write transaction (``BEGIN IMMEDIATE``: the write lock is taken now)."""
        if self.readonly:
            raise JournalConflict("journal opened read-only")
        self._check_file()
        c = self._conn
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise JournalConflict(f"could not lock the journal for writing: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise JournalUnreadable(f"the journal {self.path} can no longer be read: {exc}") from exc
        return c

    def _abort(self) -> None:
        """Roll back the open transaction; the cached right edge may describe it, so drop it."""
        with suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")
        self._edge = None

    def _commit(self) -> None:
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abort()
            raise JournalConflict(f"commit failed: {exc}") from exc

    @contextmanager
    def _write_tx(self) -> Iterator[sqlite3.Connection]:
        c = self._begin()
        try:
            yield c
        except BaseException:
            self._abort()
            raise
        self._commit()

    def append(self, items: Sequence[Item], clock: Callable[[], int]) -> list[Entry]:
        """Append items as one transaction; return the entries with their seqs and bytes."""
        if not items:
            return []
        c = self._begin()  # not _write_tx: a generator context manager costs more on this hot path
        try:
            row = c.execute("SELECT last FROM spans ORDER BY first DESC LIMIT 1").fetchone()
            size = row[0] + 1 if row else 0
            edge = self._edge_at(size)
            ts = clock()
            entries = encode_entries(size, ts, items)
            raws = [e.raw for e in entries]
            if max(map(len, raws)) > MAX_ENTRY_BYTES:
                _refuse_oversized(entries)
            grown, tiles = edge.extended(merkle.leaf_hashes(raws))
            root = grown.root()
            try:
                c.executemany("INSERT INTO entries(seq, body) VALUES (?,?)",
                              zip(range(size, size + len(raws)), raws, strict=True))
                spans = _spans_of(size, items, root, ts)
                c.executemany("INSERT INTO spans(first, last, run, task, kind, root, ts) VALUES (?,?,?,?,?,?,?)",
                              spans)
                new_runs = self._new_runs(c, spans)
                if tiles:
                    c.executemany("INSERT INTO tiles(level, idx, hashes, root) VALUES (?,?,?,?)", tiles)
            except sqlite3.IntegrityError as exc:
                raise JournalConflict(f"journal refused the append: {exc}") from exc
        except BaseException:
            self._abort()
            raise
        self._commit()
        self._edge = grown
        if new_runs:
            self._known_runs.update(new_runs)
        return entries

    def _new_runs(self, c: sqlite3.Connection, spans: list[Span]) -> list[str]:
        """Index the runs that first appear in ``spans``; return the names now known to exist."""
        known = self._known_runs
        seen: list[str] = []
        if len(spans) == 1 and (spans[0][2] is None or spans[0][2] in known):
            return seen
        for first, _last, run, *_rest in spans:
            if run is None or run in known or run in seen:
                continue
            seen.append(run)
            c.execute("INSERT INTO runs(run, first) SELECT ?, ? WHERE NOT EXISTS "
                      "(SELECT 1 FROM runs WHERE run = ?)", (run, first, run))
        return seen

    def _edge_at(self, size: int) -> TileEdge:
        """The right edge of the tree at ``size`` (cached from this writer's last commit)."""
        edge = self._edge
        if edge is not None and edge.size == size:
            return edge
        h = self.tile_height
        parts: list[bytes] = []
        for level, (lo, hi) in enumerate(TileEdge.partial_ranges(size, h)):
            parts.append(b"".join(self._level_hashes(level, lo, hi)))
        return TileEdge(h, size, parts)

    def _level_hashes(self, tile_level: int, lo: int, hi: int) -> list[bytes]:
        """Hashes at tree level ``h*tile_level``, indices lo..hi-1, derived from the level below.

        Level 0 hashes are the leaf hashes of the entry bytes; a level-``h*k`` hash is the root of
        the full tile ``(k-1, index)``, stored with it. Used for the right edge, where tiles are
        not full yet.
        """
        if hi <= lo:
            return []
        c = self._conn
        if tile_level == 0:
            rows = c.execute("SELECT seq, CAST(body AS BLOB) FROM entries WHERE seq >= ? AND seq < ? ORDER BY seq",
                             (lo, hi)).fetchall()
            if [r[0] for r in rows] != list(range(lo, hi)) or any(type(r[1]) is not bytes for r in rows):
                raise KeyError(f"entries {lo}..{hi - 1} are missing or malformed")
            return merkle.leaf_hashes(r[1] for r in rows)
        rows = c.execute("SELECT idx, CAST(root AS BLOB) FROM tiles WHERE level = ? AND idx >= ? AND idx < ? "
                         "ORDER BY idx", (tile_level - 1, lo, hi)).fetchall()
        if ([r[0] for r in rows] != list(range(lo, hi))
                or any(type(r[1]) is not bytes or len(r[1]) != HASH_SIZE for r in rows)):
            raise KeyError(f"tiles ({tile_level - 1}, {lo}..{hi - 1}) are missing or malformed")
        return [r[1] for r in rows]

    def check_sound(self) -> None:
        """Before a writer appends: SQLite's own page check (``PRAGMA quick_check``) and a tree
        head that is readable. ``JournalUnreadable`` (one line, with what to do) otherwise, so a
        damaged file is never appended to."""
        try:
            problems = [r[0] for r in self._conn.execute("PRAGMA quick_check(5)").fetchall()]
            if problems == ["ok"]:
                self.head()
                return
            detail = "; ".join(" ".join(str(p).replace("*", "").split()) for p in problems)
        except (sqlite3.DatabaseError, JournalFormatError) as exc:
            detail = str(exc)
        raise JournalUnreadable(
            f"the journal {self.path} is damaged ({detail}); nothing was appended. `ledger verify` "
            "names the first bad entry; keep the file as it is, and run on a new journal "
            "(`--ledger NEWDIR`) or on a copy restored from a backup")

    def leaf_level(self, size: int) -> bytes:
        """The leaf hashes of entries 0..size-1, packed 32 bytes per seq: read from the stored
        level-0 tiles where they are full, hashed from the entries' bytes on the right edge.
        ``KeyError`` when a tile or entry is missing or malformed."""
        h = self.tile_height
        full = size >> h
        tile_bytes = HASH_SIZE << h
        rows = self._conn.execute("SELECT idx, CAST(hashes AS BLOB) FROM tiles WHERE level = 0 "
                                  "AND idx < ? ORDER BY idx", (full,)).fetchall()
        if ([r[0] for r in rows] != list(range(full))
                or any(type(r[1]) is not bytes or len(r[1]) != tile_bytes for r in rows)):
            raise KeyError(f"level-0 tiles 0..{full - 1} are missing or malformed")
        return b"".join([*(r[1] for r in rows), *self._level_hashes(0, full << h, size)])

    def add_checkpoint(self, size: int, note: str, ts: int) -> bool:
        """Record a signed checkpoint; False when one for that size exists already."""
        with self._write_tx() as c:
            if c.execute("SELECT 1 FROM checkpoints WHERE size = ?", (size,)).fetchone():
                return False
            c.execute("INSERT INTO checkpoints(size, note, ts) VALUES (?,?,?)", (size, note, ts))
        return True

    # ------------------------------------------------------------------ reading

    def fetch_nodes(self, keys: Sequence[merkle.Key]) -> dict[merkle.Key, bytes]:
        """Return the hashes of complete-subtree keys ``(level, index)``, read from the tiles
        (``tiles.nodes_from_tiles``: at the right edge, from the entries or full tiles one level
        down). ``KeyError`` for a node the journal does not hold."""
        return nodes_from_tiles(keys, self.tile_height, _SQLITE_MAX_INT, self._tiles, self._level_hashes)

    def _tiles(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored full tiles among ``keys`` (a malformed stored tile counts as absent)."""
        out: dict[tuple[int, int], bytes] = {}
        tile_bytes = HASH_SIZE << self.tile_height
        c = self._conn
        for chunk in _chunks(keys, 200):
            cond = " OR ".join("(level = ? AND idx = ?)" for _ in chunk)
            params = [v for k in chunk for v in k]
            for level, idx, blob in c.execute(f"SELECT level, idx, CAST(hashes AS BLOB) FROM tiles WHERE {cond}",
                                              params):
                if type(blob) is bytes and len(blob) == tile_bytes:
                    out[(level, idx)] = blob
        return out

    def head(self) -> tuple[int, bytes]:
        row = self._conn.execute(
            "SELECT last + 1, CAST(root AS BLOB) FROM spans ORDER BY first DESC LIMIT 1").fetchone()
        if row is None:
            return 0, merkle.EMPTY_ROOT
        if row[1] is None:
            raise JournalFormatError(f"{self.path}: the last span has no tree head (run `ledger verify`)")
        return int(row[0]), bytes(row[1])

    def rows(self, *, start: int = 0, stop: int | None = None, run: str | None = None,
             task: str | None = None, kind: str | Collection[str] | None = None,
             batch: int = 5000) -> Iterator[tuple[int, bytes]]:
        """Yield (seq, body) in seq order, filtered through the span index (``kind``: one, or
        a collection of kinds)."""
        params: list[Any]
        if run is None and task is None and kind is None:
            where, params = ["seq >= ?"], [start]
            if stop is not None:
                where.append("seq < ?")
                params.append(stop)
            sql = f"SELECT seq, body FROM entries WHERE {' AND '.join(where)} ORDER BY seq"
        else:
            # Spans are scanned in rowid (first) order from the span holding ``start``, or from
            # the run's first span when a run is asked for; each span is a rowid range of entries.
            c = self._conn
            row = c.execute("SELECT first FROM spans WHERE first <= ? ORDER BY first DESC LIMIT 1",
                            (start,)).fetchone()
            lo = row[0] if row else 0
            if run is not None:
                row = c.execute("SELECT first FROM runs WHERE run = ?", (run,)).fetchone()
                if row is None:
                    return
                if type(row[0]) is not int:
                    raise JournalFormatError(f"{self.path}: the runs index is damaged (run `ledger verify`)")
                lo = max(lo, row[0])
            where, params = ["s.first >= ?", "e.seq >= ?"], [lo, start]
            if stop is not None:
                where += ["s.first < ?", "e.seq < ?"]
                params += [stop, stop]
            for column, value in (("run", run), ("task", task), ("kind", kind)):
                if isinstance(value, str):
                    where.append(f"s.{column} = ?")
                    params.append(value)
                elif value is not None:  # kinds: any of them
                    where.append(f"s.{column} IN ({', '.join('?' * len(value))})")
                    params += sorted(value)
            sql = ("SELECT e.seq, e.body FROM spans AS s CROSS JOIN entries AS e "
                   f"ON e.seq BETWEEN s.first AND s.last WHERE {' AND '.join(where)} "
                   "ORDER BY s.first, e.seq")
        cur = self._conn.execute(sql, params)
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return
            yield from chunk

    def run_level_rows(self) -> list[tuple[int, bytes]]:
        """(seq, body) of every entry whose kind starts with ``run.``."""
        return list(self._conn.execute(
            "SELECT e.seq, e.body FROM spans AS s CROSS JOIN entries AS e "
            "ON e.seq BETWEEN s.first AND s.last WHERE s.kind GLOB 'run.*' ORDER BY s.first, e.seq"))

    def find_leaf(self, leaf: bytes) -> int | None:
        """The seq of the entry whose leaf hash is ``leaf`` (a scan of the level-0 tiles)."""
        if len(leaf) != HASH_SIZE:
            return None
        h = self.tile_height
        size = self.head()[0]
        for idx, blob in self._conn.execute("SELECT idx, CAST(hashes AS BLOB) FROM tiles WHERE level = 0 "
                                            "ORDER BY idx"):
            if type(blob) is not bytes:
                continue
            pos = blob.find(leaf)
            while pos >= 0:
                if pos % HASH_SIZE == 0:
                    return int((idx << h) + pos // HASH_SIZE)
                pos = blob.find(leaf, pos + 1)
        lo = (size >> h) << h
        for seq, body in self._conn.execute("SELECT seq, CAST(body AS BLOB) FROM entries WHERE seq >= ? "
                                            "ORDER BY seq", (lo,)):
            if type(body) is bytes and merkle.leaf_hash(body) == leaf:
                return int(seq)
        return None

    # ------------------------------------------------------------------ raw reads for verify

    def body_rows(self, batch: int = 20000) -> Iterator[list[tuple[Any, Any]]]:
        """Every entry row as (seq, body as BLOB), in chunks; ``misfiled_body`` finds mistyped ones."""
        cur = self._conn.execute("SELECT seq, CAST(body AS BLOB) FROM entries ORDER BY seq")
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return
            yield chunk

    def misfiled_body(self) -> tuple[int, str] | None:
        """The first entry whose body is not stored as a BLOB, with the type found."""
        row = self._conn.execute("SELECT seq, typeof(body) FROM entries WHERE typeof(body) != 'blob' "
                                 "ORDER BY seq LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def span_rows(self) -> list[tuple[Any, ...]]:
        """Every span as (first, last, run, task, kind) with text columns as BLOBs, then their types."""
        return self._conn.execute(
            "SELECT first, last, CAST(run AS BLOB), CAST(task AS BLOB), CAST(kind AS BLOB), "
            "typeof(last) || ',' || typeof(run) || ',' || typeof(task) || ',' || typeof(kind) "
            "FROM spans ORDER BY first").fetchall()

    def tile_levels(self) -> list[Any]:
        return [r[0] for r in self._conn.execute("SELECT DISTINCT level FROM tiles ORDER BY level")]

    def level_tiles(self, level: Any) -> list[tuple[Any, bytes, bytes, str]]:
        """(idx, hashes, root, "type,type") of one tile level in idx order, columns read as BLOBs."""
        return self._conn.execute(
            "SELECT idx, CAST(hashes AS BLOB), CAST(root AS BLOB), typeof(hashes) || ',' || typeof(root) "
            "FROM tiles WHERE level = ? ORDER BY idx", (level,)).fetchall()

    def all_tiles(self) -> list[tuple[Any, Any, bytes, bytes]]:
        """(level, idx, hashes, root) of every stored tile, in (level, idx) order."""
        return self._conn.execute("SELECT level, idx, CAST(hashes AS BLOB), CAST(root AS BLOB) "
                                  "FROM tiles ORDER BY level, idx").fetchall()

    def all_heads(self) -> list[tuple[int, bytes, str]]:
        """(size, root as BLOB, SQLite type of the stored root) of every recorded tree head, in
        order: the spans that carry a root, with size = last + 1."""
        return [(s, bytes(r) if r is not None else b"", t) for s, r, t in self._conn.execute(
            "SELECT last + 1, CAST(root AS BLOB), typeof(root) FROM spans WHERE root IS NOT NULL "
            "ORDER BY first")]

    def run_rows(self) -> list[tuple[Any, Any, str]]:
        """(run as BLOB, first, "type,type") of every row of the runs index."""
        return self._conn.execute("SELECT CAST(run AS BLOB), first, typeof(run) || ',' || typeof(first) "
                                  "FROM runs ORDER BY first").fetchall()

    def checkpoints(self) -> list[tuple[int, str]]:
        """(size, note) in size order; a note that is not UTF-8 text keeps replacement characters
        (its signature check then fails) instead of breaking the read."""
        return [(int(s), bytes(n).decode("utf-8", errors="replace")) for s, n in self._conn.execute(
            "SELECT size, CAST(note AS BLOB) FROM checkpoints ORDER BY size")]

    def misfiled_checkpoint(self) -> tuple[int, str] | None:
        """The first checkpoint row whose note is not stored as TEXT, with the type found."""
        row = self._conn.execute("SELECT size, typeof(note) FROM checkpoints WHERE typeof(note) != 'text' "
                                 "ORDER BY size LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def entry_count(self) -> int:
        """Rows in the entries table (as numbered: the highest seq + 1)."""
        return int(self._conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM entries").fetchone()[0])


def _set_wal(c: sqlite3.Connection) -> None:
    """Switch a new database to WAL. SQLite can refuse the switch with "database is locked"
    without calling the busy handler while another process creates the same journal, so retry
    for as long as the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.002
    while True:
        try:
            c.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _unreadable(func: Any) -> Any:
    """Turn an SQLite error other than a refused write into JournalUnreadable (one clear line)."""
    if inspect.isgeneratorfunction(func):
        @functools.wraps(func)
        def gen(self: Store, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from func(self, *args, **kwargs)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as exc:
                raise JournalUnreadable(f"the journal {self.path} can no longer be read: {exc}") from exc
        return gen

    @functools.wraps(func)
    def call(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(self, *args, **kwargs)
        except sqlite3.IntegrityError:
            raise
        except sqlite3.DatabaseError as exc:
            raise JournalUnreadable(f"the journal {self.path} can no longer be read: {exc}") from exc
    return call


for _name in ("append", "add_checkpoint", "fetch_nodes", "head", "rows", "run_level_rows", "leaf_level",
              "find_leaf", "body_rows", "misfiled_body", "span_rows", "tile_levels", "level_tiles",
              "all_tiles", "all_heads", "run_rows", "checkpoints", "misfiled_checkpoint",
              "entry_count"):
    setattr(Store, _name, _unreadable(getattr(Store, _name)))

