"""Property tests: append-then-verify, every single-byte change is caught, proofs always check."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import VerificationError
from ledger.journal import merkle
from ledger.journal.journal import Journal

try:
    from .tamper_cases import counter_clock, drop_triggers, raw_db
except ImportError:  # tests/journal is not a package: pytest puts it on sys.path instead
    from tamper_cases import counter_clock, drop_triggers, raw_db  # type: ignore[no-redef]

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12) | st.binary(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
ITEM = st.fixed_dictionaries(
    {"kind": st.sampled_from(["run.started", "agent.tool", "task.result", "x"]),
     "data": st.dictionaries(st.text(max_size=6), JSONISH, max_size=4)},
    optional={"run": st.none() | st.sampled_from(["r1", "r2"]),
              "task": st.none() | st.text(min_size=1, max_size=6)},
)


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.lists(ITEM, min_size=1, max_size=6), min_size=1, max_size=6))
def test_append_then_verify(batches: list[list[dict[str, Any]]]) -> None:
    """Whatever is appended, in whatever batches, verifies and reads back unchanged."""
    with Journal.open(":memory:", clock=counter_clock()) as j:
        for batch in batches:
            if len(batch) == 1:
                item = batch[0]
                j.append(item["kind"], item["data"], run=item.get("run"), task=item.get("task"))
            else:
                j.append_many(batch)
        flat = [item for batch in batches for item in batch]
        summary = j.verify()
        assert summary["size"] == len(flat) == j.size
        assert summary["heads"] == len(batches)
        stored = list(j.entries())
        assert [e.seq for e in stored] == list(range(len(flat)))
        for e, item in zip(stored, flat, strict=True):
            assert (e.kind, e.run, e.task) == (item["kind"], item.get("run"), item.get("task"))
            assert e.data == item["data"]
        assert j.head()[1] == merkle.root_from_leaves([e.leaf_hash for e in stored])


# --------------------------------------------------------------------------- single-byte changes

PRISTINE_SIZE = 13


class Pristine(bytes):
    """Database bytes with a short repr (Hypothesis prints arguments of failing examples)."""

    def __repr__(self) -> str:
        return f"<journal.db, {len(self)} bytes>"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """The bytes of a closed 13-entry journal database (batches of 1, 4, 8)."""
    path = tmp_path_factory.mktemp("pristine") / "journal.db"
    with Journal.open(path, create=True, clock=counter_clock()) as j:
        j.append("run.started", {"config": {"n": 1}}, run="r1")
        j.append_many([{"kind": "agent.tool", "data": {"i": i, "s": "x" * i}, "run": "r1",
                        "task": "t"} for i in range(4)])
        j.append_many([{"kind": "task.result", "data": {"i": i, "ok": True}, "run": "r1"}
                       for i in range(8)])
    assert not path.with_name("journal.db-wal").exists()
    return Pristine(path.read_bytes())


def _mutate(blob: bytes, op: str, pos: int, value: int) -> bytes:
    pos %= len(blob)
    if op == "xor":
        out = bytearray(blob)
        out[pos] ^= value or 1
        return bytes(out)
    if op == "delete":
        return blob[:pos] + blob[pos + 1:]
    return blob[:pos] + bytes([value]) + blob[pos:]  # insert


TARGETS = {
    "entry-body": ("entries", "body", "seq", {"leaf-hash"}),
    "entry-leaf": ("entries", "leaf", "seq", {"leaf-hash"}),
    "node-hash": ("nodes", "hash", "((level << 32) | idx)", {"node-hash"}),
    "head-root": ("heads", "root", "size", {"head-root"}),
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(sorted(TARGETS)), row=st.integers(min_value=0, max_value=100),
       op=st.sampled_from(["xor", "delete", "insert"]), pos=st.integers(min_value=0, max_value=10_000),
       value=st.integers(min_value=0, max_value=255))
def test_any_single_byte_change_is_detected(pristine: bytes, target: str, row: int, op: str,
                                            pos: int, value: int) -> None:
    """Flipping, deleting or inserting one byte of any stored entry, leaf, node or head fails verify."""
    table, column, key, checks = TARGETS[target]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "journal.db"
        db.write_bytes(pristine)
        with raw_db(db) as c:
            drop_triggers(c)
            keys = [k for (k,) in c.execute(f"SELECT {key} FROM {table} ORDER BY {key}")]
            chosen = keys[row % len(keys)]
            (blob,) = c.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (chosen,)).fetchone()
            mutated = _mutate(bytes(blob), op, pos, value)
            assert mutated != bytes(blob)
            c.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (mutated, chosen))
        with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
            j.verify()
    assert info.value.check in checks, str(info.value)
    if target.startswith("entry"):
        assert info.value.seq == chosen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pos=st.integers(min_value=0, max_value=10_000), xor=st.integers(min_value=1, max_value=255),
       row=st.integers(min_value=0, max_value=100))
def test_single_byte_change_with_recomputed_leaf_is_detected(pristine: bytes, pos: int, xor: int,
                                                             row: int) -> None:
    """Even when the forger also recomputes the leaf hash, one changed body byte fails verify."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "journal.db"
        db.write_bytes(pristine)
        seq = row % PRISTINE_SIZE
        with raw_db(db) as c:
            drop_triggers(c)
            (body,) = c.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
            out = bytearray(body)
            out[pos % len(out)] ^= xor
            c.execute("UPDATE entries SET body = ?, leaf = ? WHERE seq = ?",
                      (bytes(out), merkle.leaf_hash(bytes(out)), seq))
        with Journal.open(db, readonly=True) as j, pytest.raises(VerificationError) as info:
            j.verify()
    # the last leaf of a 13-leaf tree is in no complete subtree: only the head's root covers it
    assert info.value.check in {"entry-envelope", "node-hash", "head-root"}, str(info.value)


# --------------------------------------------------------------------------- proofs

PROOF_LOG = 300


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Journal, list[bytes]]:
    """A 300-entry journal grown in batches of 37 (and its leaf hashes)."""
    path = tmp_path_factory.mktemp("big") / "journal.db"
    j = Journal.open(path, create=True, clock=counter_clock())
    n = 0
    while n < PROOF_LOG:
        k = min(37, PROOF_LOG - n)
        j.append_many([{"kind": "k", "data": {"i": n + i}} for i in range(k)])
        n += k
    return j, [e.leaf_hash for e in j.entries()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_consistency_proofs_between_random_sizes_verify(big: tuple[Journal, list[bytes]],
                                                        data: st.DataObject) -> None:
    """For any 1 <= old <= new <= 300 the proof verifies and its roots are the reference roots."""
    j, leaves = big
    new = data.draw(st.integers(min_value=1, max_value=PROOF_LOG), label="new")
    old = data.draw(st.integers(min_value=1, max_value=new), label="old")
    p = j.consistency_proof(old, new)
    assert p.old_root == merkle.root_from_leaves(leaves[:old])
    assert p.new_root == merkle.root_from_leaves(leaves[:new])
    merkle.verify_consistency(old, new, p.old_root, p.new_root, list(p.hashes))
    if p.hashes:
        i = data.draw(st.integers(min_value=0, max_value=len(p.hashes) - 1), label="hash")
        bad = list(p.hashes)
        bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
        with pytest.raises(VerificationError):
            merkle.verify_consistency(old, new, p.old_root, p.new_root, bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_inclusion_proofs_at_random_sizes_verify(big: tuple[Journal, list[bytes]],
                                                 data: st.DataObject) -> None:
    """For any seq < size <= 300 the inclusion proof verifies against the reference root."""
    j, leaves = big
    size = data.draw(st.integers(min_value=1, max_value=PROOF_LOG), label="size")
    seq = data.draw(st.integers(min_value=0, max_value=size - 1), label="seq")
    p = j.inclusion_proof(seq, size)
    assert p.root == merkle.root_from_leaves(leaves[:size])
    merkle.verify_inclusion(seq, size, leaves[seq], list(p.hashes), p.root)
    other = data.draw(st.integers(min_value=0, max_value=size - 1), label="other")
    if leaves[other] != leaves[seq]:
        with pytest.raises(VerificationError):
            merkle.verify_inclusion(seq, size, leaves[other], list(p.hashes), p.root)
