"""The journal's SQLite schema as text, and the pure helpers of an append: no ``sqlite3`` here
(``ledger/journal/store.py`` is the only module that imports it and runs these statements).

Schema (format version 2; see docs/FORMAT.md):

    meta(key TEXT PRIMARY KEY, value TEXT)            format, version, tile_height
    entries(seq INTEGER PRIMARY KEY, body BLOB)        the exact entry bytes that are hashed
    spans(first INTEGER PRIMARY KEY, last, run, task, kind, root, ts)
                                                      seqs first..last share run/task/kind; the
                                                      last span of a commit holds its tree head
    runs(run TEXT PRIMARY KEY, first) WITHOUT ROWID   the first span of every run
    tiles(level, idx, hashes, root) WITHOUT ROWID     full tiles of the Merkle tree (tiles.py)
    checkpoints(size INTEGER PRIMARY KEY, note TEXT, ts)

Triggers refuse UPDATE and DELETE on every table but meta, and refuse an INSERT at any seq other
than the next one (which also stops ``INSERT OR REPLACE``). Triggers are a seat belt; ``verify``
is the check.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ledger.errors import UsageError
from ledger.journal.codec import MAX_ENTRY_BYTES, Entry

FORMAT_NAME = "eval-ledger-journal"
FORMAT_VERSION = "2"
BUSY_TIMEOUT_MS = 60_000

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries(seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE spans(
    first INTEGER PRIMARY KEY,
    last INTEGER NOT NULL,
    run TEXT,
    task TEXT,
    kind TEXT NOT NULL,
    root BLOB,
    ts INTEGER
);
CREATE INDEX spans_runkind ON spans(kind) WHERE kind GLOB 'run.*';
CREATE TABLE runs(run TEXT PRIMARY KEY, first INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE tiles(level INTEGER NOT NULL, idx INTEGER NOT NULL, hashes BLOB NOT NULL,
                   root BLOB NOT NULL, PRIMARY KEY(level, idx)) WITHOUT ROWID;
CREATE TABLE checkpoints(size INTEGER PRIMARY KEY, note TEXT NOT NULL, ts INTEGER NOT NULL);

CREATE TRIGGER entries_append_only BEFORE INSERT ON entries
WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq) + 1, 0) FROM entries)
BEGIN SELECT RAISE(ABORT, 'journal: entries are append-only (seq must be the next one)'); END;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'journal: entries cannot be updated'); END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'journal: entries cannot be deleted'); END;

CREATE TRIGGER spans_append_only BEFORE INSERT ON spans
WHEN NEW.first IS NOT COALESCE((SELECT last + 1 FROM spans ORDER BY first DESC LIMIT 1), 0)
  OR typeof(NEW.last) != 'integer' OR NEW.last < NEW.first
BEGIN SELECT RAISE(ABORT, 'journal: spans are append-only (first must follow the last span)'); END;
CREATE TRIGGER spans_no_update BEFORE UPDATE ON spans
BEGIN SELECT RAISE(ABORT, 'journal: spans cannot be updated'); END;
CREATE TRIGGER spans_no_delete BEFORE DELETE ON spans
BEGIN SELECT RAISE(ABORT, 'journal: spans cannot be deleted'); END;

CREATE TRIGGER tiles_no_dup BEFORE INSERT ON tiles
WHEN EXISTS (SELECT 1 FROM tiles WHERE level = NEW.level AND idx = NEW.idx)
BEGIN SELECT RAISE(ABORT, 'journal: tiles cannot be replaced'); END;
CREATE TRIGGER tiles_no_update BEFORE UPDATE ON tiles
BEGIN SELECT RAISE(ABORT, 'journal: tiles cannot be updated'); END;
CREATE TRIGGER tiles_no_delete BEFORE DELETE ON tiles
BEGIN SELECT RAISE(ABORT, 'journal: tiles cannot be deleted'); END;

CREATE TRIGGER runs_no_dup BEFORE INSERT ON runs
WHEN EXISTS (SELECT 1 FROM runs WHERE run = NEW.run)
  OR typeof(NEW.run) != 'text' OR typeof(NEW.first) != 'integer'
  OR NOT EXISTS (SELECT 1 FROM spans WHERE first = NEW.first AND run = NEW.run)
BEGIN SELECT RAISE(ABORT, 'journal: a run is indexed once, at a span of that run'); END;
CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'journal: runs cannot be updated'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'journal: runs cannot be deleted'); END;

CREATE TRIGGER checkpoints_no_dup BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints WHERE size = NEW.size)
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be replaced'); END;
CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be updated'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'journal: checkpoints cannot be deleted'); END;
"""

_TABLES = {"meta", "entries", "spans", "runs", "tiles", "checkpoints"}

# One append item: (kind, data, run, task).
Item = tuple[str, dict[str, Any], str | None, str | None]
# One span row as stored: (first, last, run, task, kind, root, ts); root and ts are the tree
# head on the last span of a commit and None on the others.
Span = tuple[int, int, str | None, str | None, str, bytes | None, int | None]


def _refuse_oversized(entries: Sequence[Entry]) -> None:
    big = next(e for e in entries if len(e.raw) > MAX_ENTRY_BYTES)
    raise UsageError(f"entry of kind {big.kind!r} is {len(big.raw)} bytes encoded; one entry holds at most "
                     f"{MAX_ENTRY_BYTES} bytes (16 MiB, docs/FORMAT.md)")


def _spans_of(size: int, items: Sequence[Item], root: bytes, ts: int) -> list[Span]:
    """Runs of consecutive items with the same run, task and kind, as span rows; the last span
    carries the commit's tree head (root, ts)."""
    if len(items) == 1:
        kind, _data, run, task = items[0]
        return [(size, size, run, task, kind, root, ts)]
    out: list[Span] = []
    first = size
    prev_kind, _d, prev_run, prev_task = items[0]
    for offset, (kind, _data, run, task) in enumerate(items):
        if kind != prev_kind or run != prev_run or task != prev_task:
            seq = size + offset
            out.append((first, seq - 1, prev_run, prev_task, prev_kind, None, None))
            first, prev_run, prev_task, prev_kind = seq, run, task, kind
    out.append((first, size + len(items) - 1, prev_run, prev_task, prev_kind, root, ts))
    return out


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
