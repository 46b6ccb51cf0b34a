"""Full verification of a journal database, from the stored bytes up.

Order of checks (the first failure raises, naming the check and the first bad seq):

1. ``entry-seq``      rows are numbered 0..n-1 with no gap
2. ``entry-columns``  every entry body is stored as a BLOB
3. ``entry-index``    the spans cover seqs 0..n-1 exactly once, in order, with well-typed columns,
   and the runs index names each run at its first span
4. ``entry-envelope`` the bytes are an entry of this version whose seq/run/task/kind match its span
5. ``leaf-hash``      every leaf hash in a stored level-0 tile equals SHA-256(0x00 || stored bytes)
6. ``node-hash`` / ``node-missing`` / ``node-extra``   every stored tile is recomputed, every full
   tile is present and no tile lies outside the tree
7. ``head-root`` / ``head-missing``  every recorded tree head (the root on the last span of each
   commit) is recomputed, and the last span has one (heads sit on spans, which step 3 keeps
   inside the log)
8. ``checkpoint-signature`` / ``checkpoint-root`` / ``checkpoint-ahead``  every checkpoint in the
   database and in the external checkpoint folder
9. ``consistency``    with ``since``: the current tree extends the given checkpoint's tree

Integrity rests on the hashes of the stored bytes. The canonical form is enforced on append, so
step 4 checks the envelope's trailing bytes (kind, run, seq, task, ts, v) against the span and
parses an entry with the C msgpack decoder only when they do not have the usual layout;
``deep=True`` decodes every entry with the full canonical re-encoding check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack

from ledger.errors import KeyMaterialError, MalformedInput, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import FORMAT_VERSION, decode_entry, envelope_around_seq, pack_uint
from ledger.journal.store import Store
from ledger.journal.tiles import HASH_SIZE, hash_pairs

if TYPE_CHECKING:
    from ledger.journal.note import Checkpoint

_V1 = b"\xa1v\x01"


def _check_envelope_slow(seq: int, body: bytes, run_b: bytes | None, task_b: bytes | None,
                         kind_b: bytes | None, deep: bool) -> None:
    try:
        if deep:
            obj = decode_entry(body)
            fields: tuple[Any, ...] = (obj.seq, obj.run, obj.task, obj.kind, FORMAT_VERSION)
        else:
            d = msgpack.unpackb(body, raw=False)
            fields = (d["seq"], d["run"], d["task"], d["kind"], d["v"] if type(d["v"]) is int else None)
        run, task, kind = (None if b is None else bytes(b).decode("utf-8") for b in (run_b, task_b, kind_b))
    except Exception as exc:
        raise VerificationError("entry-envelope", f"entry bytes or their span do not decode: {exc}",
                                seq=seq) from exc
    if fields != (seq, run, task, kind, FORMAT_VERSION):
        raise VerificationError("entry-envelope",
                                "entry bytes disagree with their span (seq/run/task/kind/v)",
                                seq=seq, expected=str((seq, run, task, kind, FORMAT_VERSION)),
                                computed=str(fields))


class _Spans:
    """Walks the span index alongside the entries and checks each entry's envelope against it."""

    def __init__(self, rows: list[tuple[Any, ...]], deep: bool) -> None:
        self._rows = rows
        self._pos = 0
        self._next = 0  # the first seq the next span must start at
        self._deep = deep
        self.run_first: dict[bytes, int] = {}  # the first span of every run, for the runs index
        self._span: tuple[int, bytes | None, bytes | None, bytes, bytes, bytes] = (-1, None, None, b"", b"", b"")

    def _take(self) -> tuple[int, int, bytes | None, bytes | None, bytes]:
        if self._pos >= len(self._rows):
            raise VerificationError("entry-index", f"no span covers seq {self._next}", seq=self._next)
        first, last, run_b, task_b, kind_b, types = self._rows[self._pos]
        self._pos += 1
        if first != self._next:
            raise VerificationError("entry-index", f"span starts at {first!r}, expected {self._next}",
                                    seq=self._next)
        last_t, run_t, task_t, kind_t = str(types).split(",")
        if (last_t != "integer" or kind_t != "text" or run_t not in ("text", "null")
                or task_t not in ("text", "null") or last < first):
            raise VerificationError("entry-index", f"span at {first} is malformed (last={last!r}, "
                                    f"column types {types})", seq=first)
        self._next = last + 1
        if run_b is not None and run_b not in self.run_first:
            self.run_first[run_b] = first
        return first, last, run_b, task_b, kind_b

    def check(self, start: int, bodies: list[bytes]) -> None:
        """Check the envelopes of entries start..start+len(bodies)-1."""
        end = start + len(bodies)
        seq = start
        deep = self._deep
        while seq < end:
            if seq >= self._next:
                _first, last, run_b, task_b, kind_b = self._take()
                self._span = (last, run_b, task_b, kind_b, *envelope_around_seq(run_b, task_b, kind_b))
            last, run_b, task_b, kind_b, head, tail = self._span
            stop = min(last + 1, end)
            chunk = bodies[seq - start:stop - start]
            # A canonical entry ends with <head><seq><tail><ts as uint64>\xa1v\x01.
            pu = pack_uint
            if deep:
                bad = list(range(seq, stop))
            else:
                bad = [s for s, b in enumerate(chunk, seq)
                       if b[-12:-11] != b"\xcf" or b[-3:] != _V1 or not b.endswith(head + pu(s) + tail, 0, -12)]
            for s in bad:
                _check_envelope_slow(s, chunk[s - seq], run_b, task_b, kind_b, deep)
            seq = stop

    def finish(self, n: int) -> int:
        if self._pos < len(self._rows):
            first = self._rows[self._pos][0]
            raise VerificationError("entry-index", f"span at {first!r} covers entries the log does not have",
                                    seq=n)
        if self._next != n:
            raise VerificationError("entry-index", f"span ends at {self._next - 1} but the log holds {n} entries",
                                    seq=min(self._next, n))
        return len(self._rows)

    def check_runs(self, rows: list[tuple[Any, Any, str]]) -> None:
        """The runs index must name every run once, at its first span, and nothing else."""
        stored: dict[bytes, int] = {}
        for run_b, first, types in rows:
            if types != "text,integer" or run_b in stored:
                raise VerificationError("entry-index", f"runs index row {run_b!r} is malformed or repeated ({types})",
                                        seq=first if isinstance(first, int) and first >= 0 else 0)
            stored[run_b] = first
        for run_b, first in sorted(self.run_first.items(), key=lambda kv: kv[1]):
            if stored.get(run_b) != first:
                raise VerificationError("entry-index", f"runs index says run {run_b.decode('utf-8', 'replace')!r} "
                                        f"starts at {stored.get(run_b)!r}, its first span is at {first}", seq=first)
        extra = sorted(set(stored) - set(self.run_first), key=lambda r: (stored[r], r))
        if extra:
            raise VerificationError("entry-index", f"runs index names run {extra[0].decode('utf-8', 'replace')!r} "
                                    "that no span holds", seq=stored[extra[0]])


def _check_tiles(store: Store, levels: list[bytes], n: int) -> int:
    """Compare the stored tiles with the recomputed tree, one tile level at a time.

    Each level is compared as one joined byte string; only on a mismatch is it walked tile by
    tile to name the first bad hash.
    """
    h = store.tile_height
    width = 1 << h
    tile_bytes = HASH_SIZE << h
    expected: list[bytes] = []
    while h * len(expected) < len(levels):
        level = levels[h * len(expected)]
        full = (len(level) // HASH_SIZE) >> h
        if full == 0:
            break
        expected.append(level[:full * tile_bytes])
    for tl in store.tile_levels():
        if not isinstance(tl, int) or not 0 <= tl < len(expected):
            rows = store.level_tiles(tl)
            first = rows[0][0] if rows else 0
            seq = (first << (h * tl + h)) if isinstance(tl, int) and isinstance(first, int) and 0 <= tl < 16 \
                and first >= 0 else n
            raise VerificationError("node-extra", f"stored tile ({tl!r},{first!r}) is outside the tree of {n} leaves "
                                    f"(tiles of height {h}, as the journal's meta says)",
                                    seq=min(seq, n))
    count = 0
    for tl, want in enumerate(expected):
        rows = store.level_tiles(tl)
        full = len(want) // tile_bytes
        shift = h * tl
        roots = levels[shift + h][:full * HASH_SIZE]
        if (len(rows) == full and rows[0][0] == 0 and rows[-1][0] == full - 1
                and b"".join([r[1] for r in rows]) == want and b"".join([r[2] for r in rows]) == roots
                and all(r[3] == "blob,blob" for r in rows)):
            count += full
            continue
        check = "leaf-hash" if tl == 0 else "node-hash"
        for pos, (idx, blob, top, types) in enumerate(rows):
            if not isinstance(idx, int) or idx >= full or idx < 0:
                raise VerificationError("node-extra", f"stored tile ({tl},{idx!r}) covers leaves the log does not have",
                                        seq=min(idx << (shift + h), n) if isinstance(idx, int) and idx >= 0 else n)
            if idx != pos:
                raise VerificationError("node-missing", f"tile ({tl},{pos}) is missing", seq=pos << (shift + h))
            good = want[idx * tile_bytes:(idx + 1) * tile_bytes]
            if types.split(",")[0] != "blob" or len(blob) != tile_bytes:
                raise VerificationError(check, f"stored tile ({tl},{idx}) is malformed (stored as {types}, "
                                        f"{len(blob)} bytes of hashes)", seq=idx << (shift + h))
            if types.split(",")[1] != "blob" or len(top) != HASH_SIZE:
                raise VerificationError("node-hash", f"stored root of tile ({tl},{idx}) is malformed (stored as "
                                        f"{types}, {len(top)} bytes)", seq=idx << (shift + h))
            if blob != good:
                j = next(j for j in range(width) if blob[32 * j:32 * j + 32] != good[32 * j:32 * j + 32])
                what = "leaf hash" if tl == 0 else "subtree hash"
                raise VerificationError(check, f"stored {what} ({shift},{idx * width + j}) in tile ({tl},{idx}) "
                                        "does not match the entries", seq=(idx * width + j) << shift,
                                        expected=blob[32 * j:32 * j + 32].hex(), computed=good[32 * j:32 * j + 32].hex())
            good_root = roots[idx * HASH_SIZE:(idx + 1) * HASH_SIZE]
            if top != good_root:
                raise VerificationError("node-hash", f"stored root of tile ({tl},{idx}) does not match the entries",
                                        seq=idx << (shift + h), expected=top.hex(), computed=good_root.hex())
        raise VerificationError("node-missing", f"tile ({tl},{len(rows)}) is missing", seq=len(rows) << (shift + h))
    return count


def levels_from_leaves(leaves: bytes) -> list[bytes]:
    """All complete-subtree hashes, level by level, each level packed (level 0: ``leaves``)."""
    levels = [leaves]
    cur = leaves
    while len(cur) >= 2 * HASH_SIZE:
        cur = hash_pairs(cur)
        levels.append(cur)
    return levels


def fetch_from(levels: Sequence[bytes]) -> merkle.Fetch:
    """A node source over levels (``levels_from_leaves``), for merkle.root and proofs: the hash
    of each key, ``KeyError`` for a node the levels do not hold (never a short hash)."""
    def fetch(keys: Sequence[merkle.Key]) -> dict[merkle.Key, bytes]:
        out = {}
        for lv, ix in keys:
            level = levels[lv] if 0 <= lv < len(levels) else b""
            h = bytes(level[HASH_SIZE * ix:HASH_SIZE * ix + HASH_SIZE]) if ix >= 0 else b""
            if len(h) != HASH_SIZE:
                raise KeyError((lv, ix))
            out[(lv, ix)] = h
        return out
    return fetch


def root_from_levels(levels: Sequence[bytes], size: int) -> bytes:
    """The root of the tree of the first ``size`` leaves of ``levels``."""
    if size == 0:
        return merkle.EMPTY_ROOT
    return merkle.root(size, fetch_from(levels))


def consistency_from_leaves(leaves: bytes, old: int, size: int) -> list[bytes]:
    """The RFC 6962 consistency proof from ``old`` to ``size`` over packed leaf hashes that hold
    the whole tree of ``size`` (a log bundle's entries, say)."""
    return merkle.consistency_proof(old, size, fetch_from(levels_from_leaves(leaves[:32 * size])))


@dataclass(frozen=True)
class StoreCheck:
    """What one full verification read and checked.

    ``summary``: what was checked (``ledger verify --json`` shows it); ``bodies``: every entry's
    stored bytes in seq order when asked to retain them (their leaf hashes are the verified
    tree's), else None; ``leaves``: those leaf hashes packed 32 bytes per seq; ``checkpoints``:
    every checkpoint note of the database whose signature and root were checked (note text ->
    ``Checkpoint``).
    """

    summary: dict[str, Any]
    bodies: list[bytes] | None
    leaves: bytes
    checkpoints: Mapping[str, Checkpoint] = field(default_factory=dict)


def verify_store(store: Store, *, verifier: Any = None, since: str | None = None,
                 external_dir: Path | None = None, deep: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Verify every stored byte of the journal; return what was checked or raise."""
    return check_store(store, verifier=verifier, since=since, external_dir=external_dir,
                       deep=deep, progress=progress).summary


def check_store(store: Store, *, verifier: Any = None, since: str | None = None,
                external_dir: Path | None = None, deep: bool = False,
                progress: Callable[[int, int], None] | None = None,
                retain: bool = False) -> StoreCheck:
    """Verify every stored byte of the journal (the module docstring's order); return what was
    checked, and (``retain``) the bytes it read, or raise ``VerificationError``."""
    heads = store.all_heads()
    n, levels, span_count, bodies = _check_entries(store, deep, progress, retain)
    tile_count = _check_tiles(store, levels, n)
    _check_heads(heads, levels, n)
    current_root = root_from_levels(levels, n)
    summary: dict[str, Any] = {"size": n, "root": current_root.hex(), "entries": n,
                               "spans": span_count, "tiles": tile_count, "heads": len(heads), "checkpoints": 0,
                               "external_checkpoints": 0, "since": None, "deep": deep}
    opened = _check_checkpoints(store, verifier, external_dir, since is not None, levels, n, summary)
    if since is not None:
        summary["since"] = _check_since(since, verifier, levels, n, current_root)
    return StoreCheck(summary, bodies, levels[0], opened)


def _check_entries(store: Store, deep: bool, progress: Callable[[int, int], None] | None,
                   retain: bool) -> tuple[int, list[bytes], int, list[bytes] | None]:
    """Steps 1-4: every row, its envelope and the span index; the recomputed tree levels."""
    total = store.entry_count()
    misfiled = store.misfiled_body()
    if misfiled is not None:
        raise VerificationError("entry-columns", f"entry body is stored as {misfiled[1]}, not a BLOB",
                                seq=misfiled[0])
    spans = _Spans(store.span_rows(), deep)
    leaves: list[bytes] = []
    kept: list[bytes] | None = [] if retain else None
    expected = 0
    for chunk in store.body_rows():
        m = len(chunk)
        if chunk[0][0] != expected or chunk[-1][0] != expected + m - 1:
            for offset, (seq, _body) in enumerate(chunk):
                if seq != expected + offset:
                    raise VerificationError("entry-seq", "sequence numbers have a gap or are out of order",
                                            seq=expected + offset, computed=str(seq))
        bodies = [r[1] for r in chunk]
        hashed = b"".join(merkle.leaf_hashes(bodies))
        spans.check(expected, bodies)
        leaves.append(hashed)
        if kept is not None:
            kept.extend(bodies)
        expected += m
        if progress is not None:
            progress(expected, total)
    n = expected
    span_count = spans.finish(n)
    spans.check_runs(store.run_rows())
    levels = levels_from_leaves(b"".join(leaves))
    return n, levels, span_count, kept


def _check_heads(heads: Sequence[tuple[Any, Any, Any]], levels: list[bytes], n: int) -> None:
    """Step 7: every recorded tree head is recomputed, and the last span has one."""
    prev = 0
    for size, root, rtype in heads:
        if rtype != "blob" or not isinstance(size, int):
            raise VerificationError("head-root", f"recorded head at size {size} is malformed ({rtype})",
                                    seq=size - 1 if isinstance(size, int) and size > 0 else None)
        computed_root = root_from_levels(levels, size)
        if computed_root != root:
            raise VerificationError("head-root", f"recorded head at size {size} does not match the log",
                                    seq=size - 1, expected=root.hex(), computed=computed_root.hex())
        prev = size
    if prev != n:
        raise VerificationError("head-missing", f"entries after size {prev} have no recorded tree head",
                                seq=prev)


def _open_checked(note: str, where: str, verifier: Any, levels: list[bytes], n: int) -> Checkpoint:
    from ledger.journal.note import open_checkpoint

    try:
        cp = open_checkpoint(note, verifier)
    except VerificationError as exc:
        raise VerificationError("checkpoint-signature", f"{where}: {exc}") from exc
    except MalformedInput as exc:
        raise VerificationError("checkpoint-signature", f"{where}: malformed checkpoint: {exc}") from exc
    if cp.size > n:
        raise VerificationError("checkpoint-ahead",
                                f"{where} covers {cp.size} entries but the log holds {n}: "
                                "the journal was truncated or rolled back", seq=n)
    computed_cp_root = root_from_levels(levels, cp.size)
    if computed_cp_root != cp.root:
        raise VerificationError("checkpoint-root", f"{where}: signed root does not match the log at size {cp.size}",
                                seq=max(cp.size - 1, 0), expected=cp.root.hex(), computed=computed_cp_root.hex())
    return cp


def _check_checkpoints(store: Store, verifier: Any, external_dir: Path | None, since: bool,
                       levels: list[bytes], n: int, summary: dict[str, Any]) -> dict[str, Checkpoint]:
    """Step 8: every checkpoint of the database and of the checkpoint folder; fills ``summary``'s
    counts and returns the database's notes as opened."""
    stored_cps = store.checkpoints()
    external: list[tuple[str, str]] = []
    if external_dir is not None and external_dir.is_dir():
        for path in sorted(external_dir.glob("*.note")):
            external.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
    if (stored_cps or external or since) and verifier is None:
        raise KeyMaterialError("checkpoints need the verifier key to check: "
                               "pass --vkey or run `ledger keys init` (verify never creates keys)")
    latest_db = -1
    misfiled_cp = store.misfiled_checkpoint()
    if misfiled_cp is not None:
        raise VerificationError("checkpoint-signature", f"checkpoint row {misfiled_cp[0]} holds a "
                                f"{misfiled_cp[1]}, not a signed note", seq=max(misfiled_cp[0] - 1, 0))
    opened: dict[str, Checkpoint] = {}
    for size, note in stored_cps:
        cp = _open_checked(note, f"checkpoint {size} in the database", verifier, levels, n)
        if cp.size != size:
            raise VerificationError("checkpoint-signature", f"checkpoint row {size} holds a note for size {cp.size}")
        latest_db = max(latest_db, size)
        opened[note] = cp
    summary["checkpoints"] = len(stored_cps)
    latest_ext = -1
    for where, note in external:
        latest_ext = max(latest_ext, int(_open_checked(note, f"checkpoint file {where}", verifier, levels, n).size))
    summary["external_checkpoints"] = len(external)
    if latest_ext > latest_db:
        raise VerificationError("checkpoint-missing",
                                f"the checkpoint folder holds a checkpoint of size {latest_ext} that the database lacks "
                                f"(latest in the database: {latest_db})", seq=latest_ext)
    if stored_cps:
        summary["checkpoint_size"] = stored_cps[-1][0]
    return opened


def _check_since(since: str, verifier: Any, levels: list[bytes], n: int,
                 current_root: bytes) -> dict[str, Any]:
    """Step 9: the current tree extends the given checkpoint's tree."""
    from ledger.journal.note import open_checkpoint

    try:
        cp = open_checkpoint(since, verifier)
    except MalformedInput as exc:
        raise MalformedInput(f"--since: {exc}") from exc
    except VerificationError as exc:
        raise VerificationError("checkpoint-signature", f"--since checkpoint: {exc}") from exc
    if cp.size > n:
        raise VerificationError("consistency", f"the given checkpoint covers {cp.size} entries but the log "
                                f"holds {n}: the journal was truncated or rolled back", seq=n)
    if cp.size > 0:  # every tree extends the empty one; RFC 9162 has no proof from size 0
        proof = merkle.consistency_proof(cp.size, n, fetch_from(levels))
        try:
            merkle.verify_consistency(cp.size, n, cp.root, current_root, proof)
        except VerificationError as exc:
            raise VerificationError("consistency", f"the log is not an extension of the given checkpoint: {exc}",
                                    seq=max(cp.size - 1, 0)) from exc
    return {"size": cp.size, "root": cp.root.hex()}
