"""The tile layout (format version 2): TileEdge, tile reads, stale writers, the span index."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import CodecError, JournalFormatError, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.store import FORMAT_NAME, FORMAT_VERSION, Store
from ledger.journal.tiles import (
    HASH_SIZE,
    MAX_HEIGHT,
    TileEdge,
    check_height,
    hash_up,
    locate,
    subtree_root,
)
from tests.journal.tamper_cases import counter_clock, raw_db

TileKey = tuple[int, int]
Tile = tuple[bytes, bytes]  # (the tile's W hashes, the root of its subtree)


# --------------------------------------------------------------------------- reference helpers


def full_tiles(nodes: dict[merkle.Key, bytes], size: int, height: int) -> dict[TileKey, Tile]:
    """Every full tile of a tree of ``size`` leaves, from MemoryNodes' hashes: (hashes, root)."""
    width = 1 << height
    out: dict[TileKey, Tile] = {}
    k = 0
    while (size >> (height * k)) >> height:
        for t in range((size >> (height * k)) >> height):
            out[(k, t)] = (b"".join(nodes[(height * k, t * width + i)] for i in range(width)),
                           nodes[(height * (k + 1), t)])
        k += 1
    return out


def partial_tiles(nodes: dict[merkle.Key, bytes], size: int, height: int) -> tuple[bytes, ...]:
    """The hashes of every not-yet-full tile at the right edge, per tile level (the edge's state)."""
    out = []
    k = 0
    while size >> (height * k):
        count = size >> (height * k)
        lo = count - count % (1 << height)
        out.append(b"".join(nodes[(height * k, i)] for i in range(lo, count)))
        k += 1
    return tuple(out)


def stored_tiles(store: Store) -> dict[TileKey, Tile]:
    """The tiles table as a dict (level, idx) -> (hashes, root), checking the stored types."""
    out = {}
    for level, idx, blob, root in store.all_tiles():
        assert type(level) is int and type(idx) is int
        assert type(blob) is bytes and type(root) is bytes
        out[(level, idx)] = (blob, root)
    return out


def fake_leaves(n: int, salt: bytes = b"") -> list[bytes]:
    """``n`` distinct 32-byte stand-ins for leaf hashes."""
    return [hashlib.sha256(salt + i.to_bytes(4, "big")).digest() for i in range(n)]


LEAVES = fake_leaves(600)


@functools.cache
def reference_root(size: int) -> bytes:
    """The RFC 6962 root of the first ``size`` entries of LEAVES (the reference recursion)."""
    return merkle.root_from_leaves(LEAVES[:size])


@functools.lru_cache(maxsize=1)
def reference_nodes() -> dict[merkle.Key, bytes]:
    """Every complete subtree of LEAVES, as MemoryNodes computes it."""
    return merkle.MemoryNodes(LEAVES).nodes()


def expected_new_tiles(old: int, new: int, height: int) -> set[TileKey]:
    """The tiles that are full at size ``new`` but not at size ``old``."""
    out = set()
    k = 0
    while (new >> (height * k)) >> height:
        before = (old >> (height * k)) >> height
        after = (new >> (height * k)) >> height
        out |= {(k, t) for t in range(before, after)}
        k += 1
    return out


# --------------------------------------------------------------------------- TileEdge


@settings(max_examples=150, deadline=None)
@given(height=st.integers(min_value=1, max_value=MAX_HEIGHT),
       batches=st.lists(st.integers(min_value=0, max_value=45), min_size=1, max_size=12),
       warm=st.lists(st.booleans(), min_size=12, max_size=12))
def test_edge_matches_reference_for_any_batches(height: int, batches: list[int],
                                                warm: list[bool]) -> None:
    """extended() hands back exactly the new full tiles, keeps the old edge, and roots agree."""
    nodes = reference_nodes()
    width = 1 << height
    edge = TileEdge.empty(height)
    size = 0
    for batch, warm_first in zip(batches, warm, strict=False):
        if warm_first:  # the cached subtree hashes of the old edge must not leak into the new one
            assert edge.root() == reference_root(size)
        before = (edge.size, edge.partial, edge.frontier(), edge.root())
        grown, tiles = edge.extended(LEAVES[size:size + batch])
        assert (edge.size, edge.partial, edge.frontier(), edge.root()) == before
        keys = [(k, t) for k, t, _, _ in tiles]
        assert keys == sorted(set(keys))
        assert set(keys) == expected_new_tiles(size, size + batch, height)
        for k, t, blob, top in tiles:
            assert len(blob) == HASH_SIZE * width
            assert blob == b"".join(nodes[(height * k, t * width + i)] for i in range(width))
            assert top == nodes[(height * (k + 1), t)]
        size += batch
        edge = grown
        assert edge.size == size and edge.height == height
        assert edge.partial == partial_tiles(nodes, size, height)
        assert edge.root() == reference_root(size)
        assert edge.frontier() == [nodes[key] for key in merkle.frontier_keys(size)]


@pytest.mark.parametrize("height", range(1, MAX_HEIGHT + 1))
def test_edge_root_at_every_size(height: int) -> None:
    """Growing one leaf at a time, the root equals root_from_leaves at every size 0..300."""
    nodes = reference_nodes()
    edge = TileEdge.empty(height)
    assert edge.root() == merkle.EMPTY_ROOT and edge.frontier() == []
    seen: dict[TileKey, Tile] = {}
    for size in range(300):
        edge, tiles = edge.extended([LEAVES[size]])
        for k, t, blob, top in tiles:
            assert (k, t) not in seen
            seen[(k, t)] = (blob, top)
        assert edge.root() == reference_root(size + 1), size + 1
    assert seen == full_tiles(nodes, 300, height)


def test_edge_height_eight_builds_level_one_tiles() -> None:
    """At height 8 the first level-1 tile appears at 65536 leaves and holds the 256 tile roots."""
    leaves = fake_leaves(65536 + 3, b"big")
    edge, tiles = TileEdge.empty(8).extended(leaves[:65535])
    assert [k for k, _, _, _ in tiles] == [0] * 255
    edge, tiles = edge.extended(leaves[65535:])
    assert [(k, t) for k, t, _, _ in tiles] == [(0, 255), (1, 0)]
    level0 = [subtree_root(b"".join(leaves[256 * t:256 * t + 256])) for t in range(256)]
    assert tiles[0][3] == level0[255]
    assert tiles[1][2] == b"".join(level0)
    assert tiles[1][3] == merkle.root_from_leaves(leaves[:65536])
    assert edge.root() == merkle.root_from_leaves(leaves)
    assert edge.partial == (b"".join(leaves[65536:]), b"", tiles[1][3])


@pytest.mark.parametrize("height, size", [(1, 5), (2, 23), (3, 77), (4, 300), (8, 257)])
def test_edge_from_stored_partials_equals_grown_edge(height: int, size: int) -> None:
    """An edge rebuilt from the expected partial hashes has the grown edge's root and frontier."""
    nodes = reference_nodes()
    rebuilt = TileEdge(height, size, list(partial_tiles(nodes, size, height)))
    grown, _ = TileEdge.empty(height).extended(LEAVES[:size])
    assert rebuilt.partial == grown.partial
    assert rebuilt.root() == grown.root() == reference_root(size)
    # trailing empty levels are tolerated (and dropped)
    padded = TileEdge(height, size, [*partial_tiles(nodes, size, height), b"", b""])
    assert padded.partial == grown.partial


H = HASH_SIZE


@pytest.mark.parametrize("size, partial", [
    (5, []),                                # nothing for a non-empty tree
    (5, [b"a" * H]),                        # level 2 missing
    (5, [b"a" * H, b"", b"a" * 2 * H]),      # level 2 too long
    (5, [b"", b"", b"a" * H]),              # level 0 missing its leaf
    (5, [b"a" * H, b"a" * H, b"a" * H]),     # level 1 must be empty at size 5
    (5, [b"a" * H, b"", b"a" * H, b"a" * H]),  # an extra level
    (5, [b"a" * (H - 1), b"", b"a" * H]),    # not whole hashes
    (4, [b"a" * 2 * H]),                    # size 4 at height 1: every tile is full
    (0, [b"a" * H]),                        # the empty tree has no right edge
], ids=["none", "short", "long-top", "no-leaf", "level1", "extra", "ragged", "full", "empty"])
def test_edge_refuses_partials_of_the_wrong_shape(size: int, partial: list[bytes]) -> None:
    """The constructor checks the partial hashes against the shape the size implies."""
    with pytest.raises(UsageError, match="partial tiles"):
        TileEdge(1, size, partial)


@pytest.mark.parametrize("height", [0, MAX_HEIGHT + 1, -1, True, 4.0, "4", None])
def test_bad_heights_are_refused(height: Any) -> None:
    """A tile height outside 1..8 or not an int is UsageError, for the edge and check_height."""
    with pytest.raises(UsageError, match="tile height"):
        check_height(height)
    with pytest.raises(UsageError, match="tile height"):
        TileEdge(height, 0, [])


@pytest.mark.parametrize("size", [-1, True, 1.0, "3"])
def test_bad_sizes_are_refused(size: Any) -> None:
    """A tree size that is not a non-negative int is UsageError."""
    with pytest.raises(UsageError, match="tree size"):
        TileEdge(2, size, [])


@pytest.mark.parametrize("bad", [b"x" * 31, b"x" * 33, b"", bytearray(32), memoryview(b"x" * 32),
                                 "x" * 32, None],
                         ids=["short", "long", "empty", "bytearray", "memoryview", "str", "none"])
def test_bad_leaves_are_refused(bad: Any) -> None:
    """extended() refuses anything but 32-byte bytes leaves, naming the index, and changes nothing."""
    edge, _ = TileEdge.empty(2).extended(LEAVES[:3])
    root = edge.root()
    with pytest.raises(UsageError, match="new leaf 1 "):
        edge.extended([LEAVES[3], bad])
    assert edge.size == 3 and edge.root() == root


def test_empty_extension_is_the_same_tree() -> None:
    """Extending by no leaves returns no tiles and an edge with the same root."""
    edge, _ = TileEdge.empty(1).extended(LEAVES[:7])
    same, tiles = edge.extended([])
    assert tiles == [] and same.size == 7 and same.root() == edge.root() == reference_root(7)


def test_locate_names_one_tile_holding_the_node() -> None:
    """For every node and height, locate's hashes lie in one tile and hash up to the node."""
    nodes = merkle.MemoryNodes(LEAVES[:70]).nodes()
    for height in (1, 2, 3, 4):
        for (level, index), value in nodes.items():
            tile_level, first, count, up = locate(level, index, height)
            assert first >> height == (first + count - 1) >> height
            packed = b"".join(nodes[(height * tile_level, first + i)] for i in range(count))
            assert hash_up(packed, up) == value, (level, index, height)


def test_subtree_root_and_fold() -> None:
    """subtree_root needs a power of two of hashes; fold of the frontier is the root."""
    assert subtree_root(b"".join(LEAVES[:8])) == reference_root(8)
    assert subtree_root(LEAVES[0]) == LEAVES[0]
    for bad in (b"", b"".join(LEAVES[:3]), LEAVES[0] + b"x"):
        with pytest.raises(UsageError):
            subtree_root(bad)
    nodes = reference_nodes()
    for size in (1, 2, 3, 13, 64, 99):
        assert merkle.fold([nodes[k] for k in merkle.frontier_keys(size)]) == reference_root(size)


# --------------------------------------------------------------------------- Store.fetch_nodes


def outside_keys(size: int) -> list[merkle.Key]:
    """Keys of subtrees that are not complete in a tree of ``size`` leaves."""
    keys: list[merkle.Key] = [(0, size), (0, size + 5), (-1, 0), (0, -1), (64, 0), (40, 0)]
    for level in range(0, max(size, 1).bit_length() + 2):
        keys.append((level, size >> level))  # the first index whose subtree runs past the end
    return keys


def check_fetch(j: Journal, mem: merkle.MemoryNodes) -> None:
    """fetch_nodes agrees with MemoryNodes on every complete subtree and refuses the others."""
    size = j.size
    assert mem.size == size
    want = mem.nodes()
    assert all((idx + 1) << level <= size for level, idx in want)
    assert j.store.fetch_nodes(list(want)) == want
    for key in outside_keys(size):
        with pytest.raises(KeyError):
            j.store.fetch_nodes([key])
        with pytest.raises(KeyError):  # one bad key spoils a batch of good ones
            j.store.fetch_nodes([*list(want)[:3], key])


@pytest.mark.parametrize("height", [1, 2, 3, 4])
def test_fetch_nodes_at_every_size(height: int) -> None:
    """Every complete subtree reads back as MemoryNodes computes it, at each size 0..70."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=height, harness=True) as j:
        mem = merkle.MemoryNodes()
        assert j.store.fetch_nodes([]) == {}
        check_fetch(j, mem)
        for i in range(70):
            e = j.append("k", {"i": i}, run="r", task=f"t{i % 3}")
            mem.append([e.leaf_hash])
            check_fetch(j, mem)
        assert stored_tiles(j.store) == full_tiles(mem.nodes(), 70, height)


def test_fetch_nodes_around_tile_boundaries_at_height_4() -> None:
    """With 16-hash tiles, fetches agree at 15/16/17 and 255/256/257 leaves (level-1 tile at 256)."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=4, harness=True) as j:
        mem = merkle.MemoryNodes()
        for target in (15, 16, 17, 255, 256, 257):
            batch = j.append_many([("k", {"i": n}, None, None) for n in range(j.size, target)])
            mem.append([e.leaf_hash for e in batch])
            check_fetch(j, mem)
            tiles = stored_tiles(j.store)
            assert tiles == full_tiles(mem.nodes(), target, 4)
            assert ((1, 0) in tiles) == (target >= 256)


def test_fetch_nodes_reads_full_tiles_not_entries(tmp_path: Path) -> None:
    """A node inside a full tile is read from the tile (O(1)), not rehashed from the entries."""
    path = tmp_path / "journal.db"
    with Journal.open(path, create=True, clock=counter_clock(), tile_height=2, harness=True) as j:
        for i in range(6):
            j.append("k", {"i": i})
        honest = j.store.fetch_nodes([(0, 1), (1, 0), (2, 0), (0, 5), (1, 2)])
    with raw_db(path) as c:
        c.execute("DROP TRIGGER entries_no_update")
        c.execute("UPDATE entries SET body = x'00' WHERE seq IN (1, 5)")
    with Journal.open(path, readonly=True) as j:
        got = j.store.fetch_nodes([(0, 1), (1, 0), (2, 0), (0, 5), (1, 2)])
    # seq 1 is in the full tile (0, 0); seq 5 is at the right edge and comes from its entry
    assert got[(0, 1)] == honest[(0, 1)] and got[(1, 0)] == honest[(1, 0)]
    assert got[(2, 0)] == honest[(2, 0)]
    assert got[(0, 5)] == merkle.leaf_hash(b"\x00") != honest[(0, 5)]
    assert got[(1, 2)] != honest[(1, 2)]


def test_fetch_nodes_huge_index_is_key_error() -> None:
    """A key whose index does not fit SQLite's integer is simply not in the tree (KeyError)."""
    with Journal.open(":memory:", tile_height=2, harness=True) as j:
        j.append("k", {})
        with pytest.raises(KeyError):
            j.store.fetch_nodes([(0, 2**63)])


def test_proofs_at_height_2_for_all_pairs() -> None:
    """At every size up to 40, every inclusion and consistency proof equals the reference one."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=2, harness=True) as j:
        mem = merkle.MemoryNodes()
        for size in range(1, 41):
            mem.append([j.append("k", {"n": size}).leaf_hash])
            root = mem.root()
            assert j.root_at(size) == root
            for seq in range(size):
                p = j.inclusion_proof(seq, size)
                assert list(p.hashes) == merkle.inclusion_proof(seq, size, mem.fetch)
                assert p.root == root and p.leaf_hash == mem.fetch([(0, seq)])[(0, seq)]
                merkle.verify_inclusion(seq, size, p.leaf_hash, list(p.hashes), p.root)
            for old in range(1, size + 1):
                c = j.consistency_proof(old, size)
                assert list(c.hashes) == merkle.consistency_proof(old, size, mem.fetch)
                assert c.old_root == mem.root(old) and c.new_root == root
                merkle.verify_consistency(old, size, c.old_root, c.new_root, list(c.hashes))


# --------------------------------------------------------------------------- stale writers


@pytest.mark.parametrize("height, turns", [
    (2, [("a", 3), ("b", 2), ("a", 4)]),                       # b crosses 4, stale a crosses 8
    (2, [("a", 1), ("b", 7), ("a", 1), ("b", 1), ("a", 8)]),   # both cross while the other waits
    (1, [("a", 3), ("b", 3), ("a", 3), ("b", 7)]),             # multi-level tiles on every turn
    (4, [("a", 15), ("b", 1), ("a", 1), ("b", 14), ("a", 2)]),  # exactly on the 16 boundary
])
def test_stale_writer_rebuilds_its_edge(tmp_path: Path, height: int,
                                        turns: list[tuple[str, int]]) -> None:
    """A writer whose cached edge is stale still writes the right tiles and heads."""
    path = tmp_path / "journal.db"
    a = Journal.open(path, create=True, clock=counter_clock(), tile_height=height, harness=True)
    b = Journal.open(path, clock=counter_clock(2_000_000_000_000_000_000), tile_height=height, harness=True)
    try:
        sizes = []
        stale = 0
        for who, n in turns:
            w = a if who == "a" else b
            cached = w.store._edge  # the writer's edge from its last commit, if any
            stale += cached is not None and cached.size != w.size
            w.append_many([("k", {"who": who, "i": i}, who, None) for i in range(n)])
            sizes.append(w.size)
            leaves = [e.leaf_hash for e in a.entries()]
            assert w.head()[1] == merkle.root_from_leaves(leaves)
            assert stored_tiles(w.store) == full_tiles(merkle.MemoryNodes(leaves).nodes(),
                                                       len(leaves), height)
        assert stale >= 1  # the case under test did happen
        assert [s for s, _, _ in a.store.all_heads()] == sizes
        for size, root, _ in a.store.all_heads():
            assert root == merkle.root_from_leaves(leaves[:size])
        summary = b.verify()
        assert summary["size"] == sum(n for _, n in turns)
        assert summary["tiles"] == len(full_tiles(merkle.MemoryNodes(leaves).nodes(),
                                                  len(leaves), height))
    finally:
        a.close()
        b.close()


def test_writer_recovers_after_a_failed_append() -> None:
    """An append that fails mid-transaction leaves the next append's tiles and root correct."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=1, harness=True) as j:
        j.append_many([("k", {"i": i}, None, None) for i in range(3)])
        with pytest.raises(CodecError):
            j.append_many([("k", {}, None, None), ("k", {"x": float("nan")}, None, None)])
        j.append_many([("k", {"i": i}, None, None) for i in range(3, 9)])
        leaves = [e.leaf_hash for e in j.entries()]
        assert j.head() == (9, merkle.root_from_leaves(leaves))
        assert stored_tiles(j.store) == full_tiles(merkle.MemoryNodes(leaves).nodes(), 9, 1)
        assert j.verify()["size"] == 9


# --------------------------------------------------------------------------- spans and rows


def span(first: int, last: int, run: str | None, task: str | None, kind: str) -> tuple[Any, ...]:
    """A span row as span_rows() reports it (text as bytes, then the column types)."""
    types = ",".join(["integer", "null" if run is None else "text",
                      "null" if task is None else "text", "text"])
    return (first, last, _utf8(run), _utf8(task), _utf8(kind), types)


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def test_spans_coalesce_within_a_batch_only(journal: Journal) -> None:
    """Consecutive items with equal run/task/kind share a span; batches never share one."""
    journal.append_many([
        ("a", {}, "r1", "t1"), ("a", {}, "r1", "t1"),
        ("b", {}, "r1", "t1"),
        ("b", {}, "r1", None), ("b", {}, "r1", None),
        ("b", {}, None, None), ("b", {}, None, None), ("b", {}, None, None),
        ("b", {}, "", None),                     # "" is a run, distinct from no run
        ("a", {}, "r1", "t1"),                   # equal to the first span, but not adjacent
    ])
    journal.append("a", {}, run="r1", task="t1")  # equal to the last span, but a new append
    journal.append_many([("c", {}, None, "t"), ("c", {}, None, "t")])
    assert journal.store.span_rows() == [
        span(0, 1, "r1", "t1", "a"),
        span(2, 2, "r1", "t1", "b"),
        span(3, 4, "r1", None, "b"),
        span(5, 7, None, None, "b"),
        span(8, 8, "", None, "b"),
        span(9, 9, "r1", "t1", "a"),
        span(10, 10, "r1", "t1", "a"),
        span(11, 12, None, "t", "c"),
    ]
    assert [e.seq for e in journal.entries(run="")] == [8]
    assert [e.seq for e in journal.entries(run="r1", task="t1")] == [0, 1, 2, 9, 10]
    assert [e.seq for e in journal.entries(kind="b", start=4, stop=9)] == [4, 5, 6, 7, 8]
    assert journal.verify()["spans"] == 8


KINDS = ["a", "b", "run.started", "run.x", "runner"]
RUNS = [None, "", "r1", "r2"]
TASKS = [None, "t1", "t2"]
ITEM = st.tuples(st.sampled_from(KINDS), st.sampled_from(RUNS), st.sampled_from(TASKS))


def expected_spans(batches: Sequence[Sequence[tuple[str, str | None, str | None]]]) -> list[Any]:
    """Brute force: one span per run of equal (run, task, kind) inside each batch."""
    out = []
    seq = 0
    for batch in batches:
        for i, (kind, run, task) in enumerate(batch):
            if i and batch[i - 1] == (kind, run, task):
                out[-1] = span(out[-1][0], seq, run, task, kind)
            else:
                out.append(span(seq, seq, run, task, kind))
            seq += 1
    return out


def split(items: list[Any], cuts: list[int]) -> Iterator[list[Any]]:
    """``items`` cut into non-empty batches at the given positions."""
    bounds = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if hi > lo:
            yield items[lo:hi]


@settings(max_examples=100, deadline=None)
@given(items=st.lists(ITEM, min_size=0, max_size=30), cuts=st.lists(st.integers(0, 60), max_size=6),
       height=st.sampled_from([1, 2, 4]), data=st.data())
def test_filtered_entries_equal_brute_force(items: list[tuple[str, str | None, str | None]],
                                            cuts: list[int], height: int,
                                            data: st.DataObject) -> None:
    """entries(run, task, kind, start, stop) returns exactly what a filter over all entries does."""
    batches = list(split(items, cuts))
    with Journal.open(":memory:", clock=counter_clock(), tile_height=height, harness=True) as j:
        for batch in batches:
            j.append_many([(kind, {"n": i}, run, task) for i, (kind, run, task) in enumerate(batch)])
        assert j.store.span_rows() == expected_spans(batches)
        every = list(j.entries())
        assert [(e.kind, e.run, e.task) for e in every] == items
        assert [s for s, _ in j.store.run_level_rows()] == [
            e.seq for e in every if e.kind.startswith("run.")]
        n = len(items)
        for _ in range(6):
            run = data.draw(st.sampled_from([None, "", "r1", "r2", "nope"]), label="run")
            task = data.draw(st.sampled_from([None, "t1", "t2", "nope"]), label="task")
            kind = data.draw(st.sampled_from([None, *KINDS, "run.*"]), label="kind")
            start = data.draw(st.integers(-2, n + 2), label="start")
            stop = data.draw(st.none() | st.integers(-2, n + 2), label="stop")
            got = [e.seq for e in j.entries(run=run, task=task, kind=kind, start=start, stop=stop)]
            want = [e.seq for e in every
                    if (run is None or e.run == run) and (task is None or e.task == task)
                    and (kind is None or e.kind == kind) and e.seq >= start
                    and (stop is None or e.seq < stop)]
            assert got == want, (run, task, kind, start, stop)


# --------------------------------------------------------------------------- find_leaf


@pytest.mark.parametrize("height, size", [(2, 0), (2, 1), (2, 4), (2, 10), (1, 9), (4, 16), (4, 37)])
def test_find_leaf_in_tiles_and_tail(height: int, size: int) -> None:
    """find_leaf finds every entry, in full tiles and in the partial tail; unknown hashes are None."""
    with Journal.open(":memory:", clock=counter_clock(), tile_height=height, harness=True) as j:
        entries = j.append_many([("k", {"i": i}, None, None) for i in range(size)])
        for e in entries:
            assert j.find_leaf(e.leaf_hash) == e.seq
        assert j.find_leaf(hashlib.sha256(b"nothing").digest()) is None
        assert j.find_leaf(b"") is None
        if size:
            assert j.find_leaf(entries[0].leaf_hash[:31]) is None
        tiles = stored_tiles(j.store)
        if (0, 0) in tiles:
            # 32 bytes straddling two stored leaf hashes are not a leaf
            assert j.find_leaf(tiles[(0, 0)][16:48]) is None
        for (level, _idx), blob in tiles.items():
            if level >= 1:  # a subtree hash stored in a higher tile is not a leaf
                assert j.find_leaf(blob[:32]) is None


# --------------------------------------------------------------------------- format and meta


def test_version_1_journal_is_refused(tmp_path: Path) -> None:
    """A format-version-1 database is refused naming its version and the supported one."""
    path = tmp_path / "journal.db"
    with raw_db(path) as c:
        c.executescript("""
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE entries(seq INTEGER PRIMARY KEY, leaf BLOB NOT NULL, body BLOB NOT NULL,
                                 run TEXT, task TEXT, kind TEXT NOT NULL);
            CREATE TABLE nodes(level INTEGER, idx INTEGER, hash BLOB, PRIMARY KEY(level, idx));
            CREATE TABLE heads(size INTEGER PRIMARY KEY, root BLOB NOT NULL, ts INTEGER NOT NULL);
            CREATE TABLE checkpoints(size INTEGER PRIMARY KEY, note TEXT NOT NULL,
                                     ts INTEGER NOT NULL);
        """)
        c.execute("INSERT INTO meta VALUES ('format', ?), ('version', '1')", (FORMAT_NAME,))
    before = path.read_bytes()
    assert FORMAT_VERSION == "2"
    for kw in ({}, {"readonly": True}, {"create": True}):
        with pytest.raises(JournalFormatError, match=r"version '1' is not supported.*version 2"):
            Journal.open(path, **kw, harness=True)  # type: ignore[arg-type]
    assert path.read_bytes() == before


@pytest.mark.parametrize("value", ["0", "x", "9", "", "-1", "2.0"])
def test_bad_meta_tile_height_is_refused(db_path: Path, value: str) -> None:
    """A journal whose meta tile_height is not an integer in 1..8 is refused, naming the value."""
    with Journal.open(db_path, create=True, tile_height=2, harness=True) as j:
        j.append("a", {})
    with raw_db(db_path) as c:
        c.execute("UPDATE meta SET value = ? WHERE key = 'tile_height'", (value,))
    for kw in ({}, {"readonly": True}):
        with pytest.raises(JournalFormatError, match=f"bad tile_height {value!r}"):
            Journal.open(db_path, **kw, harness=True)  # type: ignore[arg-type]


def test_missing_meta_tile_height_is_refused(db_path: Path) -> None:
    """A journal with no tile_height in meta is refused rather than guessed."""
    with Journal.open(db_path, create=True, harness=True):
        pass
    with raw_db(db_path) as c:
        c.execute("DELETE FROM meta WHERE key = 'tile_height'")
    with pytest.raises(JournalFormatError, match="tile_height"):
        Journal.open(db_path, harness=True)


def test_tile_height_is_fixed_at_creation(db_path: Path) -> None:
    """The height chosen at creation is stored and kept; a later open cannot change it."""
    with Journal.open(db_path, create=True, tile_height=2, harness=True) as j:
        j.append_many([("k", {"i": i}, None, None) for i in range(5)])
    with raw_db(db_path) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'tile_height'").fetchone() == ("2",)
    with Journal.open(db_path, tile_height=3, harness=True) as j:
        assert j.store.tile_height == 2
        j.append_many([("k", {"i": i}, None, None) for i in range(5, 16)])
        leaves = [e.leaf_hash for e in j.entries()]
        assert stored_tiles(j.store) == full_tiles(merkle.MemoryNodes(leaves).nodes(), 16, 2)
        assert j.verify()["tiles"] == 5  # four level-0 tiles and one level-1 tile


@pytest.mark.parametrize("height", [0, 9, True])
def test_bad_tile_height_creates_nothing(tmp_path: Path, height: Any) -> None:
    """Creating a journal with an unusable tile height is UsageError and leaves no file."""
    path = tmp_path / "sub" / "journal.db"
    with pytest.raises(UsageError, match="tile height"):
        Journal.open(path, create=True, tile_height=height, harness=True)
    assert not path.parent.exists()


def test_partial_tile_row_is_node_extra(db_path: Path) -> None:
    """A hand-inserted partial tile at the right edge (triggers allow it) is node-extra in verify."""
    with Journal.open(db_path, create=True, tile_height=2, harness=True) as j:
        j.append_many([("k", {"i": i}, None, None) for i in range(6)])
        edge = j.store.fetch_nodes([(0, 4), (0, 5)])
    with raw_db(db_path) as c:
        c.execute("INSERT INTO tiles(level, idx, hashes, root) VALUES (0, 1, ?, ?)",
                  (edge[(0, 4)] + edge[(0, 5)], merkle.node_hash(edge[(0, 4)], edge[(0, 5)])))
    with Journal.open(db_path, readonly=True) as j, pytest.raises(VerificationError) as info:
        j.verify()
    assert (info.value.check, info.value.seq) == ("node-extra", 4)
