"""Redaction at capture (attest.redact)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import digests as dg
from attest.attestation import COMMITMENT_KEY_LABEL
from attest.commitment import Commitment, build_commitment
from attest.redact import MarkerScanner, Redactor
from ledger.errors import KeyMaterialError
from tests.attest.conftest import (
    DISTINCTIVE,
    HIDDEN_TEST,
    MATERIAL,
    PROMPT,
    PUBLIC,
    PUBLIC_TEST,
    REPO_PAIRS,
    SOLUTION_PAIRS,
    TASK_ROOT,
    FakeKeys,
)


def _surviving_windows(redactor: Redactor, text: str) -> list[list[str]]:
    """Committed windows still readable as plaintext in ``text`` (markers stripped first)."""
    plain = dg.MARKER_RE.sub(" \x00 ", text)
    n = redactor.commitment.window
    out = []
    for chunk in plain.split("\x00"):
        toks = dg.tokens(chunk)
        for i in range(len(toks) - n + 1):
            if dg.window_digest(redactor._key, toks[i : i + n]) in redactor.commitment.windows:
                out.append(toks[i : i + n])
    return out


@pytest.mark.parametrize("shown", [
    HIDDEN_TEST,
    SOLUTION_PAIRS,
    "\n".join(f"{i:6}\t{line}" for i, line in enumerate(HIDDEN_TEST.splitlines(), 1)),
    "\n".join(f"{i:6}\u2192{line}" for i, line in enumerate(SOLUTION_PAIRS.splitlines(), 1)),
    "\n".join(f"tests/test_pairs_hidden.py:{i}:{line}"
              for i, line in enumerate(HIDDEN_TEST.splitlines(), 1)),
    "$ cat hidden.py\n" + HIDDEN_TEST.upper() + "\n$ echo done\n",
    HIDDEN_TEST.replace("    ", "\t").replace('"', "'"),
])
def test_no_distinctive_line_survives(redactor: Redactor, shown: str) -> None:
    """Printed, numbered, grepped, re-cased or re-quoted ground truth leaves no plaintext."""
    out = redactor(shown)
    for line in DISTINCTIVE:
        assert line not in out
        assert line.lower() not in out.lower()
    assert "zeta" not in out.lower()
    assert _surviving_windows(redactor, out) == []
    assert "[redacted:" in out


def test_public_text_is_left_alone(redactor: Redactor) -> None:
    """The repo, the public tests, the prompt and test runner output pass unchanged."""
    for text in (REPO_PAIRS, PUBLIC_TEST, PROMPT,
                 "tests/test_pairs.py::test_parse_pairs_simple PASSED\n1 passed in 0.01s"):
        assert redactor(text) == text


def test_partial_copy_is_caught(redactor: Redactor) -> None:
    """One line of the hidden test inside unrelated text is redacted, the rest kept."""
    text = "I think the check is: assert parse_pairs(\"alpha=1;beta=x\\\\;y\") == {\"alpha\": \"1\", \"beta\": \"x;y\"} - right?"
    out = redactor(text)
    assert out.startswith("I think the check is: ")
    assert out.endswith(" - right?")
    assert "beta" not in out
    assert len(redactor.scan_text(text)) >= 1


def test_markers_carry_every_matched_digest(redactor: Redactor) -> None:
    """The scan finds in the redacted text exactly the digests it finds in the plaintext."""
    shown = "$ cat tests_hidden/test_pairs_hidden.py\n" + HIDDEN_TEST
    plain = redactor.digests(shown)
    red = redactor(shown)
    assert redactor.digests(red) == plain
    assert MarkerScanner(redactor.commitment).digests(red) == plain


def test_trivial_tail_goes_with_its_match_but_not_alone(ckey: bytes) -> None:
    """Context windows extend a real match over a trivial last line, and never redact alone."""
    hidden = ("def test_negative_step_counts_down():\n"
              "    assert inclusive_range(5, 1, -2) == [5, 3, 1]\n"
              "    assert inclusive_range(3, 0, -1) == [3, 2, 1, 0]\n")
    com = build_commitment([("tests/test_range_hidden.py", hidden.encode())], key=ckey)
    assert com.context
    red = Redactor(com, ckey)
    out = red("$ cat tests/x.py\n" + hidden + "$ exit\n")
    assert "[3, 2, 1, 0]" not in out and "[redacted]" in out
    assert out.startswith("$ cat tests/x.py\n") and out.endswith("$ exit\n")
    alone = "    assert inclusive_range(3, 0, -1) == [3, 2, 1, 0]\n"
    assert red(alone) == alone
    assert red.scan_text(alone) == []


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    """Redacting an already redacted text changes nothing."""
    once = redactor(SOLUTION_PAIRS)
    assert redactor(once) == once


def test_whole_source_keeps_no_plaintext(redactor: Redactor, ckey: bytes) -> None:
    """A text equal to a committed source becomes its file marker plus its window markers."""
    field_text = "Escape handling walks characters, and keeps a flag for the backslash!"
    out = redactor(field_text)
    assert out.startswith(dg.marker(dg.file_digest(ckey, dg.tokens(field_text))))
    assert dg.MARKER_RE.sub("", out) == ""
    whole = redactor(HIDDEN_TEST)
    assert dg.MARKER_RE.sub("", whole) == ""
    assert dg.file_digest(ckey, dg.tokens(HIDDEN_TEST)) in redactor.digests(whole)


def test_gaps_between_matches_are_redacted(redactor: Redactor) -> None:
    """Trivial text between two matched lines (a data list) does not survive."""
    text = ("assert parse_pairs(\"alpha=1;beta=x\\\\;y\") == {\"alpha\": \"1\", \"beta\": \"x;y\"}\n"
            "1 2 3 4 5 6 7 8 9 10 11 12\n"
            "with pytest.raises(ValueError, match=\"dangling key 'zeta' has no value\"):\n")
    out = redactor(text)
    assert "[redacted]" in out
    assert "7 8 9" not in out


def test_without_prefilter_the_result_is_identical(commitment: Commitment, ckey: bytes) -> None:
    """A commitment read back from the journal redacts byte-for-byte the same (slow path)."""
    fast = Redactor(commitment, ckey)
    slow = Redactor(Commitment.from_data(commitment.as_data()), ckey)
    for text in (HIDDEN_TEST, SOLUTION_PAIRS, REPO_PAIRS, "x " * 40):
        assert fast(text) == slow(text)
        assert fast.scan_text(text) == slow.scan_text(text)


def test_wrong_key_is_refused(commitment: Commitment) -> None:
    """A redactor under another key would silently match nothing: refused."""
    with pytest.raises(KeyMaterialError):
        Redactor(commitment, b"z" * 32)


def test_forged_markers_count_for_nothing(redactor: Redactor) -> None:
    """A marker whose digest is not committed is not a match."""
    assert redactor.digests("[redacted:0011223344556677]") == set()


def test_path_digests_reach_ground_truth_paths(redactor: Redactor) -> None:
    """A copy of the hidden test elsewhere is found by suffix and by name; the repo file is not."""
    assert redactor.path_digests(["/tmp/copy/tests/test_pairs_hidden.py"])
    assert redactor.path_digests(["/elsewhere/test_pairs_hidden.py"])
    assert redactor.path_digests(["/srv/golden/smoke/t-pairs/solution"])
    assert not redactor.path_digests(["/tmp/other/textkit/pairs.py"])


@functools.cache
def _shared_redactor() -> Redactor:
    key = FakeKeys(bytes(range(32))).subkey(COMMITMENT_KEY_LABEL)
    return Redactor(build_commitment(MATERIAL, key=key, public=PUBLIC, root=TASK_ROOT), key)


@settings(max_examples=60, deadline=None)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40),
       start=st.integers(0, 60), length=st.integers(8, 60))
def test_any_embedded_slice_leaves_no_committed_window(prefix: str, suffix: str, start: int,
                                                       length: int) -> None:
    """Property: after redaction no committed window of any embedded slice is readable."""
    redactor = _shared_redactor()
    toks = HIDDEN_TEST.split()
    snippet = " ".join(toks[start : start + length])
    out = redactor(prefix + " " + snippet + " " + suffix)
    assert _surviving_windows(redactor, out) == []


@functools.cache
def _slow_redactor() -> Redactor:
    fast = _shared_redactor()
    return Redactor(Commitment.from_data(fast.commitment.as_data()), fast._key)


@settings(max_examples=60, deadline=None)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40), source=st.sampled_from(
    [HIDDEN_TEST, SOLUTION_PAIRS, REPO_PAIRS, PROMPT]), start=st.integers(0, 80),
    length=st.integers(0, 40))
def test_prefilters_change_speed_not_results(prefix: str, suffix: str, source: str,
                                             start: int, length: int) -> None:
    """Property: with the hash prefilters (texts they pass cost no HMAC) redaction, digests and
    evidence (also from given tokens and their hash set) are those of the read-back commitment,
    which has none."""
    fast, slow = _shared_redactor(), _slow_redactor()
    toks = source.split()
    text = prefix + " " + " ".join(toks[start : start + length]) + " " + suffix
    assert fast(text) == slow(text)
    assert fast.digests(text) == slow.digests(text)
    toks = dg.tokens(text)
    assert fast.evidence(text) == slow.evidence(text) == slow.evidence("", toks)
    assert fast.evidence("", toks, frozenset(map(hash, toks))) == slow.evidence("", toks)


def test_pickled_commitment_drops_its_prefilters(commitment: Commitment, ckey: bytes) -> None:
    """The prefilters hold this process's salted hashes: a pickled copy (another process) has
    none and still finds every digest."""
    import pickle

    back = pickle.loads(pickle.dumps(commitment))
    assert back == commitment and back.window_prefilter is None and back.path_prefilter is None
    assert Redactor(back, ckey).scan_text(HIDDEN_TEST) == Redactor(commitment, ckey).scan_text(
        HIDDEN_TEST)
