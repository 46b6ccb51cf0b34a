"""Property tests: append-then-verify, every single-byte change is caught, proofs always check."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import VerificationError
from ledger.journal import merkle
from ledger.journal.codec import canonical_bytes, decode_entry
from ledger.journal.journal import Journal
from tests.journal.tamper_cases import counter_clock, raw_db
from tests.journal.test_tiles import full_tiles

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12) | st.binary(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
ITEM = st.fixed_dictionaries(
    {"kind": st.sampled_from(["run.started", "agent.tool", "task.result", "x"]),
     "data": st.dictionaries(st.text(max_size=6), JSONISH, max_size=4)},
    optional={"run": st.none() | st.sampled_from(["r1", "r2"]),
              "task": st.none() | st.text(min_size=1, max_size=6)},
)


def spans_of(batches: list[list[dict[str, Any]]]) -> int:
    """How many span rows the batches make: runs of equal (run, task, kind) inside each batch."""
    count = 0
    for batch in batches:
        keys = [(item["kind"], item.get("run"), item.get("task")) for item in batch]
        count += sum(1 for i, key in enumerate(keys) if i == 0 or keys[i - 1] != key)
    return count


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.lists(ITEM, min_size=1, max_size=6), min_size=1, max_size=6),
       height=st.sampled_from([1, 2, 4]))
def test_append_then_verify(batches: list[list[dict[str, Any]]], height: int) -> None:
    """Whatever is appended, in whatever batches, verifies and reads back unchanged."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=height, harness=True) as j:
        for batch in batches:
            if len(batch) == 1:
                item = batch[0]
                j.append(item["kind"], item["data"], run=item.get("run"), task=item.get("task"))
            else:
                j.append_many(batch)
        flat = [item for batch in batches for item in batch]
        summary = j.verify()
        assert summary["size"] == len(flat) == j.size
        assert summary["heads"] == len(batches)
        assert summary["spans"] == spans_of(batches)
        stored = list(j.entries())
        assert [e.seq for e in stored] == list(range(len(flat)))
        for e, item in zip(stored, flat, strict=True):
            assert (e.kind, e.run, e.task) == (item["kind"], item.get("run"), item.get("task"))
            assert e.data == item["data"]
        leaves = [e.leaf_hash for e in stored]
        assert j.head()[1] == merkle.root_from_leaves(leaves)
        tiles = full_tiles(merkle.MemoryNodes(leaves).nodes(), len(leaves), height)
        assert summary["tiles"] == len(tiles)


# --------------------------------------------------------------------------- single-byte changes

# Per tile height: the batches of a small journal, sized so that it has stored tiles on several
# levels and a partial tail of entries that no stored tile covers.
#   h=1: 13 entries, level-0 tiles hold 0..11, level-1 tiles 0..11, level 2 0..7; 12 is the tail
#   h=2: 22 entries, level-0 tiles hold 0..19, the level-1 tile 0..15; 20 and 21 are the tail
#   h=4: 18 entries, the one level-0 tile holds 0..15; 16 and 17 are the tail
PRISTINE_BATCHES = {1: (1, 4, 8), 2: (1, 4, 8, 5, 3, 1), 4: (1, 4, 8, 5)}


class Pristine(bytes):
    """Database bytes with a short repr (Hypothesis prints arguments of failing examples)."""

    def __repr__(self) -> str:
        return f"<journal.db, {len(self)} bytes>"


def pristine_items(n: int) -> list[tuple[str, dict[str, Any], str | None, str | None]]:
    """A plausible run: several spans per batch, some entries without a task."""
    items: list[tuple[str, dict[str, Any], str | None, str | None]] = [
        ("run.started", {"config": {"n": 1}}, "r1", None)]
    for i in range(1, n):
        kind = "task.result" if i % 4 == 3 else "agent.tool"
        task = None if i % 9 == 0 else f"t{i // 4}"
        items.append((kind, {"i": i, "s": "x" * (i % 7), "ok": i % 2 == 0}, "r1", task))
    return items


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Pristine]:
    """Per tile height, the bytes of a closed journal database grown in PRISTINE_BATCHES."""
    out = {}
    for height, batches in PRISTINE_BATCHES.items():
        path = tmp_path_factory.mktemp(f"pristine-h{height}") / "journal.db"
        items = pristine_items(sum(batches))
        with Journal.open(path, create=True, clock=counter_clock(), tile_height=height, harness=True) as j:
            start = 0
            for b in batches:
                j.append_many(items[start:start + b])
                start += b
            assert j.verify()["tiles"] > 0
        assert not path.with_name("journal.db-wal").exists()
        out[height] = Pristine(path.read_bytes())
    return out


def _mutate(blob: bytes, op: str, pos: int, value: int) -> bytes:
    pos %= len(blob)
    if op == "xor":
        out = bytearray(blob)
        out[pos] ^= value or 1
        return bytes(out)
    if op == "delete":
        return blob[:pos] + blob[pos + 1:]
    return blob[:pos] + bytes([value]) + blob[pos:]  # insert


def drop_all_triggers(c: sqlite3.Connection) -> None:
    """Remove every trigger of the database (an attacker with write access can)."""
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")


class Shape:
    """What a test needs to know about a journal to predict which check a change trips."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self.height = int(c.execute("SELECT value FROM meta WHERE key = 'tile_height'").fetchone()[0])
        self.size = c.execute("SELECT count(*) FROM entries").fetchone()[0]
        # a tree head is the root on the span that ends its commit, for size = last + 1
        self.heads = [s for (s,) in c.execute("SELECT last + 1 FROM spans WHERE root IS NOT NULL ORDER BY first")]
        self.span_last = dict(c.execute("SELECT first, last FROM spans").fetchall())
        self.run_first = dict(c.execute("SELECT run, min(first) FROM spans WHERE run IS NOT NULL GROUP BY run")
                              .fetchall())

    def in_tile(self, seq: int, tile_level: int) -> bool:
        """Whether a full (stored) tile of that level covers entry ``seq``."""
        span = self.height * (tile_level + 1)  # leaves per tile of that level
        return seq < (self.size >> span) << span

    def head_root(self, seq: int) -> tuple[str, int]:
        """The failure when only a recorded head covers a changed leaf: the first such head."""
        return "head-root", next(size for size in self.heads if size > seq) - 1


def envelope_changed(original: bytes, mutated: bytes) -> bool:
    """Whether a change touches the envelope bytes verify compares with the entry's span.

    An entry is ``\x87\xa4data <data> <kind> <run> <seq> <task> <ts> <v>`` (canonical key order);
    everything after the data is checked against the span except the 8-byte ts value, which is
    ``[-11:-3]``.
    """
    data = canonical_bytes(decode_entry(original).data)
    assert original.startswith(b"\x87\xa4data" + data)
    env = len(original) - 6 - len(data)
    return mutated[-env:-11] != original[-env:-11] or mutated[-3:] != original[-3:]


def body_change_failures(shape: Shape, seq: int, original: bytes, mutated: bytes,
                         recomputed: str = "none") -> set[tuple[str, int]]:
    """The (check, seq) verify may report for a changed entry body.

    ``recomputed`` is how much of the tree the forger rewrote to match: "none", "leaf" (the leaf
    hash inside its level-0 tile), "tile" (that tile's hashes and root) or "all" (every tile).
    """
    h = shape.height
    if not shape.in_tile(seq, 0) or recomputed == "all":
        hash_failure = shape.head_root(seq)
    elif recomputed == "none":
        hash_failure = ("leaf-hash", seq)
    elif recomputed == "leaf":
        hash_failure = ("node-hash", (seq >> h) << h)  # the stored root of the level-0 tile
    elif shape.in_tile(seq, 1):
        hash_failure = ("node-hash", (seq >> h) << h)  # the tile's root, held in a level-1 tile
    else:
        hash_failure = shape.head_root(seq)
    if envelope_changed(original, mutated):
        return {("entry-envelope", seq), hash_failure}
    return {hash_failure}


def tile_change_failures(shape: Shape, key: int, column: str, op: str,
                         pos: int) -> set[tuple[str, int]]:
    """The (check, seq) for a changed tile hashes or root column: exact, no alternatives."""
    h = shape.height
    level, idx = key >> 32, key & 0xFFFFFFFF
    first = idx << (h * level + h)  # the first leaf the tile covers
    if column == "root":
        return {("node-hash", first)}
    check = "leaf-hash" if level == 0 else "node-hash"
    if op != "xor":  # no longer W hashes: the tile is malformed
        return {(check, first)}
    j = (pos % (32 << h)) // 32  # the hash inside the tile that changed
    return {(check, ((idx << h) + j) << (h * level))}


# target: (table, column, key expression, rows considered)
TARGETS = {
    "entry-body": ("entries", "body", "seq", "1"),
    "span-run": ("spans", "run", "first", "run IS NOT NULL"),
    "span-task": ("spans", "task", "first", "task IS NOT NULL"),
    "span-kind": ("spans", "kind", "first", "1"),
    "tile-hashes": ("tiles", "hashes", "((level << 32) | idx)", "1"),
    "tile-root": ("tiles", "root", "((level << 32) | idx)", "1"),
    "head-root": ("spans", "root", "first", "root IS NOT NULL"),
    "runs-run": ("runs", "run", "run", "1"),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(height=st.sampled_from(sorted(PRISTINE_BATCHES)), target=st.sampled_from(sorted(TARGETS)),
       row=st.integers(min_value=0, max_value=100), op=st.sampled_from(["xor", "delete", "insert"]),
       pos=st.integers(min_value=0, max_value=10_000), value=st.integers(min_value=0, max_value=255))
def test_any_single_byte_change_is_detected(pristine: dict[int, Pristine], height: int, target: str,
                                            row: int, op: str, pos: int, value: int) -> None:
    """Flipping, deleting or inserting one byte of any stored entry, span, tile, head or runs row fails verify."""
    # The check (and seq) is predicted per target: an entry body is caught by its leaf hash when
    # a full level-0 tile covers it and by the first head over it otherwise (or by the envelope
    # check when the change hits the envelope); a span's text by the envelope check of its first
    # entry; a tile by the exact hash that changed; a tree head (the root on the span that ends a
    # commit) by head-root at that span's last seq, size - 1, since nothing checked before the
    # heads reads a span's root; a run name in the runs index by entry-index at the first span of
    # the run it named, which the index now lacks (the changed name is a run no span holds, but
    # the real runs are checked first).
    table, column, key, where = TARGETS[target]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "journal.db"
        db.write_bytes(pristine[height])
        with raw_db(db) as c:
            drop_all_triggers(c)
            shape = Shape(c)
            keys = [k for (k,) in c.execute(f"SELECT {key} FROM {table} WHERE {where} ORDER BY {key}")]
            chosen = keys[row % len(keys)]
            (value_before,) = c.execute(f"SELECT CAST({column} AS BLOB) FROM {table} WHERE {key} = ?",
                                        (chosen,)).fetchone()
            blob = bytes(value_before)
            mutated = _mutate(blob, op, pos, value)
            assert mutated != blob
            # keep the column's storage class
            cast = "TEXT" if (table, column) in {("spans", "run"), ("spans", "task"), ("spans", "kind"),
                                                 ("runs", "run")} else "BLOB"
            c.execute(f"UPDATE {table} SET {column} = CAST(? AS {cast}) WHERE {key} = ?",
                      (mutated, chosen))
        with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
            j.verify()
    if table == "entries":
        want = body_change_failures(shape, chosen, blob, mutated)
    elif table == "spans" and column == "root":
        want = {("head-root", shape.span_last[chosen])}
    elif table == "spans":
        want = {("entry-envelope", chosen)}
    elif table == "tiles":
        want = tile_change_failures(shape, chosen, column, op, pos)
    else:
        want = {("entry-index", shape.run_first[chosen])}
    assert (info.value.check, info.value.seq) in want, str(info.value)


@pytest.mark.parametrize("op", ["delete", "insert"])
def test_malformed_root_of_a_leaf_tile_is_node_hash(pristine: dict[int, Pristine], tmp_path: Path,
                                                    op: str) -> None:
    """A level-0 tile's root cut or padded to the wrong length is a node-hash failure."""
    db = tmp_path / "journal.db"
    db.write_bytes(pristine[2])
    with raw_db(db) as c:
        drop_all_triggers(c)
        (root,) = c.execute("SELECT root FROM tiles WHERE level = 0 AND idx = 1").fetchone()
        c.execute("UPDATE tiles SET root = ? WHERE level = 0 AND idx = 1",
                  (_mutate(root, op, 5, 7),))
    with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
        j.verify()
    assert (info.value.check, info.value.seq) == ("node-hash", 4)


def test_changed_head_on_a_multi_entry_span_is_named_by_its_last_seq(pristine: dict[int, Pristine],
                                                                     tmp_path: Path) -> None:
    """A tree head held by a span of several entries fails head-root at the span's last seq (size - 1), not its first."""
    db = tmp_path / "journal.db"
    db.write_bytes(pristine[4])
    with raw_db(db) as c:
        drop_all_triggers(c)
        assert c.execute("SELECT last + 1 FROM spans WHERE first = 16 AND root IS NOT NULL").fetchone() == (18,)
        c.execute("UPDATE spans SET root = zeroblob(32) WHERE first = 16")
    with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
        j.verify()
    assert (info.value.check, info.value.seq) == ("head-root", 17)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(height=st.sampled_from(sorted(PRISTINE_BATCHES)),
       recomputed=st.sampled_from(["none", "leaf", "tile", "all"]),
       pos=st.integers(min_value=0, max_value=10_000), xor=st.integers(min_value=1, max_value=255),
       row=st.integers(min_value=0, max_value=100))
def test_single_byte_change_with_recomputed_tiles_is_detected(pristine: dict[int, Pristine],
                                                              height: int, recomputed: str,
                                                              pos: int, xor: int, row: int) -> None:
    """Even when the forger rewrites the leaf hash, its tile, or every tile, one changed byte fails."""
    # What is left to catch it moves up: the tile's root, the level-1 tile, or the first recorded
    # head over the entry (or the envelope check, when the byte is in the envelope).
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "journal.db"
        db.write_bytes(pristine[height])
        with raw_db(db) as c:
            drop_all_triggers(c)
            shape = Shape(c)
            seq = row % shape.size
            (body,) = c.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
            out = bytearray(body)
            out[pos % len(out)] ^= xor
            c.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(out), seq))
            leaves = [merkle.leaf_hash(bytes(b)) for (b,) in
                      c.execute("SELECT body FROM entries ORDER BY seq")]
            tiles = full_tiles(merkle.MemoryNodes(leaves).nodes(), shape.size, height)
            t = (0, seq >> height)
            if recomputed == "leaf" and t in tiles:
                c.execute("UPDATE tiles SET hashes = ? WHERE level = 0 AND idx = ?",
                          (tiles[t][0], t[1]))
            elif recomputed == "tile" and t in tiles:
                c.execute("UPDATE tiles SET hashes = ?, root = ? WHERE level = 0 AND idx = ?",
                          (*tiles[t], t[1]))
            elif recomputed == "all":
                c.execute("DELETE FROM tiles")
                c.executemany("INSERT INTO tiles(level, idx, hashes, root) VALUES (?, ?, ?, ?)",
                              [(lv, ix, hs, rt) for (lv, ix), (hs, rt) in tiles.items()])
        with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
            j.verify()
    want = body_change_failures(shape, seq, bytes(body), bytes(out), recomputed)
    assert (info.value.check, info.value.seq) in want, str(info.value)


# --------------------------------------------------------------------------- proofs

PROOF_LOG = 300


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Journal, list[bytes]]:
    """A 300-entry journal grown in batches of 37 (and its leaf hashes)."""
    path = tmp_path_factory.mktemp("big") / "journal.db"
    j = Journal.open(path, create=True, clock=counter_clock(), harness=True)
    n = 0
    while n < PROOF_LOG:
        k = min(37, PROOF_LOG - n)
        j.append_many([{"kind": "k", "data": {"i": n + i}} for i in range(k)])
        n += k
    return j, [e.leaf_hash for e in j.entries()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_consistency_proofs_between_random_sizes_verify(big: tuple[Journal, list[bytes]],
                                                        data: st.DataObject) -> None:
    """For any 1 <= old <= new <= 300 the proof verifies and its roots are the reference roots."""
    j, leaves = big
    new = data.draw(st.integers(min_value=1, max_value=PROOF_LOG), label="new")
    old = data.draw(st.integers(min_value=1, max_value=new), label="old")
    p = j.consistency_proof(old, new)
    assert p.old_root == merkle.root_from_leaves(leaves[:old])
    assert p.new_root == merkle.root_from_leaves(leaves[:new])
    merkle.verify_consistency(old, new, p.old_root, p.new_root, list(p.hashes))
    if p.hashes:
        i = data.draw(st.integers(min_value=0, max_value=len(p.hashes) - 1), label="hash")
        bad = list(p.hashes)
        bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
        with pytest.raises(VerificationError):
            merkle.verify_consistency(old, new, p.old_root, p.new_root, bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_inclusion_proofs_at_random_sizes_verify(big: tuple[Journal, list[bytes]],
                                                 data: st.DataObject) -> None:
    """For any seq < size <= 300 the inclusion proof verifies against the reference root."""
    j, leaves = big
    size = data.draw(st.integers(min_value=1, max_value=PROOF_LOG), label="size")
    seq = data.draw(st.integers(min_value=0, max_value=size - 1), label="seq")
    p = j.inclusion_proof(seq, size)
    assert p.root == merkle.root_from_leaves(leaves[:size])
    merkle.verify_inclusion(seq, size, leaves[seq], list(p.hashes), p.root)
    other = data.draw(st.integers(min_value=0, max_value=size - 1), label="other")
    if leaves[other] != leaves[seq]:
        with pytest.raises(VerificationError):
            merkle.verify_inclusion(seq, size, leaves[other], list(p.hashes), p.root)
