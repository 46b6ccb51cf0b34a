"""How the journal keeps its Merkle tree on disk: full tiles of ``2**h`` hashes (pure code).

The tree is cut into horizontal bands ``h`` levels high (``h`` is the tile height, 4 by default).
Tile ``(k, t)`` is the concatenation of the ``W = 2**h`` hashes at tree level ``h*k``, indices
``t*W .. t*W + W - 1``: tile level 0 holds leaf hashes, tile level 1 the roots of the level-0
tiles, and so on. Only full tiles are stored. A node inside a band (tree level ``h*k + b`` with
``0 < b < h``) is not stored: it is the hash of ``2**b`` neighbouring hashes of one tile, so
reading one tile and hashing at most ``W - 1`` pairs gives it.

Each stored tile also carries its root (the hash of its whole subtree, which is hash ``t`` of tree
level ``h*(k+1)``). The hashes at the right edge of the tree, in tiles that are not full yet, are
read from there: a level-0 hash is the leaf hash of an entry's bytes, and a level-``h*k`` hash for
``k >= 1`` is the stored root of a full tile one level down. So any complete subtree costs one
tile read, or at most ``W - 1`` entry or tile-root reads at the right edge, and a root or proof
needs O(log n) reads. This is the tile layout of the C2SP tlog-tiles specification, without its
partial tiles.

``TileEdge`` is the writer's view: the hashes of every partial tile (the right edge), from which
the root and the frontier follow, and which ``extended`` grows by new leaves, handing back the
tiles that became full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

from ledger.errors import UsageError
from ledger.journal.merkle import EMPTY_ROOT, Key, fold

HASH_SIZE = 32
DEFAULT_HEIGHT = 4
MAX_HEIGHT = 8

_sha256 = hashlib.sha256


def check_height(height: object) -> int:
    """The tile height as an int, or UsageError for a height this code cannot use."""
    if not isinstance(height, int) or isinstance(height, bool) or not 1 <= height <= MAX_HEIGHT:
        raise UsageError(f"tile height must be an integer in 1..{MAX_HEIGHT}, got {height!r}")
    return height


def hash_pairs(packed: bytes) -> bytes:
    """One level up: the node hashes of adjacent pairs of packed 32-byte hashes."""
    sha = _sha256
    view = memoryview(packed)
    return b"".join([sha(b"\x01" + view[i:i + 64]).digest() for i in range(0, len(packed) - 63, 64)])


def hash_up(packed: bytes, levels: int) -> bytes:
    """``levels`` levels up from packed hashes whose count is a multiple of ``2**levels``."""
    for _ in range(levels):
        packed = hash_pairs(packed)
    return packed


def subtree_root(packed: bytes) -> bytes:
    """The root of packed hashes whose count is a power of two."""
    count = len(packed) // HASH_SIZE
    if count == 0 or count & (count - 1) or len(packed) % HASH_SIZE:
        raise UsageError(f"subtree of {len(packed)} bytes is not a power of two of hashes")
    while len(packed) > HASH_SIZE:
        packed = hash_pairs(packed)
    return packed


def locate(level: int, index: int, height: int) -> tuple[int, int, int, int]:
    """Where node ``(level, index)`` lives: ``(tile_level, first, count, up)``.

    The node is the hash, ``up`` levels up, of the ``count`` hashes at tree level
    ``height * tile_level`` with indices ``first .. first + count - 1``; those all sit in tile
    ``(tile_level, first >> height)``.
    """
    tile_level, up = divmod(level, height)
    return tile_level, index << up, 1 << up, up


def _decompose(part: bytes, height: int) -> list[bytes]:
    """The complete-subtree hashes of a partial tile, largest (leftmost) first."""
    out = []
    pos = 0
    count = len(part) // HASH_SIZE
    for bit in range(height - 1, -1, -1):
        if count & (1 << bit):
            out.append(subtree_root(part[pos:pos + (HASH_SIZE << bit)]))
            pos += HASH_SIZE << bit
    return out


def _grown(pieces: list[bytes], count: int, added: bytes) -> list[bytes]:
    """The subtree hashes of a partial tile of ``count`` hashes after ``added`` (packed) joins it.

    ``pieces`` is the binary decomposition of the ``count`` hashes, largest first; each new hash
    merges with one piece per trailing 1 bit of the count, as in RFC 6962's frontier.
    """
    out = list(pieces)
    sha = _sha256
    for pos in range(0, len(added), HASH_SIZE):
        acc = added[pos:pos + HASH_SIZE]
        c = count
        while c & 1:
            acc = sha(b"\x01" + out.pop() + acc).digest()
            c >>= 1
        out.append(acc)
        count += 1
    return out


class TileEdge:
    """The right edge of a tree kept as tiles: the packed hashes of every partial tile.

    ``partial[k]`` holds the hashes at tree level ``h*k`` that are not yet in a full tile, i.e.
    indices ``(c >> h) << h .. c - 1`` where ``c = size >> (h*k)``. Instances are not changed in
    place: ``extended`` returns a new edge, so a writer keeps the old one if its commit fails.
    """

    __slots__ = ("height", "size", "partial", "_pieces")

    def __init__(self, height: int, size: int, partial: Sequence[bytes]) -> None:
        self.height = check_height(height)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise UsageError(f"tree size must be a non-negative integer, got {size!r}")
        self.size = size
        want = [(hi - lo) * HASH_SIZE for lo, hi in self.partial_ranges(size, height)]
        parts = [bytes(p) for p in partial]
        while parts and not parts[-1]:
            parts.pop()
        if [len(p) for p in parts] != want:
            raise UsageError(f"partial tiles of a tree of size {size} must hold "
                             f"{[w // HASH_SIZE for w in want]} hashes per level, "
                             f"got {[len(p) / HASH_SIZE for p in parts]}")
        self.partial: tuple[bytes, ...] = tuple(parts)
        # per tile level, the complete-subtree hashes of its partial tile (filled on demand)
        self._pieces: list[list[bytes] | None] = [None] * len(parts)

    @classmethod
    def empty(cls, height: int = DEFAULT_HEIGHT) -> TileEdge:
        return cls(height, 0, ())

    @staticmethod
    def partial_ranges(size: int, height: int) -> list[tuple[int, int]]:
        """Per tile level k: the index range ``[lo, hi)`` at tree level ``h*k`` of its partial tile."""
        out = []
        count = size
        while count:
            hi = count
            lo = (count >> height) << height
            out.append((lo, hi))
            count >>= height
        return out

    def extended(self, leaves: Sequence[bytes]) -> tuple[TileEdge, list[tuple[int, int, bytes, bytes]]]:
        """The edge after appending leaf hashes, and the tiles now full: ``(level, index, hashes, root)``.

        ``root`` is the hash of the tile's subtree, i.e. hash ``index`` of tree level ``h*(level+1)``.
        """
        h = self.height
        if len(leaves) == 1 and self.partial and len(self.partial[0]) + HASH_SIZE < HASH_SIZE << h:
            # one leaf that does not fill a tile (15 appends in 16): only level 0 changes
            leaf = leaves[0]
            if type(leaf) is not bytes or len(leaf) != HASH_SIZE:
                raise UsageError(f"new leaf 0 is not a {HASH_SIZE}-byte leaf hash")
            part = self.partial[0]
            old0 = self._pieces[0]
            grown = TileEdge.__new__(TileEdge)
            grown.height = h
            grown.size = self.size + 1
            grown.partial = (part + leaf, *self.partial[1:])
            grown._pieces = [None if old0 is None else _grown(old0, len(part) // HASH_SIZE, leaf),
                             *self._pieces[1:]]
            return grown, []
        try:
            add = b"".join(leaves)
        except TypeError:
            add = b""
        if leaves and (len(add) != HASH_SIZE * len(leaves) or set(map(type, leaves)) != {bytes}
                       or set(map(len, leaves)) != {HASH_SIZE}):
            bad = next((i for i, leaf in enumerate(leaves)
                        if type(leaf) is not bytes or len(leaf) != HASH_SIZE), 0)
            raise UsageError(f"new leaf {bad} is not a {HASH_SIZE}-byte leaf hash")
        tile_bytes = HASH_SIZE << h
        parts = list(self.partial)
        tiles: list[tuple[int, int, bytes, bytes]] = []
        pieces = list(self._pieces)
        count = self.size  # hashes at the current tree level before the append
        k = 0
        while add:
            if k == len(parts):
                parts.append(b"")
                pieces.append([])
            cur = parts[k] + add
            full = len(cur) // tile_bytes
            old = pieces[k]
            # a few hashes added to a partial tile that stays partial: grow its subtree hashes
            # the way a frontier grows (about one hash each) instead of recomputing them
            pieces[k] = _grown(old, len(parts[k]) // HASH_SIZE, add) if old is not None and not full \
                and len(add) <= 4 * HASH_SIZE else None
            add = b""
            if full:
                # every tile this append filled at this level, hashed up together
                region = cur[:full * tile_bytes]
                add = hash_up(region, h)
                first_tile = count >> h
                tiles += [(k, first_tile + f, region[f * tile_bytes:(f + 1) * tile_bytes],
                           add[f * HASH_SIZE:(f + 1) * HASH_SIZE]) for f in range(full)]
                cur = cur[full * tile_bytes:]
            parts[k] = cur
            count >>= h
            k += 1
        while parts and not parts[-1]:
            parts.pop()
        grown = TileEdge.__new__(TileEdge)
        grown.height = h
        grown.size = self.size + len(leaves)
        grown.partial = tuple(parts)
        # a level whose partial tile did not change keeps its subtree hashes
        grown._pieces = pieces[:len(parts)]
        return grown, tiles

    def frontier(self) -> list[bytes]:
        """The complete-subtree hashes, left to right, whose right fold is the root."""
        out: list[bytes] = []
        for k in range(len(self.partial) - 1, -1, -1):
            pieces = self._pieces[k]
            if pieces is None:
                pieces = self._pieces[k] = _decompose(self.partial[k], self.height)
            out.extend(pieces)
        return out

    def root(self) -> bytes:
        """The RFC 6962 root of the tree (SHA-256 of nothing for the empty tree)."""
        hashes = self.frontier()
        return fold(hashes) if hashes else EMPTY_ROOT


def nodes_from_tiles(keys: Sequence[Key], height: int, max_index: int,
                     read_tiles: Callable[[Sequence[tuple[int, int]]], Mapping[tuple[int, int], bytes]],
                     read_level: Callable[[int, int, int], list[bytes]]) -> dict[Key, bytes]:
    """The hashes of complete-subtree keys ``(level, index)``: each from the one full tile that
    holds it (``read_tiles(tile keys)``: the stored full tiles among them), or, at the right edge
    of the tree where tiles are not full yet, from the hashes one tile level down
    (``read_level(tile level, lo, hi)``). ``KeyError`` for a node that cannot exist."""
    h = height
    mask = (1 << h) - 1
    want: dict[Key, tuple[int, int, int, int]] = {}
    for level, index in keys:
        if level < 0 or index < 0 or level >= 64 or (index + 1) << level > max_index:
            raise KeyError(f"tree node ({level},{index}) cannot exist")
        want[(level, index)] = locate(level, index, h)
    tiles = read_tiles(sorted({(tl, first >> h) for tl, first, _n, _up in want.values()}))
    out: dict[Key, bytes] = {}
    edge: dict[int, tuple[int, int]] = {}  # tile level -> index range read from below
    for key, (tl, first, count, up) in want.items():
        blob = tiles.get((tl, first >> h))
        if blob is not None:
            off = (first & mask) * HASH_SIZE
            out[key] = hash_up(blob[off:off + count * HASH_SIZE], up)
        else:
            lo, hi = edge.get(tl, (first, first + count))
            edge[tl] = (min(lo, first), max(hi, first + count))
    if edge:
        below = {tl: (lo, read_level(tl, lo, hi)) for tl, (lo, hi) in edge.items()}
        for key, (tl, first, count, up) in want.items():
            if key not in out:
                lo, hashes = below[tl]
                out[key] = hash_up(b"".join(hashes[first - lo:first - lo + count]), up)
    return out
