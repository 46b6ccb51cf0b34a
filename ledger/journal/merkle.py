"""The RFC 6962 / RFC 9162 Merkle tree of the journal: hashing, proofs, verification, appends.

Pure code: no I/O. Trees are addressed the way the store keeps them. Node ``(level, index)`` is
the hash of the complete, aligned subtree over leaves ``[index * 2**level, (index + 1) * 2**level)``;
level 0 holds the leaf hashes. Every other hash the RFC needs (the root, a sibling on the
right edge of the tree) folds a few of those nodes together.

Each generator works in three steps. It works out which nodes it needs (O(log n) keys), asks
``fetch`` for all of them in one call, then hashes. ``fetch`` takes a sequence of keys and returns a
mapping that holds every one of them. A missing or malformed node raises
``VerificationError(check="tree-nodes")``.

The verifiers take hostile input. They check types, ranges (``0 <= index < size``,
``0 <= old_size <= new_size``, sizes below 2**64) and the exact number of proof hashes, each
exactly 32 bytes, before they hash anything. Their loops are bounded by the 64 bits of a size.
They return ``None`` or raise ``VerificationError`` with ``check`` set to ``inclusion-proof`` or
``consistency-proof``. Bad arguments to the generators raise ``UsageError``.

Edge cases follow transparency-dev/merkle. An inclusion proof needs ``size > 0``. A consistency
proof between equal sizes is empty, and the two roots must be equal (both must be the empty
root when the size is 0). A consistency proof from size 0 to a larger size does not exist: it
would prove nothing. The generator refuses to make one and the verifier rejects it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

from ledger.errors import UsageError, VerificationError

HASH_SIZE = 32
MAX_SIZE = 2**64 - 1
"""Largest tree size or leaf index accepted (sizes are uint64 in checkpoints and upstream tools)."""

EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()

Key: TypeAlias = tuple[int, int]
"""``(level, index)``: the complete subtree over leaves ``[index << level, (index + 1) << level)``."""

Fetch: TypeAlias = Callable[[Sequence[Key]], Mapping[Key, bytes]]
"""Return the hash of every key asked for, in one round trip."""

_sha256 = hashlib.sha256
_INCLUSION = "inclusion-proof"
_CONSISTENCY = "consistency-proof"


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: SHA-256(0x00 || data). The one definition; every caller uses it or
    ``leaf_hashes``."""
    return _sha256(b"\x00" + data).digest()


def leaf_hashes(bodies: Iterable[bytes]) -> list[bytes]:
    """``leaf_hash`` of each of ``bodies``, in order (the batch form the store and verify use)."""
    sha = _sha256
    return [sha(b"\x00" + body).digest() for body in bodies]


RUN_DIGEST_LABEL = b"eval-ledger/run-entries/v1\x00"


def in_run_digest(kind: str) -> bool:
    """Whether an entry of ``kind`` counts in its run's digest: every harness kind (outside tools'
    ``ext.*`` entries are not the harness's to vouch for)."""
    return not kind.startswith("ext.")


class RunDigest:
    """Running SHA-256 over the leaf hashes of a run's entries (``in_run_digest`` kinds), in seq
    order. ``run.finished`` records it as ``entries`` (``as_data``), so a bundle holding only the
    run's own entries still proves that none of them was left out."""

    __slots__ = ("_h", "count")

    def __init__(self) -> None:
        self._h = _sha256(RUN_DIGEST_LABEL)
        self.count = 0

    def add(self, leaf: bytes) -> None:
        self._h.update(leaf)
        self.count += 1

    def as_data(self) -> dict[str, int | str]:
        return {"count": self.count, "digest": self._h.hexdigest()}


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: SHA-256(0x01 || left || right)."""
    return _sha256(b"\x01" + left + right).digest()


# --------------------------------------------------------------------------- tree shape


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE


def _show(value: object) -> str:
    """Short description of a rejected value (never a huge repr)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (
            str(value) if value.bit_length() <= 80 else f"an integer of {value.bit_length()} bits"
        )
    return f"a {type(value).__name__}"


def _usage_count(value: object, what: str) -> int:
    if not _is_count(value):
        raise UsageError(f"{what} must be an integer in [0, 2**64), got {_show(value)}")
    assert isinstance(value, int)
    return value


def _range_keys(lo: int, hi: int) -> list[Key]:
    """Complete aligned subtrees covering ``[lo, hi)``, left to right (``lo`` must be aligned)."""
    keys: list[Key] = []
    remaining = hi - lo
    while remaining:
        level = remaining.bit_length() - 1
        keys.append((level, lo >> level))
        lo += 1 << level
        remaining -= 1 << level
    return keys


def root_keys(size: int) -> list[Key]:
    """The complete subtrees, left to right, whose right fold is the root of ``[0, size)``."""
    return _range_keys(0, _usage_count(size, "tree size"))


def frontier_keys(size: int) -> list[Key]:
    """The right edge of a tree of ``size`` leaves: all ``extend`` needs to append to it."""
    return root_keys(size)


def _inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose hashes form the inclusion proof of ``index`` (RFC 9162 PATH), bottom-up."""
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        mid = lo + (1 << ((hi - lo - 1).bit_length() - 1))  # largest power of two below n
        if index < mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
    ranges.reverse()
    return ranges


def _consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose hashes form PROOF(old_size, D[new_size]) (RFC 9162 SUBPROOF), bottom-up.

    Requires ``0 < old_size < new_size``.
    """
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, new_size
    whole_old_tree = True  # SUBPROOF's b: the old tree is exactly the current subtree
    while old_size != hi:
        mid = lo + (1 << ((hi - lo - 1).bit_length() - 1))
        if old_size <= mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
            whole_old_tree = False
    if not whole_old_tree:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def _keys_of(ranges: Iterable[tuple[int, int]]) -> list[Key]:
    seen: dict[Key, None] = {}
    for lo, hi in ranges:
        for key in _range_keys(lo, hi):
            seen[key] = None
    return list(seen)


def inclusion_keys(index: int, size: int) -> list[Key]:
    """Every node ``inclusion_proof(index, size, ...)`` fetches (at most about 2*log2(size))."""
    size = _usage_count(size, "tree size")
    index = _usage_count(index, "leaf index")
    if index >= size:
        raise UsageError(f"leaf index {index} is not in a tree of size {size}")
    return _keys_of(_inclusion_ranges(index, size))


def consistency_keys(old_size: int, new_size: int) -> list[Key]:
    """Every node ``consistency_proof(old_size, new_size, ...)`` fetches."""
    old_size, new_size = _consistency_sizes(old_size, new_size)
    if old_size == new_size:
        return []
    return _keys_of(_consistency_ranges(old_size, new_size))


def _consistency_sizes(old_size: int, new_size: int) -> tuple[int, int]:
    old_size = _usage_count(old_size, "old tree size")
    new_size = _usage_count(new_size, "new tree size")
    if old_size > new_size:
        raise UsageError(f"old tree size {old_size} is larger than new tree size {new_size}")
    if old_size == 0 and new_size > 0:
        raise UsageError(
            "there is no consistency proof from the empty tree (old size 0): every tree extends it"
        )
    return old_size, new_size


# --------------------------------------------------------------------------- fetching and folding


def _fetch_all(fetch: Fetch, keys: Sequence[Key]) -> Mapping[Key, bytes]:
    """Call ``fetch`` once for ``keys`` and check it returned a 32-byte hash for each one."""
    try:
        got = fetch(keys)
    except LookupError as exc:
        missing = exc.args[0] if exc.args and exc.args[0] in keys else None
        raise _missing(missing) from exc
    for key in keys:
        value = got.get(key)
        if value is None:
            raise _missing(key)
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise VerificationError(
                "tree-nodes",
                f"node (level={key[0]}, index={key[1]}) is not a {HASH_SIZE}-byte hash",
            )
    return got


def _missing(key: Key | None) -> VerificationError:
    where = f"node (level={key[0]}, index={key[1]})" if key else "a requested node"
    return VerificationError("tree-nodes", f"node source lacks {where}")


def fold(hashes: Sequence[bytes]) -> bytes:
    """Right fold of adjacent subtree hashes (left to right) into the hash of their union."""
    acc = hashes[-1]
    for i in range(len(hashes) - 2, -1, -1):
        acc = _sha256(b"\x01" + hashes[i] + acc).digest()
    return acc


def _hashes_of(ranges: Sequence[tuple[int, int]], fetch: Fetch) -> list[bytes]:
    per_range = [_range_keys(lo, hi) for lo, hi in ranges]
    if not per_range:
        return []
    got = _fetch_all(fetch, _keys_of(ranges))
    return [fold([got[key] for key in keys]) for keys in per_range]


def root(size: int, fetch: Fetch) -> bytes:
    """The root of the tree of the first ``size`` leaves (one fetch of at most 64 nodes)."""
    keys = root_keys(size)
    if not keys:
        return EMPTY_ROOT
    got = _fetch_all(fetch, keys)
    return fold([got[key] for key in keys])


def inclusion_proof(index: int, size: int, fetch: Fetch) -> list[bytes]:
    """The RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves, bottom-up."""
    inclusion_keys(index, size)  # validates the arguments
    return _hashes_of(_inclusion_ranges(index, size), fetch)


def consistency_proof(old_size: int, new_size: int, fetch: Fetch) -> list[bytes]:
    """The RFC 9162 consistency proof from ``old_size`` to ``new_size`` (empty when equal)."""
    old_size, new_size = _consistency_sizes(old_size, new_size)
    if old_size == new_size:
        return []
    return _hashes_of(_consistency_ranges(old_size, new_size), fetch)


def root_from_leaves(leaves: Sequence[bytes]) -> bytes:
    """Reference MTH over leaf HASHES, straight from the RFC's recursive definition."""

    def mth(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return leaves[lo]
        mid = lo + (1 << ((hi - lo - 1).bit_length() - 1))
        return node_hash(mth(lo, mid), mth(mid, hi))

    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, bytes) or len(leaf) != HASH_SIZE:
            raise UsageError(f"leaf {i} is not a {HASH_SIZE}-byte leaf hash")
    return mth(0, len(leaves)) if leaves else EMPTY_ROOT


# --------------------------------------------------------------------------- appending


def extend(
    size: int, frontier: Mapping[Key, bytes], new_leaves: Sequence[bytes]
) -> tuple[list[tuple[int, int, bytes]], dict[Key, bytes]]:
    """Append leaf hashes to a tree of ``size`` leaves known only by its frontier.

    ``frontier`` must hold the hashes at ``frontier_keys(size)``. Returns the new nodes of
    level >= 1 as ``(level, index, hash)`` rows, in the order they were completed, and the
    frontier of the grown tree (level-0 keys included).
    """
    size = _usage_count(size, "tree size")
    if len(new_leaves) > MAX_SIZE - size:
        raise UsageError(f"appending {len(new_leaves)} leaves to {size} overflows 2**64 leaves")
    if len(frontier) != size.bit_count():
        raise UsageError(
            f"frontier of a tree of size {size} must hold {size.bit_count()} nodes, "
            f"got {len(frontier)}"
        )
    # Bit b of a size n is set exactly when the frontier has node (b, (n >> b) - 1). Leaf n
    # completes one subtree per trailing 1 bit of n, each time merging with the frontier node
    # at that level, which leaves the frontier; the last subtree completed joins it.
    grown = dict(frontier)
    rows: list[tuple[int, int, bytes]] = []
    add_row = rows.append
    take = grown.pop
    sha = _sha256
    n = size
    for leaf in new_leaves:
        if leaf.__class__ is not bytes or len(leaf) != HASH_SIZE:
            raise UsageError(f"new leaf {n - size} is not a {HASH_SIZE}-byte leaf hash")
        h = leaf
        m = n
        level = 0
        while m & 1:
            left = take((level, m - 1), None)
            if left.__class__ is not bytes or len(left) != HASH_SIZE:
                raise UsageError(
                    f"frontier of a tree of size {size} lacks a {HASH_SIZE}-byte hash at "
                    f"(level={level}, index={m - 1})"
                )
            h = sha(b"\x01" + left + h).digest()
            m >>= 1
            level += 1
            add_row((level, m, h))
        grown[(level, m)] = h
        n += 1
    return rows, grown


class MemoryNodes:
    """An in-memory node source (every leaf and complete subtree), for tests and bundles."""

    def __init__(self, leaf_hashes: Sequence[bytes] = ()) -> None:
        self._nodes: dict[Key, bytes] = {}
        self._frontier: dict[Key, bytes] = {}
        self._size = 0
        self.append(leaf_hashes)

    @property
    def size(self) -> int:
        """Number of leaves."""
        return self._size

    def append(self, leaf_hashes: Sequence[bytes]) -> None:
        """Add leaf hashes at the right edge, storing every subtree they complete."""
        rows, self._frontier = extend(self._size, self._frontier, leaf_hashes)
        for offset, leaf in enumerate(leaf_hashes):
            self._nodes[(0, self._size + offset)] = leaf
        for level, index, value in rows:
            self._nodes[(level, index)] = value
        self._size += len(leaf_hashes)

    def fetch(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        """Return the hash at every key (``KeyError`` for a node this tree does not have)."""
        nodes = self._nodes
        return {key: nodes[key] for key in keys}

    def nodes(self) -> dict[Key, bytes]:
        """A copy of every stored node, leaves included."""
        return dict(self._nodes)

    def root(self, size: int | None = None) -> bytes:
        """Root of the first ``size`` leaves (default: all of them)."""
        return root(self._size if size is None else size, self.fetch)


# --------------------------------------------------------------------------- verification


def _count(value: object, what: str, check: str) -> int:
    if not _is_count(value):
        raise VerificationError(
            check, f"{what} must be an integer in [0, 2**64), got {_show(value)}"
        )
    assert isinstance(value, int)
    return value


def _hash_arg(value: object, what: str, check: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        size = len(value) if isinstance(value, bytes | bytearray) else None
        got = f"{size} bytes" if size is not None else type(value).__name__
        raise VerificationError(check, f"{what} must be a {HASH_SIZE}-byte hash, got {got}")
    return value


def _proof_arg(proof: object, want: int, context: str, check: str) -> list[bytes]:
    if not isinstance(proof, list | tuple):
        raise VerificationError(
            check, f"proof must be a list of hashes, got {type(proof).__name__}"
        )
    if len(proof) != want:
        raise VerificationError(
            check,
            f"proof has {len(proof)} hashes; {context} needs exactly {want}",
            expected=str(want),
            computed=str(len(proof)),
        )
    return [_hash_arg(h, f"proof hash {i}", check) for i, h in enumerate(proof)]


def inclusion_proof_length(index: int, size: int) -> int:
    """Exact number of hashes in the inclusion proof of ``index`` in a tree of ``size``."""
    # Below the level where the paths to `index` and to the last leaf part, every level has a
    # sibling; above it, the path runs along the right edge, and only left siblings count.
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_length(old_size: int, new_size: int) -> int:
    """Exact number of hashes in the consistency proof for ``0 < old_size < new_size``."""
    shift = (old_size & -old_size).bit_length() - 1  # trailing zero bits of old_size
    inner = ((old_size - 1) ^ (new_size - 1)).bit_length()
    border = ((old_size - 1) >> inner).bit_count()
    seeded = 0 if old_size == 1 << shift else 1  # the old root opens the proof unless given
    return seeded + inner - shift + border


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf`` (a leaf hash) is leaf ``index`` of the tree of ``size`` with ``root``.

    Follows RFC 9162 section 2.1.3.2 after checking the exact proof length.
    """
    check = _INCLUSION
    size = _count(size, "tree size", check)
    index = _count(index, "leaf index", check)
    if index >= size:
        raise VerificationError(check, f"leaf index {index} is not in a tree of size {size}")
    leaf = _hash_arg(leaf, "leaf hash", check)
    root = _hash_arg(root, "root", check)
    path = _proof_arg(
        proof,
        inclusion_proof_length(index, size),
        f"leaf {index} of a tree of size {size}",
        check,
    )
    # RFC 9162 2.1.3.2. Its sn checks cannot fail once the length is exact; they stay as the
    # RFC states them, so the loop is safe on its own.
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise VerificationError(check, "proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = _sha256(b"\x01" + p + r).digest()
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            r = _sha256(b"\x01" + r + p).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(check, "proof ends before the path reaches the root")
    if r != root:
        raise VerificationError(
            check,
            f"leaf {index} does not lead to the root of the tree of size {size}",
            expected=root.hex(),
            computed=r.hex(),
        )


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``new_size`` with ``new_root`` extends the one of ``old_size``.

    Follows RFC 9162 section 2.1.4.2 after checking the exact proof length.
    """
    check = _CONSISTENCY
    old_size = _count(old_size, "old tree size", check)
    new_size = _count(new_size, "new tree size", check)
    if old_size > new_size:
        raise VerificationError(
            check, f"old tree size {old_size} is larger than new tree size {new_size}"
        )
    old_root = _hash_arg(old_root, "old root", check)
    new_root = _hash_arg(new_root, "new root", check)
    if old_size == new_size:
        _proof_arg(proof, 0, "two trees of the same size", check)
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise VerificationError(
                check,
                "the root of the empty tree is SHA-256 of nothing",
                expected=EMPTY_ROOT.hex(),
                computed=old_root.hex(),
            )
        if old_root != new_root:
            raise VerificationError(
                check,
                f"two trees of size {old_size} have different roots",
                expected=old_root.hex(),
                computed=new_root.hex(),
            )
        return
    if old_size == 0:
        raise VerificationError(
            check, "a consistency proof from the empty tree (old size 0) proves nothing"
        )
    path = _proof_arg(
        proof,
        consistency_proof_length(old_size, new_size),
        f"consistency from size {old_size} to {new_size}",
        check,
    )
    # RFC 9162 2.1.4.2 (its sn checks are redundant with the exact length, as above).
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerificationError(check, "proof is longer than the path to the new root")
        if fn & 1 or fn == sn:
            fr = _sha256(b"\x01" + c + fr).digest()
            sr = _sha256(b"\x01" + c + sr).digest()
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            sr = _sha256(b"\x01" + sr + c).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(check, "proof ends before the path reaches the new root")
    if fr != old_root:
        raise VerificationError(
            check,
            f"proof does not rebuild the old root of size {old_size}",
            expected=old_root.hex(),
            computed=fr.hex(),
        )
    if sr != new_root:
        raise VerificationError(
            check,
            f"proof does not rebuild the new root of size {new_size}",
            expected=new_root.hex(),
            computed=sr.hex(),
        )
