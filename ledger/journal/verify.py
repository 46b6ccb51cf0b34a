"""Full verification of a journal database, from the stored bytes up.

Order of checks (the first failure raises, naming the check and the first bad seq):

1. ``entry-seq``      rows are numbered 0..n-1 with no gap
2. ``leaf-hash``      every stored leaf hash equals SHA-256(0x00 || stored bytes)
3. ``entry-envelope`` the bytes are an entry of this version whose seq/run/task/kind match the row
4. ``node-hash`` / ``node-missing`` / ``node-extra``   every stored subtree hash is recomputed
5. ``head-root`` / ``head-beyond-log`` / ``head-missing``  every recorded tree head is recomputed
6. ``checkpoint-signature`` / ``checkpoint-root`` / ``checkpoint-ahead``  every checkpoint in the
   database and in the external checkpoint folder
7. ``consistency``    with ``since``: the current tree extends the given checkpoint's tree

Integrity rests on the hashes of the stored bytes. The canonical form is enforced on append, so
step 3 parses each entry with the C msgpack decoder but does not re-encode it; ``deep=True`` adds
the full canonical re-encoding check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgpack

from ledger.errors import KeyMaterialError, MalformedInput, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import FORMAT_VERSION, decode_entry, envelope_suffix
from ledger.journal.store import Store

_sha256 = hashlib.sha256
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
        raise VerificationError("entry-envelope", f"entry bytes or row columns do not decode: {exc}",
                                seq=seq) from exc
    if fields != (seq, run, task, kind, FORMAT_VERSION):
        raise VerificationError("entry-envelope",
                                "entry bytes disagree with their row (seq/run/task/kind/v)",
                                seq=seq, expected=str((seq, run, task, kind, FORMAT_VERSION)),
                                computed=str(fields))


def _check_nodes(store: Store, levels: list[bytearray], n: int) -> int:
    """Compare the stored subtree hashes with the recomputed ones, level by level.

    Each level is compared as one joined byte string; only on a mismatch is it walked node by
    node to name the first bad one.
    """
    bad = store.misfiled_node()
    if bad is not None:
        level, idx, htype = bad
        seq = idx << level if isinstance(idx, int) and isinstance(level, int) and 0 <= level < 64 and idx >= 0 else None
        raise VerificationError("node-hash", f"stored node ({level},{idx}) is a {htype}, not a hash", seq=seq)
    stored_levels = store.node_levels()
    for level in stored_levels:
        if not 1 <= level < len(levels):
            first = store.level_nodes(level)[0][0] if 0 <= level < 64 else 0
            raise VerificationError("node-extra", f"stored node ({level},{first}) is outside the tree of {n} leaves",
                                    seq=min(first << level, n) if 0 <= level < 64 and first >= 0 else n)
    count = 0
    for level in range(1, len(levels)):
        rows = store.level_nodes(level)
        want = levels[level]
        want_count = len(want) // 32
        if (len(rows) == want_count and (not rows or (rows[0][0] == 0 and rows[-1][0] == want_count - 1))
                and b"".join([r[1] for r in rows]) == want):
            count += want_count
            continue
        for pos, (idx, h) in enumerate(rows):
            if idx >= want_count or idx < 0:
                raise VerificationError("node-extra", f"stored node ({level},{idx}) covers leaves the log does not have",
                                        seq=min(idx << level, n) if idx >= 0 else n)
            if idx != pos:
                raise VerificationError("node-missing", f"tree node ({level},{pos}) is missing", seq=pos << level)
            computed = bytes(want[32 * idx:32 * idx + 32])
            if h != computed:
                raise VerificationError("node-hash", f"stored node ({level},{idx}) does not match its leaves",
                                        seq=idx << level, expected=bytes(h).hex(), computed=computed.hex())
        missing = len(rows)
        raise VerificationError("node-missing", f"tree node ({level},{missing}) is missing", seq=missing << level)
    return count


def _levels_from_leaves(leaves: bytearray, n: int) -> list[bytearray]:
    """All complete-subtree hashes, level by level, each level a packed bytearray."""
    levels = [leaves]
    cur = leaves
    count = n
    while count >= 2:
        nxt = bytearray()
        pairs = count // 2
        mv = memoryview(cur)
        for i in range(pairs):
            nxt += _sha256(b"\x01" + mv[64 * i:64 * i + 64]).digest()
        levels.append(nxt)
        cur = nxt
        count = pairs
    return levels


def _fetch_from(levels: list[bytearray]) -> merkle.Fetch:
    """A node source over recomputed levels, for merkle.root and proofs."""
    def fetch(keys: Sequence[merkle.Key]) -> dict[merkle.Key, bytes]:
        return {(lv, ix): bytes(levels[lv][32 * ix:32 * ix + 32]) for lv, ix in keys}
    return fetch


def _root_from_levels(levels: list[bytearray], size: int) -> bytes:
    if size == 0:
        return merkle.EMPTY_ROOT
    return merkle.root(size, _fetch_from(levels))


def verify_store(store: Store, *, verifier: Any = None, since: str | None = None,
                 external_dir: Path | None = None, deep: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Verify every stored byte of the journal; return what was checked or raise."""
    heads = store.all_heads()
    total = store.entry_count()
    misfiled = store.misfiled_rows()
    if misfiled is not None:
        raise VerificationError("entry-columns", f"entry row has columns of the wrong type ({misfiled[1]})",
                                seq=misfiled[0])
    leaves = bytearray()
    expected = 0
    sha = _sha256
    suffix_of = envelope_suffix
    for seq, leaf, body, run_b, task_b, kind_b in store.raw_rows():
        if seq != expected:
            raise VerificationError("entry-seq", "sequence numbers have a gap or are out of order",
                                    seq=expected, computed=str(seq))
        computed = sha(b"\x00" + body).digest()
        if computed != leaf:
            raise VerificationError("leaf-hash", "stored leaf hash does not match the entry bytes",
                                    seq=seq, expected=bytes(leaf).hex(), computed=computed.hex())
        # The indexed columns must agree with the bytes (or a query by run could hide an entry).
        # Fast path: a canonical entry ends with <suffix><ts as uint64>\xa1v\x01; anything else
        # (or deep=True) takes the full decode.
        suffix = suffix_of(seq, run_b, task_b, kind_b)
        if (deep or len(body) < 12 or body[-12] != 0xCF or not body.endswith(_V1)
                or body[-12 - len(suffix):-12] != suffix):
            _check_envelope_slow(seq, body, run_b, task_b, kind_b, deep)
        leaves += computed
        expected += 1
        if progress is not None and expected % 100_000 == 0:
            progress(expected, total)
    n = expected

    levels = _levels_from_leaves(leaves, n)
    node_count = _check_nodes(store, levels, n)

    prev = 0
    for size, root, rtype in heads:
        if rtype != "blob" or not isinstance(size, int):
            raise VerificationError("head-root", f"recorded head at size {size} is malformed ({rtype})",
                                    seq=size - 1 if isinstance(size, int) and size > 0 else None)
        if size > n:
            raise VerificationError("head-beyond-log",
                                    f"a recorded tree head has size {size} but the log holds {n} entries "
                                    "(entries were removed)", seq=n)
        computed_root = _root_from_levels(levels, size)
        if computed_root != root:
            raise VerificationError("head-root", f"recorded head at size {size} does not match the log",
                                    seq=size - 1, expected=root.hex(), computed=computed_root.hex())
        prev = size
    if prev != n:
        raise VerificationError("head-missing", f"entries after size {prev} have no recorded tree head",
                                seq=prev)
    current_root = _root_from_levels(levels, n)
    summary: dict[str, Any] = {"size": n, "root": current_root.hex(), "entries": n,
                               "nodes": node_count, "heads": len(heads), "checkpoints": 0,
                               "external_checkpoints": 0, "since": None, "deep": deep}

    stored_cps = store.checkpoints()
    external: list[tuple[str, str]] = []
    if external_dir is not None and external_dir.is_dir():
        for path in sorted(external_dir.glob("*.note")):
            external.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
    if (stored_cps or external or since) and verifier is None:
        raise KeyMaterialError("checkpoints need the verifier key to check: "
                               "pass --vkey or run `ledger keys init` (verify never creates keys)")
    from ledger.journal.note import open_checkpoint

    def check_cp(note: str, where: str) -> int:
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
        computed_cp_root = _root_from_levels(levels, cp.size)
        if computed_cp_root != cp.root:
            raise VerificationError("checkpoint-root", f"{where}: signed root does not match the log at size {cp.size}",
                                    seq=max(cp.size - 1, 0), expected=cp.root.hex(), computed=computed_cp_root.hex())
        return int(cp.size)

    latest_db = -1
    for size, note in stored_cps:
        got = check_cp(note, f"checkpoint {size} in the database")
        if got != size:
            raise VerificationError("checkpoint-signature", f"checkpoint row {size} holds a note for size {got}")
        latest_db = max(latest_db, size)
    summary["checkpoints"] = len(stored_cps)
    latest_ext = -1
    for where, note in external:
        latest_ext = max(latest_ext, check_cp(note, f"checkpoint file {where}"))
    summary["external_checkpoints"] = len(external)
    if latest_ext > latest_db:
        raise VerificationError("checkpoint-missing",
                                f"the checkpoint folder holds a checkpoint of size {latest_ext} that the database lacks "
                                f"(latest in the database: {latest_db})", seq=latest_ext)
    if stored_cps:
        summary["checkpoint_size"] = stored_cps[-1][0]

    if since is not None:
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
            proof = merkle.consistency_proof(cp.size, n, _fetch_from(levels))
            try:
                merkle.verify_consistency(cp.size, n, cp.root, current_root, proof)
            except VerificationError as exc:
                raise VerificationError("consistency", f"the log is not an extension of the given checkpoint: {exc}",
                                        seq=max(cp.size - 1, 0)) from exc
        summary["since"] = {"size": cp.size, "root": cp.root.hex()}
    return summary
