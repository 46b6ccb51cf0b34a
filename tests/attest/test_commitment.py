"""The ground-truth commitment (attest.commitment)."""

from __future__ import annotations

import pytest

from attest import digests as dg
from attest.commitment import Commitment, build_commitment
from ledger.errors import MalformedInput, UsageError, VerificationError
from ledger.journal.codec import canonical_bytes, encode_entry
from tests.attest.conftest import DISTINCTIVE, MATERIAL, PUBLIC, TASK_ROOT


def _plaintext_fragments() -> list[bytes]:
    out = [line.encode() for line in DISTINCTIVE]
    out += [b"test_parse_pairs_keeps_escaped_separator_inside_value", b"dangling key", b"zeta",
            b"escape handling walks characters", b"test_pairs_hidden"]
    return out


def test_commitment_is_deterministic(ckey: bytes) -> None:
    """Same material and key give the same digest and bytes (replay and verify depend on it)."""
    a = build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=TASK_ROOT)
    b = build_commitment(list(reversed(MATERIAL)), key=ckey, public=PUBLIC, root=TASK_ROOT)
    assert a.digest == b.digest
    assert canonical_bytes(a.as_data()) == canonical_bytes(b.as_data())


def test_commitment_data_holds_no_plaintext(commitment: Commitment) -> None:
    """The stored commitment (and a journal entry holding it) contains no ground-truth text."""
    entry = encode_entry(seq=0, ts=0, kind="commitment",
                         data={"attempt": "a", "commitment": commitment.as_data()})
    raw = entry.raw
    for fragment in _plaintext_fragments():
        assert fragment not in raw
        assert fragment.lower() not in raw.lower()
    assert TASK_ROOT.encode() not in raw


def test_coverage_counts_are_sealed(commitment: Commitment) -> None:
    """Coverage names sources by kind and the digest counts equal the committed sets."""
    cov = commitment.coverage
    assert cov["sources"] == 3
    assert cov["kinds"] == {"tests": 1, "solution": 1, "hidden": 1, "extra": 0}
    assert cov["windows"] == len(commitment.windows) > 50
    assert cov["files"] == len(commitment.files) == 3
    assert cov["paths"] == len(commitment.paths) > 0
    assert cov["public_windows"] > 0


def test_public_windows_are_not_committed(ckey: bytes) -> None:
    """A window that also appears in the starting repo is not committed; a secret one is."""
    com = build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=TASK_ROOT)
    public_window = dg.tokens('def format_pairs(pairs): """The inverse of parse_pairs for simple')[:8]
    secret_window = dg.tokens("for piece in filter(None, chunks): key, sep, val")[:8]
    assert len(public_window) == len(secret_window) == 8
    assert dg.window_digest(ckey, public_window) not in com.windows
    assert dg.window_digest(ckey, secret_window) in com.windows
    bare = build_commitment(MATERIAL, key=ckey)
    assert dg.window_digest(ckey, public_window) in bare.windows


def test_paths_commit_absolute_dir_relative_and_hidden_test_name(commitment: Commitment,
                                                                 ckey: bytes) -> None:
    """Paths of ground-truth files are committed in every form a read can reach them by."""
    want = [("abs", f"{TASK_ROOT}/tests/test_pairs_hidden.py"), ("dir", f"{TASK_ROOT}/solution"),
            ("rel", "tests/test_pairs_hidden.py"), ("rel", "t-pairs/solution/textkit/pairs.py"),
            ("name", "test_pairs_hidden.py"), ("abs", f"{TASK_ROOT}/task.md")]
    for form, path in want:
        assert dg.path_digest(ckey, form, path) in commitment.paths, (form, path)


def test_public_paths_are_not_committed(commitment: Commitment, ckey: bytes) -> None:
    """textkit/pairs.py exists in the repo, so that suffix of the solution path is not secret."""
    assert dg.path_digest(ckey, "rel", "textkit/pairs.py") not in commitment.paths
    assert dg.path_digest(ckey, "name", "pairs.py") not in commitment.paths


def test_round_trip_through_stored_data(commitment: Commitment) -> None:
    """from_data(as_data()) gives an equal commitment (without the in-memory prefilters)."""
    back = Commitment.from_data(commitment.as_data())
    assert back == commitment
    assert back.window_prefilter is None


@pytest.mark.parametrize("field", ["windows", "files", "paths", "context"])
def test_dropping_a_digest_is_detected(commitment: Commitment, field: str) -> None:
    """Removing a committed digest breaks the sealed count or the commitment digest."""
    data = commitment.as_data()
    data[field] = data[field][16:]
    with pytest.raises(VerificationError) as err:
        Commitment.from_data(data)
    assert err.value.check == "commitment-coverage"
    data["coverage"] = dict(data["coverage"], **{field: data["coverage"][field] - 1})
    with pytest.raises(VerificationError) as err:
        Commitment.from_data(data)
    assert err.value.check == "commitment-digest"


def test_changing_coverage_breaks_the_digest(commitment: Commitment) -> None:
    """The coverage counts are inside the digest: editing one is detected."""
    data = commitment.as_data()
    data["coverage"] = dict(data["coverage"], sources=2)
    with pytest.raises(VerificationError) as err:
        Commitment.from_data(data)
    assert err.value.check == "commitment-digest"


def test_malformed_data_is_refused(commitment: Commitment) -> None:
    """Unsorted digests or odd lengths are malformed input, not a verification result."""
    data = commitment.as_data()
    blob = data["windows"]
    data["windows"] = blob[16:32] + blob[:16] + blob[32:]
    with pytest.raises(MalformedInput):
        Commitment.from_data(data)
    with pytest.raises(MalformedInput):
        Commitment.from_data(dict(commitment.as_data(), windows=blob[:-1]))
    with pytest.raises(MalformedInput):
        Commitment.from_data({"v": 1})


def test_empty_material_is_an_error(ckey: bytes) -> None:
    """A commitment to nothing would make every scan CLEAN: refused."""
    with pytest.raises(UsageError):
        build_commitment([], key=ckey)


def test_material_that_is_all_public_is_an_error(ckey: bytes) -> None:
    """If every window and file is public there is nothing secret to detect: refused."""
    with pytest.raises(UsageError):
        build_commitment([("solution/textkit/pairs.py", PUBLIC[1][1])], key=ckey, public=PUBLIC)


def test_bad_labels_are_refused(ckey: bytes) -> None:
    """Labels must say what a source is; duplicates would hide a removed source."""
    with pytest.raises(UsageError):
        build_commitment([("notes.txt", b"x y z w v u t s r")], key=ckey)
    with pytest.raises(UsageError):
        build_commitment([MATERIAL[0], MATERIAL[0]], key=ckey)


def test_operator_material_adds_coverage(ckey: bytes) -> None:
    """Extra material only adds: more sources and windows, never fewer."""
    base = build_commitment(MATERIAL, key=ckey, public=PUBLIC)
    more = build_commitment([*MATERIAL, ("extra/reviewer-notes",
                                         b"the quadratic retry loop in scheduler backoff must stay")],
                            key=ckey, public=PUBLIC)
    assert more.coverage["sources"] == base.coverage["sources"] + 1
    assert more.windows > base.windows
    assert more.coverage["kinds"]["extra"] == 1


def test_key_id_names_the_key_without_revealing_it(commitment: Commitment, ckey: bytes) -> None:
    """The commitment names its key by an HMAC-derived id, not the key bytes."""
    assert commitment.key_id == dg.key_id(ckey)
    assert ckey.hex() not in str(commitment.as_data())


def test_window_size_is_recorded_and_bounded(ckey: bytes) -> None:
    """The window is part of the commitment; absurd windows are refused."""
    assert build_commitment(MATERIAL, key=ckey, window=12).as_data()["window"] == 12
    with pytest.raises(UsageError):
        build_commitment(MATERIAL, key=ckey, window=2)
