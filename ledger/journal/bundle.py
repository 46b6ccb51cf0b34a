"""Evidence bundles: a slice of the journal that verifies with the public key alone.

A bundle is one JSON document (see docs/FORMAT.md, "Bundle")::

    {"format": "eval-ledger-bundle", "version": 1,
     "checkpoint": "<signed note>", "tree_size": N, "root": "<hex>",
     "run": "<run id>" | null, "first_seq": a, "last_seq": b,
     "entries": [{"seq": s, "bytes": "<base64 entry bytes>", "proof": ["<hex>", ...]}, ...]}

``entries`` is the contiguous range a..b (a whole run, or the whole log), each with an RFC 6962
inclusion proof against the signed checkpoint. Verification needs no journal and no secret.
A run bundle must hold the whole run (``run.started`` first, a final ``run.finished`` and its
recorded view): a cut one fails ``bundle-incomplete``. A bundle with ``run: null`` that does not
cover the whole tree is verified as a *selection* of entries, and says so.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.errors import CodecError, MalformedInput, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import Entry, decode_entry
from ledger.journal.journal import Journal
from ledger.journal.note import Verifier, open_checkpoint

BUNDLE_FORMAT = "eval-ledger-bundle"
BUNDLE_VERSION = 1
MAX_BUNDLE_BYTES = 2 * 1024**3
MAX_PROOF_LEN = 64


def export_bundle(journal: Journal, keys: Any, *, run: str | None = None) -> dict[str, Any]:
    """Build a bundle for one run (its contiguous seq range) or the whole log."""
    note = journal.checkpoint(keys)
    size, root = journal.head()
    if size == 0:
        raise UsageError("the journal is empty: nothing to export")
    if run is None:
        first, last = 0, size - 1
    else:
        mine = list(journal.entries(run=run))
        if not mine:
            raise UsageError(f"run {run} has no entries")
        try:
            check_run_complete(mine, run)
        except VerificationError as exc:
            raise UsageError(f"cannot export run {run} as a run bundle: {exc}; export the whole log "
                             "instead (`ledger export -o FILE`)") from exc
        first, last = mine[0].seq, mine[-1].seq
    entries = []
    for e in journal.entries(start=first, stop=last + 1):
        proof = journal.inclusion_proof(e.seq, size)
        entries.append({"seq": e.seq, "bytes": base64.b64encode(e.raw).decode("ascii"),
                        "proof": [h.hex() for h in proof.hashes]})
    return {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "checkpoint": note,
            "tree_size": size, "root": root.hex(), "run": run, "first_seq": first,
            "last_seq": last, "entries": entries}


def load_bundle_bytes(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BUNDLE_BYTES:
        raise MalformedInput("bundle is larger than 2 GiB")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedInput(f"bundle is not JSON: {exc}") from exc
    if not isinstance(obj, dict) or obj.get("format") != BUNDLE_FORMAT:
        raise MalformedInput("not an eval-ledger bundle (format field missing or wrong)")
    if obj.get("version") != BUNDLE_VERSION:
        raise MalformedInput(f"bundle version {obj.get('version')!r} is not supported")
    return obj


def check_run_complete(entries: Sequence[Entry], run: str) -> None:
    """A run bundle holds the whole run: its ``run.started`` first, a final ``run.finished`` (not
    reopened by a later ``run.resumed``) and its recorded view(s); else ``bundle-incomplete``."""
    mine = [e for e in entries if e.run == run]
    if not mine or mine[0].kind != "run.started":
        raise VerificationError("bundle-incomplete", f"the bundle does not start with run {run}'s "
                                "run.started", seq=mine[0].seq if mine else None)
    lifecycle = [e for e in mine if e.kind in ("run.finished", "run.resumed")]
    if not lifecycle or lifecycle[-1].kind != "run.finished":
        raise VerificationError("bundle-incomplete", f"run {run} has no final run.finished in the "
                                "bundle (cut short, or the run is unfinished)", seq=mine[-1].seq)
    if not any(e.kind == "view.recorded" for e in mine):
        raise VerificationError("bundle-incomplete", f"run {run}'s recorded view is not in the bundle",
                                seq=mine[-1].seq)


@dataclass(frozen=True)
class VerifiedBundle:
    tree_size: int
    root: bytes
    run: str | None
    first_seq: int
    last_seq: int
    entries: tuple[Entry, ...]
    checkpoint_note: str

    @property
    def kind(self) -> str:
        """``run`` (a whole run, checked complete), ``log`` (every entry of the tree) or
        ``selection`` (a contiguous range that claims nothing about runs)."""
        if self.run is not None:
            return "run"
        if self.first_seq == 0 and self.last_seq == self.tree_size - 1:
            return "log"
        return "selection"

    def find(self, leaf_hex: str) -> Entry | None:
        for e in self.entries:
            if e.leaf_hash.hex() == leaf_hex.lower():
                return e
        return None

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)


def _int_field(obj: dict[str, Any], name: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > merkle.MAX_SIZE:
        raise MalformedInput(f"bundle field {name!r} must be a non-negative integer")
    return value


def verify_bundle(obj: dict[str, Any], verifier: Verifier) -> VerifiedBundle:
    """Check a bundle with the public key only; return its verified entries or raise."""
    note = obj.get("checkpoint")
    if not isinstance(note, str):
        raise MalformedInput("bundle has no checkpoint note")
    cp = open_checkpoint(note, verifier)
    tree_size = _int_field(obj, "tree_size")
    first = _int_field(obj, "first_seq")
    last = _int_field(obj, "last_seq")
    try:
        root = bytes.fromhex(str(obj.get("root", "")))
    except ValueError as exc:
        raise MalformedInput("bundle root is not hex") from exc
    if cp.size != tree_size or cp.root != root:
        raise VerificationError("bundle-checkpoint",
                                "the bundle's tree head is not the one its checkpoint signs (stale checkpoint?)",
                                expected=f"{cp.size}:{cp.root.hex()}", computed=f"{tree_size}:{root.hex()}")
    run = obj.get("run")
    if run is not None and not isinstance(run, str):
        raise MalformedInput("bundle run must be a string or null")
    items = obj.get("entries")
    if not isinstance(items, list):
        raise MalformedInput("bundle entries must be a list")
    if first > last or last >= tree_size:
        raise MalformedInput(f"bundle range {first}..{last} is not inside a tree of size {tree_size}")
    if len(items) != last - first + 1:
        raise VerificationError("bundle-range", f"the bundle must hold every entry of {first}..{last}: "
                                f"expected {last - first + 1}, found {len(items)}", seq=first)
    out: list[Entry] = []
    for pos, item in enumerate(items):
        seq = first + pos
        if not isinstance(item, dict) or item.get("seq") != seq:
            raise VerificationError("bundle-range", "bundle entries are not the contiguous range they claim",
                                    seq=seq)
        try:
            raw = base64.b64decode(str(item.get("bytes", "")), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MalformedInput(f"bundle entry {seq}: bytes are not base64") from exc
        proof_hex = item.get("proof")
        if not isinstance(proof_hex, list) or len(proof_hex) > MAX_PROOF_LEN:
            raise MalformedInput(f"bundle entry {seq}: proof must be a list of at most {MAX_PROOF_LEN} hashes")
        try:
            proof = [bytes.fromhex(h) for h in proof_hex]
        except (TypeError, ValueError) as exc:
            raise MalformedInput(f"bundle entry {seq}: proof hashes must be hex") from exc
        try:
            entry = decode_entry(raw)
        except CodecError as exc:
            raise VerificationError("entry-envelope", f"bundle entry is not a canonical entry: {exc}", seq=seq) from exc
        if entry.seq != seq:
            raise VerificationError("entry-envelope", "entry bytes carry another seq", seq=seq,
                                    computed=str(entry.seq))
        try:
            merkle.verify_inclusion(seq, tree_size, entry.leaf_hash, proof, root)
        except VerificationError as exc:
            raise VerificationError("inclusion-proof", str(exc), seq=seq) from exc
        out.append(entry)
    if run is not None:
        mine = [e for e in out if e.run == run]
        if not mine or mine[0].seq != first or mine[-1].seq != last:
            raise VerificationError("bundle-range", f"the range does not start and end with entries of run {run}",
                                    seq=first)
        check_run_complete(out, run)
    return VerifiedBundle(tree_size, root, run, first, last, tuple(out), note)
