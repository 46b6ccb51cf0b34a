"""``ledger publish DIR``: the journal as a static C2SP tlog-tiles directory (``layout.py``).

A publish reads the journal's head (size, root), the entries the directory lacks and, for an
incremental publish, at most 255 hashes per tile level from the journal's tree; it writes the
new full tiles and bundles, the partial tiles and bundle that grew, the entries too long for a
bundle slot, and last the ``checkpoint``, each file through a temporary name and a rename. So a
publish stopped half-way leaves the old checkpoint, which still matches the files it names (a
full tile it covers is never rewritten; a partial tile of a new width has a new name), and the
next publish completes the directory.

Before it writes, the publish checks that the root it computed equals the journal's recorded
head and, when the directory holds a checkpoint, that the journal extends it (an RFC 6962
consistency proof): a journal rewritten or rolled back is refused, not published over.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import MalformedInput, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import decode_entries_trusted
from ledger.journal.journal import Journal
from ledger.journal.note import (
    Checkpoint,
    Verifier,
    merge_signatures,
    open_checkpoint,
    sign_checkpoint,
)
from ledger.journal.tiles import HASH_SIZE, hash_up
from ledger.publish import layout

CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Policy:
    """Which entries a publish discloses: every kind (the default), only ``public`` ones, or all
    but the ``withhold`` ones. Patterns are exact kinds or shell globs (``agent.*``)."""

    public: tuple[str, ...] | None = None
    withhold: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.public is not None and self.withhold:
            raise UsageError("give either --public or --withhold, not both")

    @property
    def active(self) -> bool:
        return self.public is not None or bool(self.withhold)

    def withheld(self, kind: str) -> bool:
        if self.public is not None:
            return not any(fnmatch.fnmatchcase(kind, p) for p in self.public)
        return any(fnmatch.fnmatchcase(kind, p) for p in self.withhold)

    def as_dict(self) -> dict[str, Any]:
        return {"public": None if self.public is None else list(self.public), "withhold": list(self.withhold)}


def _kinds(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise MalformedInput(f"{where} must be a list of entry kinds")
    items = [v for v in items if v]
    if not items:
        raise UsageError(f"{where} names no entry kind")
    return tuple(items)


def make_policy(public: str | None, withhold: str | None, config: Mapping[str, Any] | None = None) -> Policy:
    """The policy from --public / --withhold, else from ledger.toml's ``[publish]`` table."""
    if public is not None or withhold is not None:
        return Policy(None if public is None else _kinds(public, "--public"),
                      () if withhold is None else _kinds(withhold, "--withhold"))
    table = (config or {}).get("publish") or {}
    if not isinstance(table, Mapping):
        raise MalformedInput("ledger.toml: [publish] must be a table")
    unknown = set(table) - {"public", "withhold"}
    if unknown:
        raise MalformedInput(f"ledger.toml: [publish] has unknown keys {sorted(unknown)}")
    return Policy(_kinds(table["public"], "[publish] public") if "public" in table else None,
                  _kinds(table["withhold"], "[publish] withhold") if "withhold" in table else ())


@dataclass
class PublishResult:
    directory: str
    origin: str
    old_size: int
    size: int
    root: str
    written: list[str] = field(default_factory=list)  # every file written, checkpoint last
    withheld: int = 0
    large: int = 0
    cosigned_by: list[str] = field(default_factory=list)
    policy: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"directory": self.directory, "origin": self.origin, "old_size": self.old_size,
                "size": self.size, "root": self.root, "files_written": len(self.written),
                "written": self.written, "withheld": self.withheld, "large": self.large,
                "cosigned_by": self.cosigned_by, "policy": self.policy}


class _Out:
    """Writes files under the directory, each through a temporary name and a rename.

    Creating a file costs milliseconds on some file systems and most of it is waiting, so the
    files are written by a few threads; ``drain`` waits for all of them (and raises the first
    error) before the checkpoint is written, in the calling thread, last.
    """

    WORKERS = 4

    def __init__(self, root: Path, written: list[str]) -> None:
        self.root = root
        self.written = written
        self._dirs: set[Path] = set()
        self._tmp = f".tmp.{os.getpid()}"
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []

    def _write(self, path: Path, data: bytes, sync: bool) -> None:
        tmp = path.parent / f"{path.name}{self._tmp}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def put(self, rel: str, data: bytes, *, sync: bool = False) -> None:
        path = self.root / rel
        parent = path.parent
        if parent not in self._dirs:
            parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(parent)
        if sync:
            self.drain()
            self._write(path, data, True)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="publish")
            self._pending.append(self._pool.submit(self._write, path, data, False))
            if len(self._pending) > 256:
                self._settle(128)
        self.written.append(rel)

    def _settle(self, keep: int) -> None:
        """Wait for all but the last ``keep`` files put."""
        cut = max(len(self._pending) - keep, 0)
        done, self._pending = self._pending[:cut], self._pending[cut:]
        for f in done:
            f.result()

    def drain(self) -> None:
        """Wait for every file put so far; raise the first error."""
        self._settle(0)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def read_published(directory: Path, verifier: Verifier) -> tuple[Checkpoint, str] | None:
    """The checkpoint the directory publishes (verified), or None when it has none."""
    path = directory / CHECKPOINT
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MalformedInput(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return open_checkpoint(raw, verifier), raw.decode("utf-8")
    except (VerificationError, MalformedInput) as exc:
        raise VerificationError("published-checkpoint", f"{path} does not verify with this log's key: {exc}") \
            from exc


Submit = Callable[[str, int, Sequence[bytes], str], tuple[int, str]]
"""``(url, old_size, proof, note)`` -> (HTTP status, body): one tlog-witness add-checkpoint."""


def publish(journal: Journal, directory: Path, signer: Any, *, policy: Policy = Policy(),
            witnesses: Sequence[tuple[str, Verifier]] = (), submit: Submit | None = None) -> PublishResult:
    """Publish ``journal`` into ``directory`` (created when missing); see the module docstring.

    ``signer`` is the log's key ring (``ledger.journal.keys.KeyRing``); ``witnesses`` the
    (add-checkpoint prefix URL, witness verifier key) pairs to ask for cosignatures.
    """
    directory = Path(directory)
    verifier = signer.verifier
    size, head_root = journal.head()
    previous = read_published(directory, verifier) if directory.exists() else None
    old_size = 0
    if previous is not None:
        old_cp, _old_note = previous
        if old_cp.origin != signer.key_name:
            raise VerificationError("published-checkpoint", f"{directory} publishes log {old_cp.origin!r}, "
                                    f"not {signer.key_name!r}")
        if old_cp.size > size:
            raise VerificationError("published-checkpoint", f"{directory} publishes {old_cp.size} entries but "
                                    f"the journal holds {size}: it was truncated or rolled back", seq=size)
        if old_cp.size:
            proof = journal.consistency_proof(old_cp.size, size)
            try:
                merkle.verify_consistency(old_cp.size, size, old_cp.root, head_root, list(proof.hashes))
            except VerificationError as exc:
                raise VerificationError("published-checkpoint", f"the journal does not extend the checkpoint "
                                        f"of size {old_cp.size} that {directory} publishes: its history was "
                                        f"rewritten ({exc})", seq=old_cp.size - 1) from exc
        old_size = old_cp.size
    result = PublishResult(str(directory), signer.key_name, old_size, size, head_root.hex(),
                           policy=policy.as_dict())
    out = _Out(directory, result.written)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        _publish_into(journal, out, signer, verifier, previous, old_size, size, head_root, policy,
                      witnesses, submit, result)
    finally:
        out.close()
    return result


def _publish_into(journal: Journal, out: _Out, signer: Any, verifier: Verifier, previous: Any, old_size: int,
                  size: int, head_root: bytes, policy: Policy, witnesses: Sequence[tuple[str, Verifier]],
                  submit: Submit | None, result: PublishResult) -> None:
    start = (old_size >> layout.TILE_HEIGHT) << layout.TILE_HEIGHT
    leaves = _write_bundles(journal, out, start, old_size, size, policy, result)

    def fetch(tree_level: int, lo: int, hi: int) -> bytes:
        got = journal.store.fetch_nodes([(tree_level, i) for i in range(lo, hi)])
        return b"".join(got[(tree_level, i)] for i in range(lo, hi))

    tiles = layout.tiles_between(old_size, size, leaves, fetch)
    computed = _root_of(size, tiles, fetch)
    if computed != head_root:
        raise VerificationError("publish-root", "the tree computed from the journal's entries does not match "
                                "its recorded head: run `ledger verify`", expected=head_root.hex(),
                                computed=computed.hex())
    for t in tiles:
        out.put(t.path, t.data)

    note = _checkpoint_note(journal, signer, size, head_root)
    if witnesses:
        if submit is None:
            from ledger.publish.http import post_add_checkpoint as submit_fn
        else:
            submit_fn = submit
        note = _cosign(journal, note, size, old_size, verifier, witnesses, submit_fn, result)
    out.drain()  # every tile and bundle is in place before the checkpoint names them
    if previous is None or previous[1] != note or old_size != size:
        out.put(CHECKPOINT, note.encode("utf-8"), sync=True)


def _write_bundles(journal: Journal, out: _Out, start: int, old_size: int, size: int, policy: Policy,
                   result: PublishResult) -> bytes:
    """Write the bundles from ``start`` (a multiple of 256) to ``size``; return their leaf hashes."""
    width = layout.TILE_WIDTH
    leaves: list[bytes] = []
    slots: list[bytes] = []
    seq = start
    index = start >> layout.TILE_HEIGHT
    old_full = old_size >> layout.TILE_HEIGHT
    sha_leaves = merkle.leaf_hashes
    chunk: list[bytes] = []

    def flush_chunk() -> None:
        nonlocal seq, index
        bodies = chunk[:]
        chunk.clear()
        hashes = sha_leaves(bodies)
        leaves.extend(hashes)
        kinds: list[Any] | None = decode_entries_trusted(bodies) if policy.active else None
        for i, body in enumerate(bodies):
            new = seq >= old_size
            if kinds is not None and policy.withheld(kinds[i].kind):
                slots.append(layout.withheld_marker(hashes[i], kinds[i].kind, kinds[i].run))
                result.withheld += new
            elif len(body) > layout.MAX_SLOT:
                if new:  # the slot says where it is; an entry published before is there already
                    out.put(layout.large_path(hashes[i]), body)
                    result.large += 1
                slots.append(layout.large_marker(hashes[i], len(body)))
            else:
                slots.append(body)
            seq += 1
            if len(slots) == width:
                if index >= old_full:
                    out.put(layout.bundle_path(index), layout.encode_bundle(slots))
                slots.clear()
                index += 1

    for _s, body in journal.store.rows(start=start, stop=size, batch=20000):
        chunk.append(body)
        if len(chunk) >= 20000:
            flush_chunk()
    if chunk:
        flush_chunk()
    if seq != size:
        raise VerificationError("publish-root", f"the journal yielded entries up to {seq}, its head says {size}")
    if slots and size != old_size:
        out.put(layout.bundle_path(index, len(slots)), layout.encode_bundle(slots))
    return b"".join(leaves)


def _root_of(size: int, tiles: Sequence[layout.TileOut], fetch: layout.NodeRange) -> bytes:
    """The RFC 6962 root of the published tree: its complete subtrees, each from a tile written
    now or (left of them) from the journal."""
    if size == 0:
        return merkle.EMPTY_ROOT
    have = {(t.level, t.index): t.data for t in tiles}
    hashes = []
    for level, index in merkle.root_keys(size):
        tl, up = divmod(level, layout.TILE_HEIGHT)
        first = index << up
        data = have.get((tl, first >> layout.TILE_HEIGHT))
        off = (first & (layout.TILE_WIDTH - 1)) * HASH_SIZE
        if data is not None and len(data) >= off + (HASH_SIZE << up):
            hashes.append(hash_up(data[off:off + (HASH_SIZE << up)], up))
        else:
            hashes.append(fetch(level, index, index + 1))
    return merkle.fold(hashes)


def _checkpoint_note(journal: Journal, signer: Any, size: int, root: bytes) -> str:
    """The journal's checkpoint of ``size`` (signed and kept in the journal when it has none),
    with the cosignatures kept for it."""
    stored = dict(journal.store.checkpoints()).get(size)
    if stored is None and journal.size == size:
        stored = journal.checkpoint(signer)  # signed, kept in the journal and checkpoints/
    if stored is None:  # the journal grew while this publish ran: sign the size published
        stored = sign_checkpoint(Checkpoint(signer.key_name, size, root), signer.signer)
        if not journal.store.add_checkpoint(size, stored, time.time_ns()):
            stored = dict(journal.store.checkpoints())[size]
    cosigned = journal.cosigned_note(size)
    return merge_signatures(stored, cosigned) if cosigned else stored


def _cosign(journal: Journal, note: str, size: int, old_size: int, verifier: Verifier,
            witnesses: Sequence[tuple[str, Verifier]], submit: Submit, result: PublishResult) -> str:
    """Ask each witness for its cosignature (tlog-witness add-checkpoint); keep what verifies."""
    from ledger.journal.note import open_note

    for url, wkey in witnesses:
        guess = old_size if old_size else 0
        for _attempt in range(3):
            proof = journal.consistency_proof(guess, size).hashes if 0 < guess < size else ()
            status, body = submit(url, guess, proof, note)
            if status == 409:
                try:
                    told = int(body.strip())
                except ValueError:
                    raise VerificationError("witness", f"witness {url} answered 409 without a tree size") from None
                if told > size:
                    raise VerificationError("witness", f"witness {url} has cosigned size {told} of this log, "
                                            f"beyond the journal's {size}: the log was rolled back or forked")
                if told == guess:
                    raise VerificationError("witness", f"witness {url} refuses size {size}: it holds a different "
                                            f"root at size {told} (a fork)")
                guess = told
                continue
            break
        if status != 200:
            raise VerificationError("witness", f"witness {url} answered {status}: {body.strip()[:200]}")
        lines = [ln for ln in body.splitlines() if ln]
        text = note.split("\n\n", 1)[0] + "\n"
        candidate = text + "\n" + "".join(ln + "\n" for ln in lines)
        try:
            opened = open_note(candidate, [wkey])
        except (VerificationError, MalformedInput) as exc:
            raise VerificationError("witness", f"witness {url}'s answer holds no valid cosignature by "
                                    f"{wkey.name}: {exc}") from exc
        if not any(v.verifier == wkey for v in opened.verified):
            raise VerificationError("witness", f"witness {url} did not cosign with {wkey.name}")
        mine = [ln for ln in lines if ln.startswith(f"\u2014 {wkey.name} ")]
        note = merge_signatures(note, text + "\n" + "".join(ln + "\n" for ln in mine))
        result.cosigned_by.append(wkey.name)
    journal.add_cosignature(note, verifier)
    return note
