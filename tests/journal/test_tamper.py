"""Every attack in the tamper corpus is caught by verify with the check it names (or is a known limit)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.errors import (
    JournalFormatError,
    KeyMaterialError,
    LedgerError,
    MalformedInput,
    VerificationError,
)
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from tests.journal.tamper_cases import (
    CASES,
    PROOF_CASES,
    SIZE,
    SPANS,
    TILE_HEIGHT,
    TILES_PER_LEVEL,
    WIDE_CASES,
    WIDE_SIZE,
    Baseline,
    ProofCase,
    TamperCase,
    TileCase,
    build_baseline,
    build_wide,
    counter_clock,
    raw_db,
    rebuild_spans,
    rebuild_tree,
    tile_height,
)


@pytest.fixture
def baseline(home: Path, keyring: KeyRing, other_keyring: KeyRing) -> Baseline:
    """The untampered 12-entry journal with checkpoints at 8 and 12 (closed, on disk)."""
    return build_baseline(home, keyring, other_keyring, counter_clock())


def run_verify(b: Baseline, *, since: bool) -> dict[str, object]:
    with Journal.open(b.db, harness=True) as j:
        return j.verify(since=b.note12 if since else None, verifier=b.keys.verifier)


def test_baseline_verifies(baseline: Baseline) -> None:
    """Untouched, the baseline passes every check, with and without the auditor's checkpoint."""
    summary = run_verify(baseline, since=False)
    assert summary["size"] == SIZE
    assert summary["checkpoints"] == 2 and summary["external_checkpoints"] == 2
    assert run_verify(baseline, since=True)["since"] == {"size": SIZE, "root": summary["root"]}


def test_baseline_layout(baseline: Baseline) -> None:
    """The baseline has tiles at every level and the spans the corpus's coordinates assume."""
    with raw_db(baseline.db) as c:
        assert tile_height(c) == TILE_HEIGHT
        per_level = c.execute("SELECT level, count(*), min(idx), max(idx), min(length(hashes)), "
                              "max(length(hashes)) FROM tiles GROUP BY level ORDER BY level").fetchall()
        spans = c.execute("SELECT first, last FROM spans ORDER BY first").fetchall()
        heads = c.execute("SELECT first, last + 1, typeof(root), typeof(ts) FROM spans "
                          "WHERE root IS NOT NULL ORDER BY first").fetchall()
        runs = c.execute("SELECT run, first FROM runs").fetchall()
    width = 32 << TILE_HEIGHT
    assert per_level == [(k, n, 0, n - 1, width, width) for k, n in enumerate(TILES_PER_LEVEL)]
    assert spans == [tuple(s) for s in SPANS]
    # one tree head per append, on the span that ends it; one runs row
    assert heads == [(0, 1, "blob", "integer"), (3, 4, "blob", "integer"), (7, 8, "blob", "integer"),
                     (11, 12, "blob", "integer")]
    assert runs == [("run-a", 0)]
    summary = run_verify(baseline, since=False)
    assert summary["tiles"] == sum(TILES_PER_LEVEL) and summary["spans"] == len(SPANS)


def test_corpus_names_are_unique() -> None:
    """Each attack has its own name, so a failure points at one defect."""
    names = [c.name for c in CASES] + [c.name for c in PROOF_CASES]
    assert len(names) == len(set(names))


def _param(case: TamperCase) -> object:
    """The case as a pytest param; a case marked ``bug`` must fail with the sqlite3 error it names."""
    marks = [pytest.mark.xfail(reason=case.bug, strict=True, raises=sqlite3.OperationalError)] if case.bug else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_tamper_case(case: TamperCase, baseline: Baseline) -> None:
    """After the attack, verify raises the case's check at its seq (or passes, for a known limit)."""
    case.mutate(baseline)
    if case.check is None:
        summary = run_verify(baseline, since=case.since)
        assert summary["size"] == case.size_after
        return
    with pytest.raises(VerificationError) as info:
        run_verify(baseline, since=case.since)
    err = info.value
    assert err.check == case.check, str(err)
    if case.seq is not None:
        assert err.seq == case.seq, str(err)
    assert err.as_dict()["check"] == case.check
    assert err.exit_code == 1


@pytest.mark.parametrize("case", [c for c in CASES if c.check is None], ids=lambda c: c.name)
def test_undetectable_cases_are_caught_by_the_auditor_checkpoint(case: TamperCase,
                                                                 baseline: Baseline) -> None:
    """The attacks verify cannot see on its own are exposed by the auditor's external checkpoint."""
    case.mutate(baseline)
    with pytest.raises(VerificationError) as info:
        run_verify(baseline, since=True)
    assert info.value.check == "consistency"


def test_verify_without_verifier_refuses_checkpoints(baseline: Baseline) -> None:
    """Checkpoints cannot be skipped silently: without a verifier key verify refuses to run."""
    with Journal.open(baseline.db, harness=True) as j, pytest.raises(KeyMaterialError, match="keys init"):
        j.verify()


def test_since_with_malformed_note_is_unusable_input(baseline: Baseline) -> None:
    """A --since checkpoint that does not parse is bad input (exit 2), not a failed check."""
    with Journal.open(baseline.db, harness=True) as j, pytest.raises(MalformedInput):
        j.verify(since="garbage", verifier=baseline.keys.verifier)


def test_since_signed_by_another_key(baseline: Baseline) -> None:
    """A --since checkpoint from another key fails checkpoint-signature."""
    from ledger.journal.note import Checkpoint, sign_checkpoint

    with Journal.open(baseline.db, harness=True) as j:
        size, root = j.head()
        note = sign_checkpoint(Checkpoint(baseline.keys.key_name, size, root),
                               baseline.other_keys.signer)
        with pytest.raises(VerificationError) as info:
            j.verify(since=note, verifier=baseline.keys.verifier)
    assert info.value.check == "checkpoint-signature"


def test_verify_writes_nothing(baseline: Baseline) -> None:
    """verify leaves the ledger directory as it found it (no keys, notes or rows created)."""
    before = {p: p.stat().st_mtime_ns for p in baseline.home.rglob("*") if p.is_file()
              and not p.name.endswith(("-wal", "-shm"))}
    with Journal.open(baseline.db, readonly=True) as j:
        j.verify(since=baseline.note12, verifier=baseline.keys.verifier)
    after = {p: p.stat().st_mtime_ns for p in baseline.home.rglob("*") if p.is_file()
             and not p.name.endswith(("-wal", "-shm"))}
    assert after == before


@pytest.mark.parametrize("case", PROOF_CASES, ids=[c.name for c in PROOF_CASES])
def test_proof_case(case: ProofCase, baseline: Baseline) -> None:
    """A truncated, padded or otherwise corrupted proof is rejected by the RFC 6962 verifier."""
    with Journal.open(baseline.db, harness=True) as j, pytest.raises(VerificationError) as info:
        case.attack(j)
    assert info.value.check == case.check, str(info.value)


def test_untouched_proofs_verify(baseline: Baseline) -> None:
    """The proofs the proof cases corrupt do verify when left alone (so each case tests its edit)."""
    from ledger.journal import merkle

    with Journal.open(baseline.db, harness=True) as j:
        for old in (4, 5):
            p = j.consistency_proof(old, SIZE)
            merkle.verify_consistency(p.old_size, p.new_size, p.old_root, p.new_root, list(p.hashes))
        q = j.inclusion_proof(5, SIZE)
        merkle.verify_inclusion(q.leaf_index, q.tree_size, q.leaf_hash, list(q.hashes), q.root)


def test_corpus_covers_the_required_attacks() -> None:
    """The attacks the journal issue requires are all in the corpus, by name."""
    required = {
        "flipped-bit-entry", "flipped-bit-leaf-hash", "flipped-bit-node", "swapped-entries",
        "deleted-tail-no-external-checkpoint", "deleted-tail-auditor-checkpoint",
        "deleted-middle-entry", "reinserted-entry-after-dropping-triggers",
        "forged-checkpoint-signature", "checkpoint-from-another-key", "checkpoint-root-mismatch",
        "stale-checkpoint-as-current", "inclusion-truncated", "inclusion-padded",
        "consistency-truncated", "consistency-padded",
    }
    assert required <= {c.name for c in CASES} | {c.name for c in PROOF_CASES}


def _case(name: str) -> TamperCase:
    return next(c for c in CASES if c.name == name)


def _stored_index(b: Baseline) -> tuple[object, ...]:
    """Every span row (with the heads they carry) and every runs row, as stored."""
    with raw_db(b.db) as c:
        return (c.execute("SELECT first, last, run, task, kind, root, ts FROM spans ORDER BY first").fetchall(),
                c.execute("SELECT run, first FROM runs ORDER BY run").fetchall())


def test_forger_helpers_rebuild_the_untouched_baseline_exactly(baseline: Baseline) -> None:
    """rebuild_spans and rebuild_tree(heads=True) reproduce the writer's rows, heads and runs byte for byte."""
    before = _stored_index(baseline)
    with raw_db(baseline.db) as c:
        rebuild_spans(c)
        rebuild_tree(c)
    assert _stored_index(baseline) == before
    assert run_verify(baseline, since=True)["size"] == SIZE


@pytest.mark.parametrize("name, seen", [
    ("runs-row-deleted", []),
    ("runs-first-moved-later", list(range(4, SIZE))),
], ids=["deleted", "moved-later"])
def test_runs_index_attacks_hide_entries_from_queries_by_run(baseline: Baseline, name: str,
                                                             seen: list[int]) -> None:
    """A deleted or moved runs row makes entries(run=...) miss real entries, which is why verify must catch it."""
    with Journal.open(baseline.db, harness=True) as j:
        assert [e.seq for e in j.entries(run="run-a")] == list(range(SIZE))
    case = _case(name)
    case.mutate(baseline)
    with Journal.open(baseline.db, harness=True) as j:
        assert [e.seq for e in j.entries(run="run-a")] == seen
        assert [e.seq for e in j.entries() if e.run == "run-a"] == list(range(SIZE))  # the entries are there
    with pytest.raises(VerificationError) as info:
        run_verify(baseline, since=True)
    assert (info.value.check, info.value.seq) == (case.check, case.seq) == ("entry-index", 0)


def test_runs_first_written_as_numeric_text_is_stored_as_an_integer(baseline: Baseline) -> None:
    """'0' written into runs.first is converted by the column's INTEGER affinity: nothing changed, verify passes."""
    with raw_db(baseline.db) as c:
        c.execute("DROP TRIGGER runs_no_update")
        c.execute("UPDATE runs SET first = '0' WHERE run = 'run-a'")
        assert c.execute("SELECT typeof(first) FROM runs").fetchall() == [("integer",)]
    assert run_verify(baseline, since=True)["size"] == SIZE


def test_query_by_run_with_a_text_first_is_a_journal_error(baseline: Baseline) -> None:
    """entries(run=...) over a runs row whose first is TEXT raises a LedgerError, not a TypeError."""
    _case("runs-first-as-text").mutate(baseline)
    with Journal.open(baseline.db, harness=True) as j, pytest.raises(LedgerError):
        list(j.entries(run="run-a"))


@pytest.fixture
def wide(home: Path) -> Path:
    """A 300-entry journal with the default tile height (level-1 tiles exist), closed."""
    return build_wide(home, counter_clock())


def test_wide_baseline_verifies(wide: Path) -> None:
    """Untouched, the default-height journal verifies and stores 18 level-0 tiles and 1 level-1 tile."""
    with raw_db(wide) as c:
        per_level = c.execute("SELECT level, count(*) FROM tiles GROUP BY level ORDER BY level").fetchall()
    assert per_level == [(0, 18), (1, 1)]
    with Journal.open(wide, harness=True) as j:
        assert j.store.tile_height == 4
        assert j.verify()["size"] == WIDE_SIZE


@pytest.mark.parametrize("case", WIDE_CASES, ids=[c.name for c in WIDE_CASES])
def test_tile_case_at_default_height(case: TileCase, wide: Path) -> None:
    """The tile attacks are caught with the same checks when tiles hold 16 hashes."""
    case.mutate(wide)
    with Journal.open(wide, harness=True) as j, pytest.raises(VerificationError) as info:
        j.verify()
    assert (info.value.check, info.value.seq) == (case.check, case.seq), str(info.value)


def test_retiling_consistently_is_not_tampering(baseline: Baseline) -> None:
    """Rewriting meta tile_height and every tile to match changes storage only: verify passes, same root."""
    before = run_verify(baseline, since=True)["root"]
    with raw_db(baseline.db) as c:
        c.execute("UPDATE meta SET value = '2' WHERE key = 'tile_height'")
        rebuild_tree(c, heads=False)
    summary = run_verify(baseline, since=True)
    assert summary["root"] == before and summary["tiles"] == 3  # 12 leaves: 3 tiles of 4, none above


@pytest.mark.parametrize("value", ["0", "9", "two", ""])
def test_invalid_tile_height_in_meta_refuses_to_open(baseline: Baseline, value: str) -> None:
    """A meta tile_height this build cannot use makes the file unreadable as a journal (exit 2), not a pass."""
    with raw_db(baseline.db) as c:
        c.execute("UPDATE meta SET value = ? WHERE key = 'tile_height'", (value,))
    with pytest.raises(JournalFormatError, match="tile_height"):
        Journal.open(baseline.db, harness=True)


def test_check_hands_over_exactly_the_verified_bytes_leaves_and_checkpoints(baseline: Baseline) -> None:
    """``Journal.check(retain=True)`` returns every stored body, its leaf hash and every database
    checkpoint, as verified."""
    from ledger.journal.merkle import leaf_hash
    from ledger.journal.note import open_checkpoint

    with Journal.open(baseline.db, harness=True) as j:
        got = j.check(verifier=baseline.keys.verifier, retain=True)
        stored = [e.raw for e in j.entries()]
        notes = [note for _size, note in j.store.checkpoints()]
        plain = j.check(verifier=baseline.keys.verifier)
    assert got.bodies == stored and len(stored) == SIZE
    assert got.leaves == b"".join(leaf_hash(b) for b in stored)
    assert dict(got.checkpoints) == {n: open_checkpoint(n, baseline.keys.verifier) for n in notes}
    assert plain.bodies is None and plain.summary == got.summary  # retained only when asked


@pytest.mark.parametrize("case", [c for c in CASES if c.check is not None and not c.bug], ids=lambda c: c.name)
def test_check_hands_nothing_over_when_verify_fails(case: TamperCase, baseline: Baseline) -> None:
    """A journal that fails verify hands nothing over: the check raises, naming the failed
    check, so no unverified bytes reach the audit."""
    case.mutate(baseline)
    got: list[object] = []
    with pytest.raises(VerificationError) as exc, Journal.open(baseline.db, harness=True) as j:
        got.append(j.check(since=baseline.note12 if case.since else None,
                           verifier=baseline.keys.verifier, retain=True))
    assert got == [] and exc.value.check == case.check
