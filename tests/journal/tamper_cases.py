"""The tamper corpus, as data: one named case per attack on a journal, and the check it must trip.

Every journal case starts from the same baseline (see ``build_baseline``): 12 entries appended in
batches of 1, 3, 4 and 4 (tree heads at sizes 1, 4, 8 and 12), with signed checkpoints at sizes 8
and 12, each in the database and in ``checkpoints/<size>.note``. An auditor also kept a copy of the
checkpoint at 12 (``Baseline.note12``) outside the ledger directory.

The baseline is a format-2 journal created with ``tile_height=1`` (tiles of 2 hashes), so that 12
entries already fill every tile level: level 0 holds 6 tiles (leaf hashes 0..11), level 1 holds 3
(tree level 1, each covering 4 leaves) and level 2 holds 1 (tree level 2, covering leaves 0..7);
tree level 3 has a single node, so no tile. A hash at position ``j`` of tile ``(k, t)`` is tree node
``(k, 2t + j)``, and verify names it by its first leaf, ``(2t + j) << k``. The entries form 7 spans:
``[0] [1-2] [3] [4-6] [7] [8-10] [11]`` (consecutive entries of one append with the same
run/task/kind share a span). The last span of each append carries that commit's tree head in its
``root``/``ts`` columns (size = ``last + 1``): the spans at 0, 3, 7 and 11 hold the heads at sizes
1, 4, 8 and 12, the others hold NULL. Every entry belongs to ``run-a``, so the runs index holds
one row, ``('run-a', 0)``.

A case's ``mutate`` acts like an attacker with write access to the ledger directory: it edits the
database with raw ``sqlite3`` (dropping the append-only triggers first, because triggers are a seat
belt and not the security boundary) or edits the checkpoint files. ``check`` and ``seq`` say what
``Journal.verify`` must then report; ``check=None`` marks an attack that verify cannot see (the
documented limit in docs/THREATS.md), and the test asserts that it passes. ``since=True`` runs
verify with the auditor's external checkpoint. ``bug`` marks a case verify gets wrong today (the
test expects it to fail, strictly, so that a fix shows up).

``WIDE_CASES`` repeat the tile attacks on a journal with the default tile height 4 and 300 entries
(``build_wide``): 18 full level-0 tiles (leaves 0..287), one level-1 tile (tree level 4, leaves
0..255), and a tail of 12 entries whose leaf hashes are stored nowhere.

Proof cases (``PROOF_CASES``) corrupt a proof the journal produced and name the check that the
RFC 6962 verifiers in ``ledger.journal.merkle`` must raise.
"""

from __future__ import annotations

import base64
import itertools
import random
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from ledger.journal import merkle
from ledger.journal.codec import encode_entry
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.journal.note import Checkpoint, sign_checkpoint
from ledger.journal.tiles import HASH_SIZE, TileEdge, subtree_root

KEY_NAME = "eval-ledger/test-log"
CLOCK_START = 1_700_000_000_000_000_000


def seeded_rng(seed: int) -> Callable[[int], bytes]:
    """A deterministic stand-in for ``os.urandom`` so keys reproduce byte for byte."""
    return random.Random(seed).randbytes


def counter_clock(start: int = CLOCK_START) -> Callable[[], int]:
    """A clock that ticks one microsecond per call (entries get distinct, reproducible ts)."""
    return itertools.count(start, 1_000).__next__


BATCHES = (1, 3, 4, 4)
SIZE = sum(BATCHES)  # 12
CHECKPOINT_SIZES = (8, 12)
TILE_HEIGHT = 1
TILES_PER_LEVEL = (6, 3, 1)  # stored tiles of the baseline, by tile level
SPANS = ((0, 0), (1, 2), (3, 3), (4, 6), (7, 7), (8, 10), (11, 11))  # (first, last) of the baseline

WIDE_SIZE = 300
WIDE_BATCH = 100  # tree heads at 100, 200, 300 (on the spans ending at 99, 199, 299)

TRIGGERS = (
    "entries_append_only", "entries_no_update", "entries_no_delete",
    "spans_append_only", "spans_no_update", "spans_no_delete",
    "tiles_no_dup", "tiles_no_update", "tiles_no_delete",
    "runs_no_dup", "runs_no_update", "runs_no_delete",
    "checkpoints_no_dup", "checkpoints_no_update", "checkpoints_no_delete",
)


# --------------------------------------------------------------------------- raw access helpers


@contextmanager
def raw_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection in autocommit mode, as an attacker (or a test) would open one."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # tests do not need these edits to survive a crash
    try:
        yield conn
    finally:
        conn.close()


def drop_triggers(conn: sqlite3.Connection, *names: str) -> None:
    """Remove the named append-only triggers (all of them when no name is given)."""
    for name in names or TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def flip_bit(blob: bytes, byte: int, bit: int = 0) -> bytes:
    """``blob`` with one bit inverted."""
    out = bytearray(blob)
    out[byte] ^= 1 << bit
    return bytes(out)


def tile_height(conn: sqlite3.Connection) -> int:
    """The tile height recorded in the journal's meta table."""
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'tile_height'").fetchone()
    return int(value)


def span_of(conn: sqlite3.Connection, seq: int) -> tuple[str | None, str | None, str]:
    """(run, task, kind) of the span row covering ``seq``."""
    row = conn.execute("SELECT run, task, kind FROM spans WHERE first <= ? AND last >= ? "
                       "ORDER BY first DESC LIMIT 1", (seq, seq)).fetchone()
    assert row is not None, f"no span covers seq {seq}"
    return row[0], row[1], row[2]


def entry_row(conn: sqlite3.Connection, seq: int) -> tuple[bytes, str | None, str | None, str]:
    """(body, run, task, kind) of one stored entry, the labels read from its span."""
    (body,) = conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
    return (bytes(body), *span_of(conn, seq))


def get_tile(conn: sqlite3.Connection, level: int, idx: int) -> bytes:
    """The stored hashes of tile ``(level, idx)``."""
    row = conn.execute("SELECT hashes FROM tiles WHERE level = ? AND idx = ?", (level, idx)).fetchone()
    assert row is not None, f"no tile ({level},{idx})"
    return bytes(row[0])


def put_tile(conn: sqlite3.Connection, level: int, idx: int, hashes: bytes) -> None:
    """Overwrite the stored tile ``(level, idx)`` (which must exist)."""
    drop_triggers(conn, "tiles_no_update")
    cur = conn.execute("UPDATE tiles SET hashes = ? WHERE level = ? AND idx = ?", (hashes, level, idx))
    assert cur.rowcount == 1, f"no tile ({level},{idx})"


def set_tile_hash(conn: sqlite3.Connection, level: int, idx: int, pos: int, value: bytes) -> None:
    """Replace hash number ``pos`` of tile ``(level, idx)``."""
    blob = get_tile(conn, level, idx)
    off = HASH_SIZE * pos
    put_tile(conn, level, idx, blob[:off] + value + blob[off + HASH_SIZE:])


def set_leaf(conn: sqlite3.Connection, seq: int, leaf: bytes) -> bool:
    """Store ``leaf`` as the leaf hash of ``seq`` in its level-0 tile; False if no full tile holds it."""
    h = tile_height(conn)
    idx, pos = seq >> h, seq & ((1 << h) - 1)
    if conn.execute("SELECT 1 FROM tiles WHERE level = 0 AND idx = ?", (idx,)).fetchone() is None:
        return False
    set_tile_hash(conn, 0, idx, pos, leaf)
    return True


# A span row as stored: (first, last, run, task, kind, root, ts).
SpanRow = tuple[int, int, str | None, str | None, str, bytes | None, int | None]


def head_spans(conn: sqlite3.Connection) -> list[tuple[int, bytes, int]]:
    """(size, root, ts) of every recorded tree head: the span rows that carry a root, size = last + 1."""
    return [(size, bytes(root), ts) for size, root, ts in conn.execute(
        "SELECT last + 1, root, ts FROM spans WHERE root IS NOT NULL ORDER BY first").fetchall()]


def set_head_root(conn: sqlite3.Connection, size: int, root: bytes | None) -> None:
    """Store ``root`` as the tree head of ``size`` on the span ending at ``size - 1`` (None deletes it)."""
    drop_triggers(conn, "spans_no_update")
    cur = conn.execute("UPDATE spans SET root = ? WHERE last = ?", (root, size - 1))
    assert cur.rowcount == 1, f"no span ends at {size - 1}"


def write_spans(conn: sqlite3.Connection, spans: list[SpanRow]) -> None:
    """Replace the whole span index by ``spans``, and the runs index by the one they imply."""
    drop_triggers(conn, "spans_no_delete", "spans_append_only", "runs_no_delete")
    conn.execute("DELETE FROM spans")
    conn.executemany("INSERT INTO spans(first, last, run, task, kind, root, ts) VALUES (?,?,?,?,?,?,?)", spans)
    conn.execute("DELETE FROM runs")
    conn.execute("INSERT INTO runs(run, first) SELECT run, min(first) FROM spans WHERE run IS NOT NULL "
                 "GROUP BY run")


def rebuild_spans(conn: sqlite3.Connection) -> None:
    """Recompute the span index from the stored bodies, as the writer would have written it.

    Runs of equal run/task/kind are coalesced inside each commit (never across a recorded tree
    head), and each head stays on the span that ends its commit.
    """
    heads = {size: (root, ts) for size, root, ts in head_spans(conn)}
    spans: list[SpanRow] = []
    for seq, body in conn.execute("SELECT seq, body FROM entries ORDER BY seq").fetchall():
        d = msgpack.unpackb(bytes(body), raw=False)
        labels = (d["run"], d["task"], d["kind"])
        if spans and spans[-1][1] == seq - 1 and spans[-1][2:5] == labels and seq not in heads:
            spans[-1] = (spans[-1][0], seq, *labels, None, None)
        else:
            spans.append((seq, seq, *labels, None, None))
    write_spans(conn, [(*span[:5], *heads.get(span[1] + 1, (None, None))) for span in spans])


def insert_tile(conn: sqlite3.Connection, level: int, idx: int, hashes: bytes) -> None:
    """Store a new tile, with its subtree root (``tiles.root``) computed from ``hashes``."""
    root = subtree_root(hashes) if len(hashes) % HASH_SIZE == 0 and hashes else b"\x00" * HASH_SIZE
    conn.execute("INSERT INTO tiles(level, idx, hashes, root) VALUES (?,?,?,?)", (level, idx, hashes, root))


def _write_tiles(conn: sqlite3.Connection, tiles: list[tuple[Any, ...]], *, min_level: int = 0) -> None:
    """Replace the tiles at levels >= ``min_level`` by ``tiles`` (``(level, idx, hashes, ...)``)."""
    drop_triggers(conn, "tiles_no_delete", "tiles_no_dup")
    conn.execute("DELETE FROM tiles WHERE level >= ?", (min_level,))
    for level, idx, hashes, *_root in tiles:
        if level >= min_level:
            insert_tile(conn, level, idx, hashes)


def rebuild_tree(conn: sqlite3.Connection, *, heads: bool = True) -> None:
    """Recompute every tile (and, with ``heads``, every tree head) from the stored bodies.

    A tree head is the ``root`` of the span that ends its commit; ``heads`` recomputes those
    roots in place (the spans and their ``ts`` stay). This is a careful forger: after it the stored
    tree agrees with the bodies, and only the old heads (``heads=False``) or a checkpoint can tell
    that the bodies changed.
    """
    h = tile_height(conn)
    leaves = [merkle.leaf_hash(bytes(body))
              for (body,) in conn.execute("SELECT body FROM entries ORDER BY seq").fetchall()]
    sizes = [size for size, _root, _ts in head_spans(conn)]
    edge = TileEdge.empty(h)
    tiles: list[tuple[Any, ...]] = []
    roots: dict[int, bytes] = {}
    for size in [s for s in sizes if s <= len(leaves)] + [len(leaves)]:
        edge, full = edge.extended(leaves[edge.size:size])
        tiles += full
        roots[size] = edge.root()
    _write_tiles(conn, tiles)
    if heads:
        for size in sizes:
            set_head_root(conn, size, roots[size])


def restack_tiles(conn: sqlite3.Connection) -> None:
    """Recompute every tile above level 0 from the stored level-0 tiles, whatever they hold."""
    h = tile_height(conn)
    blobs = [bytes(b) for (b,) in conn.execute("SELECT hashes FROM tiles WHERE level = 0 ORDER BY idx")]
    packed = b"".join(blobs)
    leaves = [packed[i:i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)]
    _edge, tiles = TileEdge.empty(h).extended(leaves)
    _write_tiles(conn, tiles, min_level=1)


def truncate_to(b: Baseline, size: int, *, checkpoint_rows: bool, checkpoint_files: bool) -> None:
    """Roll the log back to ``size`` entries, consistently: entries, spans (with the tree heads
    they carry), runs and tiles beyond it go.

    ``size`` must be a size some commit ended at, so that the span left last already carries
    the tree head of ``size``.
    """
    with raw_db(b.db) as c:
        drop_triggers(c)
        h = tile_height(c)
        assert size in [s for s, _root, _ts in head_spans(c)], f"no commit ended at size {size}"
        c.execute("DELETE FROM entries WHERE seq >= ?", (size,))
        c.execute("DELETE FROM spans WHERE first >= ?", (size,))
        c.execute("DELETE FROM runs WHERE first >= ?", (size,))
        # tile (level, idx) covers leaves up to ((idx + 1) << (h * (level + 1))) - 1
        c.execute("DELETE FROM tiles WHERE ((idx + 1) << (? * (level + 1))) > ?", (h, size))
        if checkpoint_rows:
            c.execute("DELETE FROM checkpoints WHERE size > ?", (size,))
    if checkpoint_files:
        for path in b.folder.glob("*.note"):
            if int(path.stem) > size:
                path.unlink()


def rewrite_entry(conn: sqlite3.Connection, seq: int, data: dict[str, Any], *, leaf: bool = True) -> None:
    """Replace entry ``seq`` with a well-formed entry carrying other data.

    With ``leaf`` its leaf hash in the level-0 tile is recomputed too (the tiles above are not).
    """
    body, run, task, kind = entry_row(conn, seq)
    ts = msgpack.unpackb(body, raw=False)["ts"]
    new = encode_entry(seq=seq, ts=ts, kind=kind, data=data, run=run, task=task)
    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    conn.execute("INSERT INTO entries(seq, body) VALUES (?,?)", (seq, new.raw))
    if leaf:
        assert set_leaf(conn, seq, new.leaf_hash)


def replace_checkpoint_row(conn: sqlite3.Connection, size: int, note: str) -> None:
    drop_triggers(conn)
    conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))


def forge_signature(note: str) -> str:
    """The note with one bit of its Ed25519 signature flipped (key ID intact)."""
    text, _, sig_line = note.rpartition("\n\n")
    prefix, _, b64 = sig_line.rstrip("\n").rpartition(" ")
    blob = base64.b64decode(b64)
    bad = flip_bit(blob, 10)  # inside the signature, after the 4-byte key ID
    return f"{text}\n\n{prefix} {base64.b64encode(bad).decode('ascii')}\n"


# --------------------------------------------------------------------------- the baselines


def baseline_items() -> list[dict[str, Any]]:
    """The 12 entries of the baseline journal (a small, plausible run of three tasks)."""
    items: list[dict[str, Any]] = [{"kind": "run.started", "data": {"config": {"tier": "smoke"}},
                                    "run": "run-a"}]
    for i in range(1, SIZE):
        items.append({"kind": "task.result" if i % 4 == 3 else "agent.tool",
                      "data": {"i": i, "out": f"line {i}", "ok": i % 2 == 0},
                      "run": "run-a", "task": f"task-{i // 4}"})
    return items


@dataclass
class Baseline:
    """The untampered journal every case starts from."""

    home: Path
    db: Path
    keys: KeyRing
    other_keys: KeyRing
    note8: str
    note12: str  # the auditor's external copy of the latest checkpoint

    @property
    def folder(self) -> Path:
        return self.home / "checkpoints"


def build_baseline(home: Path, keys: KeyRing, other_keys: KeyRing,
                   clock: Callable[[], int]) -> Baseline:
    """Create the baseline journal (tile height 1) in ``home`` and close it."""
    items = baseline_items()
    notes: dict[int, str] = {}
    with Journal.open(home / "journal.db", create=True, clock=clock, tile_height=TILE_HEIGHT, harness=True) as j:
        start = 0
        for n in BATCHES:
            j.append_many(items[start:start + n])
            start += n
            if start in CHECKPOINT_SIZES:
                notes[start] = j.checkpoint(keys)
    return Baseline(home, home / "journal.db", keys, other_keys, notes[8], notes[12])


def build_wide(home: Path, clock: Callable[[], int]) -> Path:
    """A journal of ``WIDE_SIZE`` entries with the default tile height, closed; returns its path."""
    db = home / "journal.db"
    with Journal.open(db, create=True, clock=clock, harness=True) as j:
        for start in range(0, WIDE_SIZE, WIDE_BATCH):
            j.append_many([{"kind": "agent.tool", "data": {"i": i, "out": f"line {i}"},
                            "run": "run-w", "task": f"task-{i // 10}"}
                           for i in range(start, start + WIDE_BATCH)])
    return db


# --------------------------------------------------------------------------- attacks on the database
#
# Each factory returns ``mutate(db)``; the journal cases wrap it with ``_on_db``.

DbMutation = Callable[[Path], None]


def _on_db(mutate: DbMutation) -> Callable[[Baseline], None]:
    def run(b: Baseline) -> None:
        mutate(b.db)
    return run


def _flip_entry_data(seq: int) -> DbMutation:
    """One bit of entry ``seq``'s data (its ``line <seq>`` string) flipped; the envelope stays intact."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            body = entry_row(c, seq)[0]
            at = body.index(f"line {seq}".encode())
            c.execute("UPDATE entries SET body = ? WHERE seq = ?", (flip_bit(body, at), seq))
    return mutate


def _flip_tile_hash(level: int, idx: int, pos: int) -> DbMutation:
    """One bit of hash ``pos`` in tile ``(level, idx)`` flipped."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            blob = get_tile(c, level, idx)
            put_tile(c, level, idx, flip_bit(blob, HASH_SIZE * pos + HASH_SIZE - 1, 7))
    return mutate


def _delete_tile(level: int, idx: int) -> DbMutation:
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            assert c.execute("DELETE FROM tiles WHERE level = ? AND idx = ?", (level, idx)).rowcount == 1
    return mutate


def _insert_tile(level: int, idx: int) -> DbMutation:
    """A well-sized tile of zero hashes stored at ``(level, idx)`` (no trigger forbids a new tile)."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            insert_tile(c, level, idx, b"\x00" * (HASH_SIZE << tile_height(c)))
    return mutate


def _edit_tile_sql(level: int, idx: int, expr: str) -> DbMutation:
    """Tile ``(level, idx)`` set to the SQL expression ``expr`` of its hashes (retyped, resized)."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            cur = c.execute(f"UPDATE tiles SET hashes = {expr} WHERE level = ? AND idx = ?", (level, idx))
            assert cur.rowcount == 1
    return mutate


def _edit_tile_root_sql(level: int, idx: int, expr: str) -> DbMutation:
    """The stored subtree root (``tiles.root``) of tile ``(level, idx)`` set to the SQL expression ``expr``."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            cur = c.execute(f"UPDATE tiles SET root = {expr} WHERE level = ? AND idx = ?", (level, idx))
            assert cur.rowcount == 1
    return mutate


def _flip_tile_root(level: int, idx: int) -> DbMutation:
    """One bit of the stored subtree root (``tiles.root``) of tile ``(level, idx)`` flipped."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            (root,) = c.execute("SELECT root FROM tiles WHERE level = ? AND idx = ?", (level, idx)).fetchone()
            c.execute("UPDATE tiles SET root = ? WHERE level = ? AND idx = ?", (flip_bit(root, 0), level, idx))
    return mutate


def _edit_span_sql(first: int, assignment: str) -> DbMutation:
    """The span row starting at ``first`` edited by an SQL ``SET`` clause."""
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            drop_triggers(c)
            assert c.execute(f"UPDATE spans SET {assignment} WHERE first = ?", (first,)).rowcount == 1
    return mutate


def _set_tile_height(height: int) -> DbMutation:
    def mutate(db: Path) -> None:
        with raw_db(db) as c:
            c.execute("UPDATE meta SET value = ? WHERE key = 'tile_height'", (str(height),))
    return mutate


# --------------------------------------------------------------------------- the journal cases


def _flipped_bit_entry_version(b: Baseline) -> None:
    """A bit flipped in the envelope's trailing ``v`` key: the bytes are no longer an entry of v1."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        body = entry_row(c, 5)[0]
        c.execute("UPDATE entries SET body = ? WHERE seq = 5", (flip_bit(body, len(body) - 2),))


def _short_body_leaf_recomputed(b: Baseline) -> None:
    """Entry 5's bytes cut to 3 bytes with a matching leaf hash in its tile: not an entry at all."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("UPDATE entries SET body = ? WHERE seq = 5", (b"\x81\xa0\xc0",))
        assert set_leaf(c, 5, merkle.leaf_hash(b"\x81\xa0\xc0"))


def _swapped_entries(b: Baseline) -> None:
    """Rows 3 and 4 trade bodies and their leaf hashes in the level-0 tiles (spans left alone)."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        b3, b4 = entry_row(c, 3)[0], entry_row(c, 4)[0]
        for seq, body in ((3, b4), (4, b3)):
            c.execute("UPDATE entries SET body = ? WHERE seq = ?", (body, seq))
            assert set_leaf(c, seq, merkle.leaf_hash(body))


def _reordered_entries(b: Baseline) -> None:
    """Entries 3 and 4 trade places, re-encoded with each other's seq; spans and leaves recomputed."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        bodies = {s: msgpack.unpackb(entry_row(c, s)[0], raw=False) for s in (3, 4)}
        for seq, other in ((3, 4), (4, 3)):
            d = bodies[other]
            e = encode_entry(seq=seq, ts=d["ts"], kind=d["kind"], data=d["data"], run=d["run"],
                             task=d["task"])
            c.execute("UPDATE entries SET body = ? WHERE seq = ?", (e.raw, seq))
            assert set_leaf(c, seq, e.leaf_hash)
        rebuild_spans(c)


def _deleted_tail_no_external(b: Baseline) -> None:
    truncate_to(b, 8, checkpoint_rows=True, checkpoint_files=True)


def _deleted_tail_file_survives(b: Baseline) -> None:
    truncate_to(b, 8, checkpoint_rows=True, checkpoint_files=False)


def _deleted_middle_entry(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM entries WHERE seq = 5")


EDITED = {"i": 5, "out": "edited after the fact", "ok": True}


def _reinserted_entry(b: Baseline) -> None:
    """Entry 5 deleted and re-inserted with other data, its leaf hash updated in the level-0 tile."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, EDITED)


def _reinserted_entry_stale_leaf(b: Baseline) -> None:
    """The changed body is re-inserted but its level-0 tile keeps the old leaf hash."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, EDITED, leaf=False)


def _rewritten_entry_tiles_recomputed(b: Baseline) -> None:
    """Entry 5 rewritten and every tile recomputed from the bodies; the recorded heads left alone."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, EDITED)
        rebuild_tree(c, heads=False)


def _rewritten_history_recomputed_tree(b: Baseline) -> None:
    """Entry 5 rewritten and every tile and head recomputed; checkpoints left alone."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, EDITED)
        rebuild_tree(c)


def _rewritten_history_checkpoints_removed(b: Baseline) -> None:
    """As above, and every checkpoint the forger cannot re-sign is deleted (rows and files)."""
    _rewritten_history_recomputed_tree(b)
    with raw_db(b.db) as c:
        c.execute("DELETE FROM checkpoints")
    for path in b.folder.glob("*.note"):
        path.unlink()


def _upper_tiles_recomputed_from_tampered_leaf(b: Baseline) -> None:
    """Leaf hash 5 flipped in its level-0 tile and every tile above recomputed to agree with it."""
    _flip_tile_hash(0, 2, 1)(b.db)
    with raw_db(b.db) as c:
        restack_tiles(c)


def _flipped_bit_head_root(b: Baseline) -> None:
    """One bit of the tree head at size 4 (the root on span [3]) flipped."""
    with raw_db(b.db) as c:
        (r,) = c.execute("SELECT root FROM spans WHERE last = 3").fetchone()
        set_head_root(c, 4, flip_bit(r, 3))


def _deleted_latest_head(b: Baseline) -> None:
    """The tree head at size 12 deleted: the root of the last span, [11], set to NULL."""
    with raw_db(b.db) as c:
        set_head_root(c, 12, None)


def _head_moved_to_inner_span(b: Baseline) -> None:
    """The head at size 4 moved from span [3] to span [1-2], where no commit ended."""
    with raw_db(b.db) as c:
        (r,) = c.execute("SELECT root FROM spans WHERE last = 3").fetchone()
        set_head_root(c, 4, None)
        set_head_root(c, 3, bytes(r))


def _entry_12() -> tuple[bytes, tuple[int, int, str | None, str | None, str]]:
    e = encode_entry(seq=12, ts=0, kind="agent.tool", data={"i": 12}, run="run-a")
    return e.raw, (12, 12, e.run, e.task, e.kind)


def _appended_outside_transaction(b: Baseline) -> None:
    """A well-formed entry 12 and its span inserted by hand (the triggers allow it), with no tree head."""
    raw, span = _entry_12()
    with raw_db(b.db) as c:
        c.execute("INSERT INTO entries(seq, body) VALUES (?,?)", (12, raw))
        c.execute("INSERT INTO spans(first, last, run, task, kind) VALUES (?,?,?,?,?)", span)


def _appended_without_span(b: Baseline) -> None:
    """A well-formed entry 12 inserted by hand with no span row and no tree head."""
    raw, _span = _entry_12()
    with raw_db(b.db) as c:
        c.execute("INSERT INTO entries(seq, body) VALUES (?,?)", (12, raw))


def _deleted_span(b: Baseline) -> None:
    """The span row of entries 4..6 deleted: a gap in the index (filters would lose them)."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        assert c.execute("DELETE FROM spans WHERE first = 4").rowcount == 1


def _overlapping_span(b: Baseline) -> None:
    """A second span row for entries 5..6, with the right labels, overlapping the span 4..6."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        run, task, kind = span_of(c, 5)
        c.execute("INSERT INTO spans(first, last, run, task, kind) VALUES (5, 6, ?, ?, ?)", (run, task, kind))


def _extra_span_row(b: Baseline) -> None:
    """A span row for a seq 12 the log does not have."""
    with raw_db(b.db) as c:
        c.execute("INSERT INTO spans(first, last, run, task, kind) VALUES (12, 12, 'run-a', NULL, 'run.finished')")


def _runs_sql(sql: str) -> Callable[[Baseline], None]:
    """One statement on the runs index (baseline: the single row ``('run-a', 0)``) changing one
    row, with the triggers dropped first."""
    def mutate(b: Baseline) -> None:
        with raw_db(b.db) as c:
            drop_triggers(c)
            assert c.execute(sql).rowcount == 1
    return mutate


def _forged_checkpoint_signature(b: Baseline) -> None:
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 8, forge_signature(b.note8))


def _forged_checkpoint_body(b: Baseline) -> None:
    """The signed text of checkpoint 8 is edited (size 8 -> 7) and the old signature kept."""
    forged = b.note8.replace("\n8\n", "\n7\n", 1)
    assert forged != b.note8
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 8, forged)


def _checkpoint_from_another_key(b: Baseline) -> None:
    """An impostor key (same name, other key material) signs a correct head; file dropped in the folder."""
    with Journal.open(b.db, harness=True) as j:
        size, root = j.head()
    cp = Checkpoint(origin=b.keys.key_name, size=size, root=root)
    (b.folder / f"{size}.note").write_text(sign_checkpoint(cp, b.other_keys.signer), "utf-8")


def _checkpoint_root_mismatch(b: Baseline) -> None:
    """The real key signed a head for size 8 whose root is not this log's (a fork)."""
    with Journal.open(b.db, harness=True) as j:
        real = j.root_at(8)
    cp = Checkpoint(origin=b.keys.key_name, size=8, root=flip_bit(real, 0))
    (b.folder / "8.note").write_text(sign_checkpoint(cp, b.keys.signer), "utf-8")


def _checkpoint_row_for_other_size(b: Baseline) -> None:
    """Checkpoint row 12 holds the (valid) note for size 8, so 8 looks like the latest."""
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 12, b.note8)


def _stale_checkpoint_as_current(b: Baseline) -> None:
    """The database drops its latest checkpoint so that checkpoint 8 is presented as current."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM checkpoints WHERE size = 12")


def _malformed_checkpoint_file(b: Baseline) -> None:
    (b.folder / "12.note").write_text("not a signed note\n", "utf-8")


def _retyped(table: str, column: str, where: str, value: str) -> Callable[[Baseline], None]:
    """SQLite columns are dynamically typed: store a TEXT (or other) value where a BLOB belongs."""

    def mutate(b: Baseline) -> None:
        with raw_db(b.db) as c:
            drop_triggers(c)
            c.execute(f"UPDATE {table} SET {column} = {value} WHERE {where}")

    return mutate


@dataclass(frozen=True)
class TamperCase:
    """One attack: how to apply it, and what verify must say afterwards."""

    name: str
    mutate: Callable[[Baseline], None]
    check: str | None  # None: verify cannot detect it and must pass
    seq: int | None = None
    since: bool = False  # verify with the auditor's external checkpoint (size 12)
    size_after: int = SIZE  # the size verify reports when it passes
    bug: str | None = None  # verify mishandles this case today (see the reason)


# Bytes stored as TEXT that are not UTF-8: Python's sqlite3 cannot read such a value back as str.
CASES: tuple[TamperCase, ...] = (
    # --- entry bytes
    TamperCase("flipped-bit-entry", _on_db(_flip_entry_data(5)), "leaf-hash", 5),
    TamperCase("flipped-bit-entry-version", _flipped_bit_entry_version, "entry-envelope", 5),
    TamperCase("short-body-leaf-recomputed", _short_body_leaf_recomputed, "entry-envelope", 5),
    TamperCase("swapped-entries", _swapped_entries, "entry-envelope", 3),
    # node (1,1), leaves 2..3, still hashes the old order
    TamperCase("reordered-entries-reencoded", _reordered_entries, "node-hash", 2),
    TamperCase("deleted-middle-entry", _deleted_middle_entry, "entry-seq", 5),
    # node (1,2), leaves 4..5, in tile (1,1) still hashes the old leaf 5
    TamperCase("reinserted-entry-after-dropping-triggers", _reinserted_entry, "node-hash", 4),
    TamperCase("reinserted-entry-stale-leaf", _reinserted_entry_stale_leaf, "leaf-hash", 5),
    TamperCase("appended-outside-transaction", _appended_outside_transaction, "head-missing", 12),
    TamperCase("appended-without-span", _appended_without_span, "entry-index", 12),
    # --- stored tree: tiles and heads (baseline tiles: level 0 idx 0..5, level 1 idx 0..2, level 2 idx 0)
    TamperCase("flipped-bit-leaf-hash", _on_db(_flip_tile_hash(0, 2, 1)), "leaf-hash", 5),
    TamperCase("flipped-bit-node", _on_db(_flip_tile_hash(1, 1, 0)), "node-hash", 4),
    TamperCase("flipped-bit-node-level-2", _on_db(_flip_tile_hash(2, 0, 1)), "node-hash", 4),
    TamperCase("upper-tiles-recomputed-from-tampered-leaf", _upper_tiles_recomputed_from_tampered_leaf,
               "leaf-hash", 5),
    # tiles.root caches the root of each tile's subtree (the store derives the right edge from it)
    TamperCase("flipped-bit-tile-root", _on_db(_flip_tile_root(0, 5)), "node-hash", 10),
    TamperCase("flipped-bit-node-tile-root", _on_db(_flip_tile_root(1, 1)), "node-hash", 4),
    TamperCase("deleted-tile", _on_db(_delete_tile(1, 1)), "node-missing", 4),
    TamperCase("deleted-last-leaf-tile", _on_db(_delete_tile(0, 5)), "node-missing", 10),
    TamperCase("extra-tile", _on_db(_insert_tile(2, 1)), "node-extra", 8),  # would cover leaves 8..15
    # tree level 3 has one node, so no full tile; a tile there would cover leaves 0..15
    TamperCase("tile-beyond-tree-level", _on_db(_insert_tile(3, 0)), "node-extra", 0),
    TamperCase("leaf-tile-short", _on_db(_edit_tile_sql(0, 2, "substr(hashes, 1, 63)")), "leaf-hash", 4),
    TamperCase("node-tile-long", _on_db(_edit_tile_sql(1, 1, "CAST(hashes || X'00' AS BLOB)")), "node-hash", 4),
    # A journal read with another tile height: its stored tiles no longer fit the tree's shape.
    TamperCase("tile-height-changed-1-to-2", _on_db(_set_tile_height(2)), "node-extra", 0),
    TamperCase("tile-height-changed-1-to-4", _on_db(_set_tile_height(4)), "node-extra", 0),
    # tree heads are the roots on the spans ending each commit: [0] [3] [7] [11] (sizes 1, 4, 8, 12)
    TamperCase("flipped-bit-head-root", _flipped_bit_head_root, "head-root", 3),
    TamperCase("deleted-latest-head", _deleted_latest_head, "head-missing", 8),
    # on span [1-2] the root reads as the head of size 3, which it is not
    TamperCase("head-moved-to-inner-span", _head_moved_to_inner_span, "head-root", 2),
    # --- span index (baseline spans: [0] [1-2] [3] [4-6] [7] [8-10] [11])
    TamperCase("relabelled-span-run", _on_db(_edit_span_sql(4, "run = 'run-b'")), "entry-envelope", 4),
    TamperCase("relabelled-span-task", _on_db(_edit_span_sql(8, "task = 'task-9'")), "entry-envelope", 8),
    # a tool call relabelled as the end of the run (run-level projections read kinds from spans)
    TamperCase("relabelled-span-kind", _on_db(_edit_span_sql(4, "kind = 'run.finished'")),
               "entry-envelope", 4),
    TamperCase("span-gap", _deleted_span, "entry-index", 4),
    # verify names the first seq after the span it walked (7), not the doubly covered 5
    TamperCase("span-overlap", _overlapping_span, "entry-index", 7),
    TamperCase("span-beyond-log", _on_db(_edit_span_sql(11, "last = 12")), "entry-index", 12),
    TamperCase("span-row-beyond-log", _extra_span_row, "entry-index", 12),
    TamperCase("span-last-before-first", _on_db(_edit_span_sql(4, "last = 3")), "entry-index", 4),
    TamperCase("span-last-as-text", _on_db(_edit_span_sql(4, "last = 'six'")), "entry-index", 4),
    TamperCase("span-run-as-blob", _on_db(_edit_span_sql(4, "run = CAST(run AS BLOB)")), "entry-index", 4),
    # --- runs index (baseline: one row, ('run-a', 0)); a query by run starts at the row's first,
    # so a missing row hides the whole run and a later first hides its early entries. verify
    # names the run's real first span (0) when the row for a real run is wrong or missing.
    TamperCase("runs-row-deleted", _runs_sql("DELETE FROM runs WHERE run = 'run-a'"), "entry-index", 0),
    TamperCase("runs-first-moved-later", _runs_sql("UPDATE runs SET first = 4 WHERE run = 'run-a'"),
               "entry-index", 0),
    # the triggers refuse a row that does not name the run of a span starting at its first; with
    # them dropped, a row naming a run no span holds is an index entry for nothing, at its first
    TamperCase("runs-row-for-unknown-run",
               _runs_sql("INSERT INTO runs(run, first) VALUES ('run-z', 5)"),
               "entry-index", 5),
    # 'zero' has no integer form, so the INTEGER column keeps it as TEXT ('0' would become 0)
    TamperCase("runs-first-as-text", _runs_sql("UPDATE runs SET first = 'zero' WHERE run = 'run-a'"),
               "entry-index", 0),
    # Run names compare byte for byte (BINARY collation, in the index and in the spans), so
    # 'RUN-A' is another run, and no span holds it: verify flags the row at its first. Had a run
    # 'RUN-A' really been written, its own row would already hold that key and the PRIMARY KEY
    # refuses a second one (test_store.py: test_runs_differing_in_case_are_separate_runs).
    TamperCase("runs-row-case-variant",
               _runs_sql("INSERT INTO runs(run, first) VALUES ('RUN-A', 0)"),
               "entry-index", 0),
    # the same name as a BLOB is another key to SQLite, the same bytes to verify (triggers dropped)
    TamperCase("runs-row-as-blob",
               _runs_sql("INSERT INTO runs(run, first) VALUES (CAST('run-a' AS BLOB), 0)"),
               "entry-index", 0),
    # --- rewritten history: only heads, checkpoints or an auditor's checkpoint can tell
    TamperCase("rewritten-entry-tiles-recomputed", _rewritten_entry_tiles_recomputed, "head-root", 7),
    TamperCase("rewritten-history-recomputed-tree", _rewritten_history_recomputed_tree,
               "checkpoint-root", 7),
    # Again only an external checkpoint exposes a rewrite whose forger deleted every checkpoint.
    TamperCase("rewritten-history-checkpoints-removed", _rewritten_history_checkpoints_removed,
               None),
    TamperCase("rewritten-history-auditor-checkpoint", _rewritten_history_checkpoints_removed,
               "consistency", 11, since=True),
    # --- deleted tail
    # The documented limit: a consistent truncation with every later checkpoint destroyed is
    # invisible without a checkpoint kept outside the ledger directory.
    TamperCase("deleted-tail-no-external-checkpoint", _deleted_tail_no_external, None,
               size_after=8),
    TamperCase("deleted-tail-checkpoint-file-survives", _deleted_tail_file_survives,
               "checkpoint-ahead", 8),
    TamperCase("deleted-tail-auditor-checkpoint", _deleted_tail_no_external, "consistency", 8,
               since=True),
    # --- checkpoints
    TamperCase("forged-checkpoint-signature", _forged_checkpoint_signature,
               "checkpoint-signature"),
    TamperCase("forged-checkpoint-body", _forged_checkpoint_body, "checkpoint-signature"),
    TamperCase("checkpoint-from-another-key", _checkpoint_from_another_key,
               "checkpoint-signature"),
    TamperCase("checkpoint-root-mismatch", _checkpoint_root_mismatch, "checkpoint-root", 7),
    TamperCase("checkpoint-row-for-other-size", _checkpoint_row_for_other_size,
               "checkpoint-signature"),
    # "Stale checkpoint presented as current": the database's newest checkpoint is older than
    # one the checkpoint folder holds. verify names it checkpoint-missing, at the newer size.
    # (Presenting an old log against a newer auditor checkpoint is the deleted-tail-auditor case.)
    TamperCase("stale-checkpoint-as-current", _stale_checkpoint_as_current,
               "checkpoint-missing", 12),
    TamperCase("malformed-checkpoint-file", _malformed_checkpoint_file, "checkpoint-signature"),
    # --- type confusion: the same bytes, or a look-alike, stored with another SQLite type
    TamperCase("entry-body-as-text", _retyped("entries", "body", "seq = 5", "CAST(body AS TEXT)"),
               "entry-columns", 5),
    TamperCase("entry-body-as-integer", _retyped("entries", "body", "seq = 5", "42"),
               "entry-columns", 5),
    TamperCase("leaf-tile-as-text", _on_db(_edit_tile_sql(0, 2, "hex(hashes)")), "leaf-hash", 4),
    TamperCase("leaf-tile-as-raw-text", _on_db(_edit_tile_sql(0, 2, "CAST(hashes AS TEXT)")),
               "leaf-hash", 4),
    TamperCase("node-tile-as-text", _on_db(_edit_tile_sql(1, 1, "hex(hashes)")), "node-hash", 4),
    TamperCase("tile-root-as-text", _on_db(_edit_tile_root_sql(1, 1, "hex(root)")), "node-hash", 4),
    TamperCase("head-root-as-text", _retyped("spans", "root", "last = 3", "hex(root)"),
               "head-root", 3),
    TamperCase("checkpoint-note-as-blob",
               _retyped("checkpoints", "note", "size = 8", "CAST(note AS BLOB)"),
               "checkpoint-signature"),
    TamperCase("checkpoint-note-not-utf8",
               _retyped("checkpoints", "note", "size = 8", "CAST(CAST(note AS BLOB) || X'ff' AS TEXT)"),
               "checkpoint-signature"),
)


# --------------------------------------------------------------------------- tile cases at the default height


@dataclass(frozen=True)
class TileCase:
    """A tile attack on the ``build_wide`` journal (tile height 4, 300 entries)."""

    name: str
    mutate: DbMutation
    check: str
    seq: int


# Hash j of tile (k, t) is tree node (4k, 16t + j); verify names its first leaf, (16t + j) << 4k.
WIDE_CASES: tuple[TileCase, ...] = (
    TileCase("wide-flipped-bit-entry", _flip_entry_data(5), "leaf-hash", 5),
    # entry 295 is in the tail (leaves 288..299): no stored leaf hash, so only the head can tell
    TileCase("wide-flipped-bit-tail-entry", _flip_entry_data(295), "head-root", 299),
    TileCase("wide-flipped-bit-leaf-hash", _flip_tile_hash(0, 5, 3), "leaf-hash", 83),
    TileCase("wide-flipped-bit-node", _flip_tile_hash(1, 0, 7), "node-hash", 112),
    # tile (0,17)'s root is one of the two level-4 hashes the right edge is derived from
    TileCase("wide-flipped-bit-tile-root", _flip_tile_root(0, 17), "node-hash", 272),
    TileCase("wide-deleted-leaf-tile", _delete_tile(0, 5), "node-missing", 80),
    TileCase("wide-deleted-node-tile", _delete_tile(1, 0), "node-missing", 0),
    TileCase("wide-extra-leaf-tile", _insert_tile(0, 18), "node-extra", 288),
    TileCase("wide-extra-node-tile", _insert_tile(1, 1), "node-extra", 256),
    TileCase("wide-tile-beyond-tree-level", _insert_tile(2, 0), "node-extra", 0),
    TileCase("wide-leaf-tile-as-text", _edit_tile_sql(0, 5, "hex(hashes)"), "leaf-hash", 80),
    TileCase("wide-node-tile-as-text", _edit_tile_sql(1, 0, "hex(hashes)"), "node-hash", 0),
)


# --------------------------------------------------------------------------- the proof cases


@dataclass(frozen=True)
class ProofCase:
    """A corrupted proof: ``attack(journal)`` calls a merkle verifier that must raise ``check``."""

    name: str
    attack: Callable[[Journal], None]
    check: str


def _inclusion(j: Journal, seq: int, edit: Callable[[list[bytes]], list[bytes]],
               **override: Any) -> None:
    p = j.inclusion_proof(seq, j.size)
    args: dict[str, Any] = {"index": p.leaf_index, "size": p.tree_size, "leaf": p.leaf_hash,
                            "proof": edit(list(p.hashes)), "root": p.root}
    args.update(override)
    merkle.verify_inclusion(args["index"], args["size"], args["leaf"], args["proof"], args["root"])


def _consistency(j: Journal, old: int, edit: Callable[[list[bytes]], list[bytes]],
                 **override: Any) -> None:
    p = j.consistency_proof(old, j.size)
    args: dict[str, Any] = {"old_size": p.old_size, "new_size": p.new_size,
                            "old_root": p.old_root, "new_root": p.new_root,
                            "proof": edit(list(p.hashes))}
    args.update(override)
    merkle.verify_consistency(args["old_size"], args["new_size"], args["old_root"],
                              args["new_root"], args["proof"])


def _same(h: list[bytes]) -> list[bytes]:
    return h


PROOF_CASES: tuple[ProofCase, ...] = (
    ProofCase("inclusion-truncated", lambda j: _inclusion(j, 5, lambda h: h[:-1]),
              "inclusion-proof"),
    ProofCase("inclusion-padded", lambda j: _inclusion(j, 5, lambda h: h + [b"\x00" * 32]),
              "inclusion-proof"),
    ProofCase("inclusion-padded-with-root", lambda j: _inclusion(j, 5, lambda h: h + [j.head()[1]]),
              "inclusion-proof"),
    ProofCase("inclusion-empty", lambda j: _inclusion(j, 5, lambda h: []), "inclusion-proof"),
    ProofCase("inclusion-flipped-hash", lambda j: _inclusion(j, 5, lambda h: [flip_bit(h[0], 0)] + h[1:]),
              "inclusion-proof"),
    ProofCase("inclusion-hash-with-trailing-byte",
              lambda j: _inclusion(j, 5, lambda h: [h[0] + b"\x00"] + h[1:]), "inclusion-proof"),
    ProofCase("inclusion-short-hash", lambda j: _inclusion(j, 5, lambda h: [h[0][:31]] + h[1:]),
              "inclusion-proof"),
    ProofCase("inclusion-reordered", lambda j: _inclusion(j, 5, lambda h: h[::-1]),
              "inclusion-proof"),
    ProofCase("inclusion-wrong-index", lambda j: _inclusion(j, 5, _same, index=4),
              "inclusion-proof"),
    ProofCase("inclusion-index-beyond-size", lambda j: _inclusion(j, 5, _same, index=12),
              "inclusion-proof"),
    ProofCase("inclusion-huge-size", lambda j: _inclusion(j, 5, _same, size=2**64),
              "inclusion-proof"),
    ProofCase("inclusion-wrong-leaf", lambda j: _inclusion(j, 5, _same, leaf=j.entry(4).leaf_hash),
              "inclusion-proof"),
    ProofCase("consistency-truncated", lambda j: _consistency(j, 5, lambda h: h[:-1]),
              "consistency-proof"),
    ProofCase("consistency-padded", lambda j: _consistency(j, 5, lambda h: h + [b"\x00" * 32]),
              "consistency-proof"),
    ProofCase("consistency-empty", lambda j: _consistency(j, 5, lambda h: []),
              "consistency-proof"),
    ProofCase("consistency-flipped-hash",
              lambda j: _consistency(j, 5, lambda h: h[:-1] + [flip_bit(h[-1], 7)]),
              "consistency-proof"),
    ProofCase("consistency-hash-with-trailing-byte",
              lambda j: _consistency(j, 5, lambda h: [h[0] + b"\x00"] + h[1:]),
              "consistency-proof"),
    ProofCase("consistency-wrong-old-size", lambda j: _consistency(j, 5, _same, old_size=6),
              "consistency-proof"),
    ProofCase("consistency-old-larger-than-new", lambda j: _consistency(j, 5, _same, old_size=13),
              "consistency-proof"),
    ProofCase("consistency-from-empty-tree",
              lambda j: _consistency(j, 5, lambda h: [], old_size=0, old_root=merkle.EMPTY_ROOT),
              "consistency-proof"),
    ProofCase("consistency-forked-old-root",
              lambda j: _consistency(j, 4, _same, old_root=flip_bit(j.root_at(4), 0)),
              "consistency-proof"),
)
