"""Verified reading: the entries of a run, checked against the tree and a signed checkpoint before
anything is shown from them (``report``, ``failures``, ``leaderboard``, ``compare``, ``view``,
``export``).

Cheaper than ``ledger verify`` because it checks only what the page is made of: the run's
entries are decoded (canonical bytes), their leaf hashes recomputed and compared with the tree's
leaves, the tree's root at the latest signed checkpoint recomputed from all its leaves and
compared with the signed root, and the run's entries compared with the digest its
``run.finished`` records (so an index that hides or adds an entry of the run is caught too).
What it does not check, ``ledger verify`` does: the stored interior tiles, the recorded heads,
every other run, attestations and replays.

Raises ``VerificationError`` naming the check and the first bad seq; returns the entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger.errors import CodecError, VerificationError
from ledger.journal import merkle
from ledger.journal.bundle import check_run_entries
from ledger.journal.codec import Entry, decode_entry
from ledger.journal.journal import Journal
from ledger.journal.note import Verifier, open_checkpoint
from ledger.journal.verify import levels_from_leaves, root_from_levels


@dataclass(frozen=True)
class RunReading:
    """A run's entries as verified: against the signed checkpoint of ``checkpoint_size`` (0: the
    journal has none yet); ``unsigned`` of them lie beyond it (checked against the tree's leaves,
    not under a signature yet: a run still going); ``complete``: the run's ``run.finished``
    digest named exactly these; ``leaves``: the tree's level 0 (32 bytes per seq) that they were
    checked against, so that a reader need not hash them again (:func:`leaf_of`)."""

    run: str
    entries: list[Entry]
    checkpoint_size: int
    unsigned: int
    complete: bool
    leaves: bytes = b""


def leaf_of(e: Entry, leaves: bytes) -> bytes:
    """The leaf hash of an entry that ``read_run`` checked against ``leaves``."""
    return leaves[32 * e.seq:32 * e.seq + 32]


def read_run(journal: Journal, run_id: str, verifier: Callable[[], Verifier]) -> RunReading:
    """The run's entries, verified as the module docstring says, or ``VerificationError``.

    ``verifier`` is asked for the key only when the journal has a signed checkpoint; with none
    yet (``checkpoint_size`` 0) the entries are checked against the tree's leaves only.
    """
    size = journal.size
    checkpoints = journal.store.checkpoints()
    cp_size, note = max(checkpoints) if checkpoints else (0, "")
    if cp_size > size:
        raise VerificationError("checkpoint-journal", "the journal is shorter than its latest signed "
                                "checkpoint (truncated or rolled back?)", expected=str(cp_size),
                                computed=str(size))
    try:
        leaves = journal.store.leaf_level(size)
    except KeyError as exc:
        raise VerificationError("tree-nodes", f"the tree's leaves cannot be read: {exc}") from exc
    if checkpoints:
        cp = open_checkpoint(note, verifier())
        if cp.size != cp_size:
            raise VerificationError("checkpoint-journal", "a stored checkpoint is filed under another "
                                    "size than it signs", expected=str(cp_size), computed=str(cp.size))
        root = root_from_levels(levels_from_leaves(leaves[:32 * cp_size]), cp_size)
        if root != cp.root:
            raise VerificationError("checkpoint-journal", f"the tree's root at size {cp_size} is not "
                                    "the signed root: an entry was changed after it was signed",
                                    expected=cp.root.hex(), computed=root.hex())
    entries: list[Entry] = []
    unsigned = 0
    for seq, body in journal.store.rows(run=run_id):
        try:
            e = decode_entry(bytes(body))
        except CodecError as exc:
            raise VerificationError("entry-envelope", f"stored bytes are not a canonical entry: {exc}",
                                    seq=seq) from exc
        if e.seq != seq or e.run != run_id:
            raise VerificationError("entry-envelope", "the entry's bytes name another seq or run "
                                    "than the index files it under", seq=seq)
        if merkle.leaf_hash(e.raw) != leaves[32 * seq:32 * seq + 32]:
            raise VerificationError("leaf-hash", "the entry's bytes do not hash to the tree's leaf",
                                    seq=seq)
        unsigned += seq >= cp_size
        entries.append(e)
    complete = check_run_entries(entries, run_id, check="run-entries", leaves=leaves)
    return RunReading(run_id, entries, cp_size, unsigned, complete, leaves)
