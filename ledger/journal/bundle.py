"""Evidence bundles: entries of the journal that verify with the public key alone.

A bundle is one JSON document (see docs/FORMAT.md, "Bundles"). A *run* bundle (version 2) holds
the run's own entries and nothing of any other run::

    {"format": "eval-ledger-bundle", "version": 2,
     "checkpoint": "<signed note>", "tree_size": N, "root": "<hex>", "run": "<run id>",
     "entries": [{"seq": s, "bytes": "<base64 entry bytes>", "proof": ["<hex>", ...]}, ...]}

each entry with an RFC 6962 inclusion proof against the signed checkpoint, in increasing seq
order, none filed under another run. It must hold the whole run (``run.started`` first, a final
``run.finished`` and its recorded view): a cut one fails ``bundle-incomplete``; and where the run's
``run.finished`` records the digest of the run's entries before it (``entries``, every run
recorded since run bundles hold one run), the bundle's entries must make exactly that digest, so
that no entry of the run can be left out either.

A *log* bundle (version 1, ``run: null``) is the contiguous range 0..tree_size-1; a version-1
bundle of any other range is verified as a *selection* of entries and says so. Version-1 run
bundles (a run's first to last entry, with every run in between) written before still verify.
Verification needs no journal and no secret.
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
BUNDLE_VERSION = 1  # a log or a contiguous selection
RUN_BUNDLE_VERSION = 2  # one run's own entries
MAX_BUNDLE_BYTES = 2 * 1024**3
MAX_PROOF_LEN = 64


def _item(journal: Journal, entry: Entry, size: int) -> dict[str, Any]:
    proof = journal.inclusion_proof(entry.seq, size)
    return {"seq": entry.seq, "bytes": base64.b64encode(entry.raw).decode("ascii"),
            "proof": [h.hex() for h in proof.hashes]}


def export_bundle(journal: Journal, keys: Any, *, run: str | None = None) -> dict[str, Any]:
    """Build a bundle of one run (its own entries) or of the whole log."""
    note = journal.checkpoint(keys)
    size, root = journal.head()
    if size == 0:
        raise UsageError("the journal is empty: nothing to export")
    head = {"format": BUNDLE_FORMAT, "checkpoint": note, "tree_size": size, "root": root.hex(),
            "run": run}
    if run is None:
        return {**head, "version": BUNDLE_VERSION, "first_seq": 0, "last_seq": size - 1,
                "entries": [_item(journal, e, size) for e in journal.entries(start=0, stop=size)]}
    mine = [e for e in journal.entries(run=run) if e.seq < size]
    if not mine:
        raise UsageError(f"run {run} has no entries")
    try:
        check_run_complete(mine, run)
    except VerificationError as exc:
        raise UsageError(f"cannot export run {run} as a run bundle: {exc}; export the whole log "
                         "instead (`ledger export -o FILE`)") from exc
    return {**head, "version": RUN_BUNDLE_VERSION, "entries": [_item(journal, e, size) for e in mine]}


def load_bundle_bytes(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BUNDLE_BYTES:
        raise MalformedInput("bundle is larger than 2 GiB")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedInput(f"bundle is not JSON: {exc}") from exc
    except RecursionError:
        raise MalformedInput("bundle is not usable JSON: nested too deeply") from None
    if not isinstance(obj, dict) or obj.get("format") != BUNDLE_FORMAT:
        raise MalformedInput("not an eval-ledger bundle (format field missing or wrong)")
    if obj.get("version") not in (BUNDLE_VERSION, RUN_BUNDLE_VERSION):
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


def check_run_entries(entries: Sequence[Entry], run: str, *, check: str = "bundle-incomplete",
                      leaves: bytes | None = None) -> bool:
    """Every ``run.finished`` of ``run`` that records ``entries`` (the digest of the run's entries
    before it) must be made by exactly the entries given; ``check`` fails otherwise.
    Returns whether the final one recorded it (False: a run recorded before the digest existed,
    whose completeness this cannot prove). ``leaves``: the tree's level 0 (32 bytes per seq),
    already checked against these entries' bytes, so that no entry is hashed again."""
    digest = merkle.RunDigest()
    recorded = False
    for e in entries:
        if e.run != run:
            continue
        if e.kind == "run.finished":
            claimed = e.data.get("entries")
            recorded = isinstance(claimed, dict)
            if recorded and claimed != digest.as_data():
                raise VerificationError(
                    check, f"run {run}'s entries before its run.finished are not "
                    "the ones it recorded (an entry of the run is missing or added)", seq=e.seq,
                    expected=str(claimed), computed=str(digest.as_data()))
        if merkle.in_run_digest(e.kind):
            digest.add(e.leaf_hash if leaves is None else leaves[32 * e.seq:32 * e.seq + 32])
    return recorded


@dataclass(frozen=True)
class VerifiedBundle:
    tree_size: int
    root: bytes
    run: str | None
    first_seq: int
    last_seq: int
    entries: tuple[Entry, ...]
    checkpoint_note: str
    version: int = BUNDLE_VERSION
    complete: bool = True
    """A run bundle: whether the run's recorded entry digest proved that none is left out (False
    for runs recorded before ``run.finished`` held it: only their start, end and view are
    checked)."""

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


def _verified_entry(item: Any, seq: int, tree_size: int, root: bytes) -> Entry:
    """One bundle item claimed to be the entry at ``seq``: canonical, that seq, included."""
    if not isinstance(item, dict) or item.get("seq") != seq:
        raise VerificationError("bundle-range", "bundle entries are not the range they claim", seq=seq)
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
    return entry


def _run_bundle_entries(items: list[Any], run: str, tree_size: int, root: bytes) -> list[Entry]:
    """A version-2 bundle's items: the run's own entries, in increasing seq order."""
    out: list[Entry] = []
    for item in items:
        seq = item.get("seq") if isinstance(item, dict) else None
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < tree_size:
            raise MalformedInput(f"bundle entry seq {seq!r} is not inside a tree of size {tree_size}")
        if out and seq <= out[-1].seq:
            raise VerificationError("bundle-range", "bundle entries are not in increasing seq order",
                                    seq=seq)
        entry = _verified_entry(item, seq, tree_size, root)
        if entry.run != run:
            raise VerificationError("bundle-foreign-entry", f"the bundle of run {run} holds an entry "
                                    f"of {'no run' if entry.run is None else 'run ' + entry.run}",
                                    seq=seq)
        out.append(entry)
    if not out:
        raise VerificationError("bundle-incomplete", f"the bundle holds no entry of run {run}")
    return out


def verify_bundle(obj: dict[str, Any], verifier: Verifier) -> VerifiedBundle:
    """Check a bundle with the public key only; return its verified entries or raise."""
    note = obj.get("checkpoint")
    if not isinstance(note, str):
        raise MalformedInput("bundle has no checkpoint note")
    cp = open_checkpoint(note, verifier)
    tree_size = _int_field(obj, "tree_size")
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
    if obj.get("version") == RUN_BUNDLE_VERSION:
        if run is None:
            raise MalformedInput("a version-2 bundle must name its run")
        out = _run_bundle_entries(items, run, tree_size, root)
        check_run_complete(out, run)
        complete = check_run_entries(out, run)
        return VerifiedBundle(tree_size, root, run, out[0].seq, out[-1].seq, tuple(out), note,
                              RUN_BUNDLE_VERSION, complete)
    first = _int_field(obj, "first_seq")
    last = _int_field(obj, "last_seq")
    if first > last or last >= tree_size:
        raise MalformedInput(f"bundle range {first}..{last} is not inside a tree of size {tree_size}")
    if len(items) != last - first + 1:
        raise VerificationError("bundle-range", f"the bundle must hold every entry of {first}..{last}: "
                                f"expected {last - first + 1}, found {len(items)}", seq=first)
    out = [_verified_entry(item, first + pos, tree_size, root) for pos, item in enumerate(items)]
    if run is not None:
        mine = [e for e in out if e.run == run]
        if not mine or mine[0].seq != first or mine[-1].seq != last:
            raise VerificationError("bundle-range", f"the range does not start and end with entries of run {run}",
                                    seq=first)
        check_run_complete(out, run)
        check_run_entries(out, run)
    return VerifiedBundle(tree_size, root, run, first, last, tuple(out), note)
