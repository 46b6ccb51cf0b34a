"""The tamper corpus, as data: one named case per attack on a journal, and the check it must trip.

Every journal case starts from the same baseline (see ``build_baseline``): 12 entries appended in
batches of 1, 3, 4 and 4 (tree heads at sizes 1, 4, 8 and 12), with signed checkpoints at sizes 8
and 12, each in the database and in ``checkpoints/<size>.note``. An auditor also kept a copy of the
checkpoint at 12 (``Baseline.note12``) outside the ledger directory.

A case's ``mutate`` acts like an attacker with write access to the ledger directory: it edits the
database with raw ``sqlite3`` (dropping the append-only triggers first, because triggers are a seat
belt and not the security boundary) or edits the checkpoint files. ``check`` and ``seq`` say what
``Journal.verify`` must then report; ``check=None`` marks an attack that verify cannot see (the
documented limit in docs/THREATS.md), and the test asserts that it passes. ``since=True`` runs
verify with the auditor's external checkpoint.

Proof cases (``PROOF_CASES``) corrupt a proof the journal produced and name the check that the
RFC 6962 verifiers in ``ledger.journal.merkle`` must raise.
"""

from __future__ import annotations

import base64
import itertools
import random
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from ledger.journal import merkle
from ledger.journal.codec import encode_entry
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.journal.note import Checkpoint, sign_checkpoint

KEY_NAME = "eval-ledger/test-log"
CLOCK_START = 1_700_000_000_000_000_000


def seeded_rng(seed: int) -> Callable[[int], bytes]:
    """A deterministic stand-in for ``os.urandom`` so keys reproduce byte for byte."""
    return random.Random(seed).randbytes


def counter_clock(start: int = CLOCK_START) -> Callable[[], int]:
    """A clock that ticks one microsecond per call (entries get distinct, reproducible ts)."""
    return itertools.count(start, 1_000).__next__


BATCHES = (1, 3, 4, 4)
SIZE = sum(BATCHES)  # 12
CHECKPOINT_SIZES = (8, 12)
TRIGGERS = (
    "entries_append_only", "entries_no_update", "entries_no_delete",
    "nodes_no_dup", "nodes_no_update", "nodes_no_delete",
    "heads_append_only", "heads_no_update", "heads_no_delete",
    "checkpoints_no_dup", "checkpoints_no_update", "checkpoints_no_delete",
)


# --------------------------------------------------------------------------- raw access helpers


@contextmanager
def raw_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection in autocommit mode, as an attacker (or a test) would open one."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # tests do not need these edits to survive a crash
    try:
        yield conn
    finally:
        conn.close()


def drop_triggers(conn: sqlite3.Connection, *names: str) -> None:
    """Remove the named append-only triggers (all of them when no name is given)."""
    for name in names or TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def flip_bit(blob: bytes, byte: int, bit: int = 0) -> bytes:
    """``blob`` with one bit inverted."""
    out = bytearray(blob)
    out[byte] ^= 1 << bit
    return bytes(out)


def entry_row(conn: sqlite3.Connection, seq: int) -> tuple[bytes, bytes, str | None, str | None, str]:
    """(leaf, body, run, task, kind) of one stored entry."""
    leaf, body, run, task, kind = conn.execute(
        "SELECT leaf, body, run, task, kind FROM entries WHERE seq = ?", (seq,)).fetchone()
    return bytes(leaf), bytes(body), run, task, kind


def baseline_items() -> list[dict[str, Any]]:
    """The 12 entries of the baseline journal (a small, plausible run)."""
    items: list[dict[str, Any]] = [{"kind": "run.started", "data": {"config": {"tier": "smoke"}},
                                    "run": "run-a"}]
    for i in range(1, SIZE):
        items.append({"kind": "agent.tool" if i % 3 else "task.result",
                      "data": {"i": i, "out": f"line {i}", "ok": i % 2 == 0},
                      "run": "run-a", "task": f"task-{i % 4}"})
    return items


@dataclass
class Baseline:
    """The untampered journal every case starts from."""

    home: Path
    db: Path
    keys: KeyRing
    other_keys: KeyRing
    note8: str
    note12: str  # the auditor's external copy of the latest checkpoint

    @property
    def folder(self) -> Path:
        return self.home / "checkpoints"


def build_baseline(home: Path, keys: KeyRing, other_keys: KeyRing,
                   clock: Callable[[], int]) -> Baseline:
    """Create the baseline journal in ``home`` and close it."""
    items = baseline_items()
    notes: dict[int, str] = {}
    with Journal.open(home / "journal.db", create=True, clock=clock) as j:
        start = 0
        for n in BATCHES:
            j.append_many(items[start:start + n])
            start += n
            if start in CHECKPOINT_SIZES:
                notes[start] = j.checkpoint(keys)
    return Baseline(home, home / "journal.db", keys, other_keys, notes[8], notes[12])


# --------------------------------------------------------------------------- attacker tools


def truncate_to(b: Baseline, size: int, *, checkpoint_rows: bool, checkpoint_files: bool) -> None:
    """Roll the log back to ``size`` entries, consistently: entries, nodes and heads beyond it go."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM entries WHERE seq >= ?", (size,))
        c.execute("DELETE FROM nodes WHERE ((idx + 1) << level) > ?", (size,))
        c.execute("DELETE FROM heads WHERE size > ?", (size,))
        if checkpoint_rows:
            c.execute("DELETE FROM checkpoints WHERE size > ?", (size,))
    if checkpoint_files:
        for path in b.folder.glob("*.note"):
            if int(path.stem) > size:
                path.unlink()


def rebuild_tree(conn: sqlite3.Connection) -> None:
    """Recompute every leaf hash, tree node and head from the stored bodies (a careful forger)."""
    rows = conn.execute("SELECT seq, body FROM entries ORDER BY seq").fetchall()
    leaves = [merkle.leaf_hash(bytes(body)) for _, body in rows]
    for (seq, _), leaf in zip(rows, leaves, strict=True):
        conn.execute("UPDATE entries SET leaf = ? WHERE seq = ?", (leaf, seq))
    sizes = [s for (s,) in conn.execute("SELECT size FROM heads ORDER BY size")]
    conn.execute("DELETE FROM nodes")
    conn.execute("DELETE FROM heads")
    tree = merkle.MemoryNodes(leaves)
    conn.executemany("INSERT INTO nodes(level, idx, hash) VALUES (?,?,?)",
                     [(lv, ix, h) for (lv, ix), h in tree.nodes().items() if lv >= 1])
    conn.executemany("INSERT INTO heads(size, root, ts) VALUES (?,?,0)",
                     [(s, tree.root(s)) for s in sizes])


def rewrite_entry(conn: sqlite3.Connection, seq: int, data: dict[str, Any]) -> None:
    """Replace entry ``seq`` with a well-formed entry carrying other data (leaf hash recomputed)."""
    _, body, run, task, kind = entry_row(conn, seq)
    ts = msgpack.unpackb(body, raw=False)["ts"]
    new = encode_entry(seq=seq, ts=ts, kind=kind, data=data, run=run, task=task)
    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    conn.execute("INSERT INTO entries(seq, leaf, body, run, task, kind) VALUES (?,?,?,?,?,?)",
                 (seq, merkle.leaf_hash(new.raw), new.raw, run, task, kind))


def replace_checkpoint_row(conn: sqlite3.Connection, size: int, note: str) -> None:
    drop_triggers(conn)
    conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))


def forge_signature(note: str) -> str:
    """The note with one bit of its Ed25519 signature flipped (key ID intact)."""
    text, _, sig_line = note.rpartition("\n\n")
    prefix, _, b64 = sig_line.rstrip("\n").rpartition(" ")
    blob = base64.b64decode(b64)
    bad = flip_bit(blob, 10)  # inside the signature, after the 4-byte key ID
    return f"{text}\n\n{prefix} {base64.b64encode(bad).decode('ascii')}\n"


# --------------------------------------------------------------------------- the journal cases


def _flipped_bit_entry(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        _, body, *_ = entry_row(c, 5)
        c.execute("UPDATE entries SET body = ? WHERE seq = 5", (flip_bit(body, len(body) - 2),))


def _short_body_leaf_recomputed(b: Baseline) -> None:
    """Entry 5's bytes cut to 3 bytes with a matching leaf hash: not an entry at all."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("UPDATE entries SET body = ?, leaf = ? WHERE seq = 5",
                  (b"\x81\xa0\xc0", merkle.leaf_hash(b"\x81\xa0\xc0")))


def _flipped_bit_leaf_hash(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        leaf, *_ = entry_row(c, 5)
        c.execute("UPDATE entries SET leaf = ? WHERE seq = 5", (flip_bit(leaf, 31, 7),))


def _flipped_bit_node(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        (h,) = c.execute("SELECT hash FROM nodes WHERE level = 1 AND idx = 2").fetchone()
        c.execute("UPDATE nodes SET hash = ? WHERE level = 1 AND idx = 2", (flip_bit(h, 0),))


def _flipped_bit_head_root(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        (r,) = c.execute("SELECT root FROM heads WHERE size = 4").fetchone()
        c.execute("UPDATE heads SET root = ? WHERE size = 4", (flip_bit(r, 3),))


def _swapped_entries(b: Baseline) -> None:
    """Rows 3 and 4 trade bodies and leaf hashes (and their indexed columns)."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        r3, r4 = entry_row(c, 3), entry_row(c, 4)
        for seq, (leaf, body, run, task, kind) in ((3, r4), (4, r3)):
            c.execute("UPDATE entries SET leaf=?, body=?, run=?, task=?, kind=? WHERE seq=?",
                      (leaf, body, run, task, kind, seq))


def _reordered_entries(b: Baseline) -> None:
    """Entries 3 and 4 trade places and are re-encoded with each other's seq, leaves recomputed."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        bodies = {s: msgpack.unpackb(entry_row(c, s)[1], raw=False) for s in (3, 4)}
        for seq, other in ((3, 4), (4, 3)):
            d = bodies[other]
            e = encode_entry(seq=seq, ts=d["ts"], kind=d["kind"], data=d["data"], run=d["run"],
                             task=d["task"])
            c.execute("UPDATE entries SET leaf=?, body=?, run=?, task=?, kind=? WHERE seq=?",
                      (e.leaf_hash, e.raw, e.run, e.task, e.kind, seq))


def _relabelled_run_column(b: Baseline) -> None:
    """The indexed run column of one row now names another run (filters would misattribute it)."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("UPDATE entries SET run = 'run-b' WHERE seq = 6")


def _deleted_tail_no_external(b: Baseline) -> None:
    truncate_to(b, 8, checkpoint_rows=True, checkpoint_files=True)


def _deleted_tail_file_survives(b: Baseline) -> None:
    truncate_to(b, 8, checkpoint_rows=True, checkpoint_files=False)


def _deleted_middle_entry(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM entries WHERE seq = 5")


def _reinserted_entry(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, {"i": 5, "out": "edited after the fact", "ok": True})


def _reinserted_entry_stale_leaf(b: Baseline) -> None:
    """The changed body is re-inserted but keeps the old leaf hash."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        old_leaf, *_ = entry_row(c, 5)
        rewrite_entry(c, 5, {"i": 5, "out": "edited after the fact", "ok": True})
        c.execute("UPDATE entries SET leaf = ? WHERE seq = 5", (old_leaf,))


def _rewritten_history_recomputed_tree(b: Baseline) -> None:
    """Entry 5 rewritten and every leaf, node and head recomputed; checkpoints left alone."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        rewrite_entry(c, 5, {"i": 5, "out": "edited after the fact", "ok": True})
        rebuild_tree(c)


def _rewritten_history_checkpoints_removed(b: Baseline) -> None:
    """As above, and every checkpoint the forger cannot re-sign is deleted (rows and files)."""
    _rewritten_history_recomputed_tree(b)
    with raw_db(b.db) as c:
        c.execute("DELETE FROM checkpoints")
    for path in b.folder.glob("*.note"):
        path.unlink()


def _deleted_node(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM nodes WHERE level = 2 AND idx = 1")


def _extra_node(b: Baseline) -> None:
    with raw_db(b.db) as c:
        c.execute("INSERT INTO nodes(level, idx, hash) VALUES (4, 0, ?)", (b"\x00" * 32,))


def _deleted_latest_head(b: Baseline) -> None:
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM heads WHERE size = 12")


def _appended_outside_transaction(b: Baseline) -> None:
    """A well-formed entry 12 inserted by hand, without the tree head an append would record."""
    with raw_db(b.db) as c:
        e = encode_entry(seq=12, ts=0, kind="agent.tool", data={"i": 12}, run="run-a")
        c.execute("INSERT INTO entries(seq, leaf, body, run, task, kind) VALUES (?,?,?,?,?,?)",
                  (12, e.leaf_hash, e.raw, e.run, e.task, e.kind))


def _forged_checkpoint_signature(b: Baseline) -> None:
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 8, forge_signature(b.note8))


def _forged_checkpoint_body(b: Baseline) -> None:
    """The signed text of checkpoint 8 is edited (size 8 -> 7) and the old signature kept."""
    forged = b.note8.replace("\n8\n", "\n7\n", 1)
    assert forged != b.note8
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 8, forged)


def _checkpoint_from_another_key(b: Baseline) -> None:
    """An impostor key (same name, other key material) signs a correct head; file dropped in the folder."""
    with Journal.open(b.db) as j:
        size, root = j.head()
    cp = Checkpoint(origin=b.keys.key_name, size=size, root=root)
    (b.folder / f"{size}.note").write_text(sign_checkpoint(cp, b.other_keys.signer), "utf-8")


def _checkpoint_root_mismatch(b: Baseline) -> None:
    """The real key signed a head for size 8 whose root is not this log's (a fork)."""
    with Journal.open(b.db) as j:
        real = j.root_at(8)
    cp = Checkpoint(origin=b.keys.key_name, size=8, root=flip_bit(real, 0))
    (b.folder / "8.note").write_text(sign_checkpoint(cp, b.keys.signer), "utf-8")


def _checkpoint_row_for_other_size(b: Baseline) -> None:
    """Checkpoint row 12 holds the (valid) note for size 8, so 8 looks like the latest."""
    with raw_db(b.db) as c:
        replace_checkpoint_row(c, 12, b.note8)


def _stale_checkpoint_as_current(b: Baseline) -> None:
    """The database drops its latest checkpoint so that checkpoint 8 is presented as current."""
    with raw_db(b.db) as c:
        drop_triggers(c)
        c.execute("DELETE FROM checkpoints WHERE size = 12")


def _malformed_checkpoint_file(b: Baseline) -> None:
    (b.folder / "12.note").write_text("not a signed note\n", "utf-8")


def _retyped(table: str, column: str, where: str, value: str) -> Callable[[Baseline], None]:
    """SQLite columns are dynamically typed: store a TEXT (or other) value where a BLOB belongs."""

    def mutate(b: Baseline) -> None:
        with raw_db(b.db) as c:
            drop_triggers(c)
            c.execute(f"UPDATE {table} SET {column} = {value} WHERE {where}")

    return mutate


@dataclass(frozen=True)
class TamperCase:
    """One attack: how to apply it, and what verify must say afterwards."""

    name: str
    mutate: Callable[[Baseline], None]
    check: str | None  # None: verify cannot detect it and must pass
    seq: int | None = None
    since: bool = False  # verify with the auditor's external checkpoint (size 12)
    size_after: int = SIZE  # the size verify reports when it passes


CASES: tuple[TamperCase, ...] = (
    TamperCase("flipped-bit-entry", _flipped_bit_entry, "leaf-hash", 5),
    TamperCase("short-body-leaf-recomputed", _short_body_leaf_recomputed, "entry-envelope", 5),
    TamperCase("flipped-bit-leaf-hash", _flipped_bit_leaf_hash, "leaf-hash", 5),
    TamperCase("flipped-bit-node", _flipped_bit_node, "node-hash", 4),
    TamperCase("flipped-bit-head-root", _flipped_bit_head_root, "head-root", 3),
    TamperCase("swapped-entries", _swapped_entries, "entry-envelope", 3),
    TamperCase("reordered-entries-reencoded", _reordered_entries, "node-hash", 2),
    TamperCase("relabelled-run-column", _relabelled_run_column, "entry-envelope", 6),
    # The documented limit: a consistent truncation with every later checkpoint destroyed is
    # invisible without a checkpoint kept outside the ledger directory.
    TamperCase("deleted-tail-no-external-checkpoint", _deleted_tail_no_external, None,
               size_after=8),
    TamperCase("deleted-tail-checkpoint-file-survives", _deleted_tail_file_survives,
               "checkpoint-ahead", 8),
    TamperCase("deleted-tail-auditor-checkpoint", _deleted_tail_no_external, "consistency", 8,
               since=True),
    TamperCase("deleted-middle-entry", _deleted_middle_entry, "entry-seq", 5),
    TamperCase("reinserted-entry-after-dropping-triggers", _reinserted_entry, "node-hash", 4),
    TamperCase("reinserted-entry-stale-leaf", _reinserted_entry_stale_leaf, "leaf-hash", 5),
    TamperCase("rewritten-history-recomputed-tree", _rewritten_history_recomputed_tree,
               "checkpoint-root", 7),
    # Again only an external checkpoint exposes a rewrite whose forger deleted every checkpoint.
    TamperCase("rewritten-history-checkpoints-removed", _rewritten_history_checkpoints_removed,
               None),
    TamperCase("rewritten-history-auditor-checkpoint", _rewritten_history_checkpoints_removed,
               "consistency", 11, since=True),
    TamperCase("deleted-node", _deleted_node, "node-missing", 4),
    TamperCase("extra-node", _extra_node, "node-extra", 0),
    TamperCase("deleted-latest-head", _deleted_latest_head, "head-missing", 8),
    TamperCase("appended-outside-transaction", _appended_outside_transaction, "head-missing", 12),
    TamperCase("forged-checkpoint-signature", _forged_checkpoint_signature,
               "checkpoint-signature"),
    TamperCase("forged-checkpoint-body", _forged_checkpoint_body, "checkpoint-signature"),
    TamperCase("checkpoint-from-another-key", _checkpoint_from_another_key,
               "checkpoint-signature"),
    TamperCase("checkpoint-root-mismatch", _checkpoint_root_mismatch, "checkpoint-root", 7),
    TamperCase("checkpoint-row-for-other-size", _checkpoint_row_for_other_size,
               "checkpoint-signature"),
    # "Stale checkpoint presented as current": the database's newest checkpoint is older than
    # one the checkpoint folder holds. verify names it checkpoint-missing, at the newer size.
    # (Presenting an old log against a newer auditor checkpoint is the deleted-tail-auditor case.)
    TamperCase("stale-checkpoint-as-current", _stale_checkpoint_as_current,
               "checkpoint-missing", 12),
    TamperCase("malformed-checkpoint-file", _malformed_checkpoint_file, "checkpoint-signature"),
    # Type confusion: the same bytes, or a look-alike, stored with another SQLite type.
    TamperCase("entry-body-as-text", _retyped("entries", "body", "seq = 5", "CAST(body AS TEXT)"),
               "entry-columns", 5),
    TamperCase("entry-leaf-as-text", _retyped("entries", "leaf", "seq = 5", "hex(leaf)"),
               "entry-columns", 5),
    TamperCase("entry-body-as-integer", _retyped("entries", "body", "seq = 5", "42"),
               "entry-columns", 5),
    TamperCase("node-hash-as-text", _retyped("nodes", "hash", "level = 1 AND idx = 2", "hex(hash)"),
               "node-hash", 4),
    TamperCase("head-root-as-text", _retyped("heads", "root", "size = 4", "hex(root)"),
               "head-root", 3),
    TamperCase("checkpoint-note-as-blob",
               _retyped("checkpoints", "note", "size = 8", "CAST(note AS BLOB)"),
               "checkpoint-signature"),
)


# --------------------------------------------------------------------------- the proof cases


@dataclass(frozen=True)
class ProofCase:
    """A corrupted proof: ``attack(journal)`` calls a merkle verifier that must raise ``check``."""

    name: str
    attack: Callable[[Journal], None]
    check: str


def _inclusion(j: Journal, seq: int, edit: Callable[[list[bytes]], list[bytes]],
               **override: Any) -> None:
    p = j.inclusion_proof(seq, j.size)
    args: dict[str, Any] = {"index": p.leaf_index, "size": p.tree_size, "leaf": p.leaf_hash,
                            "proof": edit(list(p.hashes)), "root": p.root}
    args.update(override)
    merkle.verify_inclusion(args["index"], args["size"], args["leaf"], args["proof"], args["root"])


def _consistency(j: Journal, old: int, edit: Callable[[list[bytes]], list[bytes]],
                 **override: Any) -> None:
    p = j.consistency_proof(old, j.size)
    args: dict[str, Any] = {"old_size": p.old_size, "new_size": p.new_size,
                            "old_root": p.old_root, "new_root": p.new_root,
                            "proof": edit(list(p.hashes))}
    args.update(override)
    merkle.verify_consistency(args["old_size"], args["new_size"], args["old_root"],
                              args["new_root"], args["proof"])


def _same(h: list[bytes]) -> list[bytes]:
    return h


PROOF_CASES: tuple[ProofCase, ...] = (
    ProofCase("inclusion-truncated", lambda j: _inclusion(j, 5, lambda h: h[:-1]),
              "inclusion-proof"),
    ProofCase("inclusion-padded", lambda j: _inclusion(j, 5, lambda h: h + [b"\x00" * 32]),
              "inclusion-proof"),
    ProofCase("inclusion-padded-with-root", lambda j: _inclusion(j, 5, lambda h: h + [j.head()[1]]),
              "inclusion-proof"),
    ProofCase("inclusion-empty", lambda j: _inclusion(j, 5, lambda h: []), "inclusion-proof"),
    ProofCase("inclusion-flipped-hash", lambda j: _inclusion(j, 5, lambda h: [flip_bit(h[0], 0)] + h[1:]),
              "inclusion-proof"),
    ProofCase("inclusion-hash-with-trailing-byte",
              lambda j: _inclusion(j, 5, lambda h: [h[0] + b"\x00"] + h[1:]), "inclusion-proof"),
    ProofCase("inclusion-short-hash", lambda j: _inclusion(j, 5, lambda h: [h[0][:31]] + h[1:]),
              "inclusion-proof"),
    ProofCase("inclusion-reordered", lambda j: _inclusion(j, 5, lambda h: h[::-1]),
              "inclusion-proof"),
    ProofCase("inclusion-wrong-index", lambda j: _inclusion(j, 5, _same, index=4),
              "inclusion-proof"),
    ProofCase("inclusion-index-beyond-size", lambda j: _inclusion(j, 5, _same, index=12),
              "inclusion-proof"),
    ProofCase("inclusion-huge-size", lambda j: _inclusion(j, 5, _same, size=2**64),
              "inclusion-proof"),
    ProofCase("inclusion-wrong-leaf", lambda j: _inclusion(j, 5, _same, leaf=j.entry(4).leaf_hash),
              "inclusion-proof"),
    ProofCase("consistency-truncated", lambda j: _consistency(j, 5, lambda h: h[:-1]),
              "consistency-proof"),
    ProofCase("consistency-padded", lambda j: _consistency(j, 5, lambda h: h + [b"\x00" * 32]),
              "consistency-proof"),
    ProofCase("consistency-empty", lambda j: _consistency(j, 5, lambda h: []),
              "consistency-proof"),
    ProofCase("consistency-flipped-hash",
              lambda j: _consistency(j, 5, lambda h: h[:-1] + [flip_bit(h[-1], 7)]),
              "consistency-proof"),
    ProofCase("consistency-hash-with-trailing-byte",
              lambda j: _consistency(j, 5, lambda h: [h[0] + b"\x00"] + h[1:]),
              "consistency-proof"),
    ProofCase("consistency-wrong-old-size", lambda j: _consistency(j, 5, _same, old_size=6),
              "consistency-proof"),
    ProofCase("consistency-old-larger-than-new", lambda j: _consistency(j, 5, _same, old_size=13),
              "consistency-proof"),
    ProofCase("consistency-from-empty-tree",
              lambda j: _consistency(j, 5, lambda h: [], old_size=0, old_root=merkle.EMPTY_ROOT),
              "consistency-proof"),
    ProofCase("consistency-forked-old-root",
              lambda j: _consistency(j, 4, _same, old_root=flip_bit(j.root_at(4), 0)),
              "consistency-proof"),
)
