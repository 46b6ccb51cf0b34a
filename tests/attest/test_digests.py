"""Normalization, triviality and keyed digests (attest.digests)."""

from __future__ import annotations

import pytest

from attest import digests as dg
from ledger.errors import KeyMaterialError

KEY = b"k" * 32


def test_tokens_ignore_case_whitespace_and_punctuation() -> None:
    """Re-indenting, re-quoting and re-casing a line does not change its tokens."""
    a = dg.tokens('assert parse("a,b") == ["a", "b"]')
    b = dg.tokens("ASSERT   parse( 'a,b' )==[ 'a','b' ]")
    assert a == b == ["assert", "parse", "a", "b", "a", "b"]


def test_line_number_prefixes_are_dropped() -> None:
    """cat -n, a viewer's arrow numbering and grep -n show a file with the same tokens."""
    plain = dg.tokens("import pytest\nfrom mathx import clamp\n")
    assert dg.tokens("     1\timport pytest\n     2\tfrom mathx import clamp\n") == plain
    assert dg.tokens("     1\u2192import pytest\n     2\u2192from mathx import clamp\n") == plain
    assert dg.tokens("t/x.py:1:import pytest\nt/x.py:2:from mathx import clamp\n") == plain


def test_token_spans_point_into_the_original_text() -> None:
    """Spans locate each token in the text as given (needed to cut redactions)."""
    text = "  7\tAlpha beta\nGamma"
    toks, spans = dg.token_spans(text)
    assert toks == ["alpha", "beta", "gamma"]
    assert [text[a:b] for a, b in spans] == ["Alpha", "beta", "Gamma"]


@pytest.mark.parametrize(
    ("window", "trivial"),
    [
        ("import pytest from x import y def test_", True),
        ("5 0 3 3 2 0 3 0", True),
        ("assert self is not none and return true", True),
        ("assert clamp 10 4 4 4 def test_low_above", False),
        ("mathx import clamp pytest mark parametrize value low", False),
    ],
)
def test_trivial_windows(window: str, trivial: bool) -> None:
    """A window needs two distinct content tokens (not boilerplate, not numbers, not 1 letter)."""
    assert dg.is_trivial(window.split()) is trivial


def test_digests_are_domain_separated_and_keyed() -> None:
    """The same text under another label or another key gives another digest."""
    w = ["alpha", "beta"]
    assert dg.window_digest(KEY, w) != dg.file_digest(KEY, w)
    assert dg.window_digest(KEY, w) != dg.window_digest(b"j" * 32, w)
    assert dg.path_digest(KEY, "abs", "/a/b") != dg.path_digest(KEY, "rel", "/a/b")
    assert len(dg.window_digest(KEY, w)) == dg.DIGEST_SIZE


def test_length_prefixes_keep_token_boundaries() -> None:
    """["ab", "c"] and ["a", "bc"] are different windows."""
    assert dg.window_digest(KEY, ["ab", "c"]) != dg.window_digest(KEY, ["a", "bc"])


def test_short_keys_are_refused() -> None:
    """An HMAC key under 16 bytes is a configuration error, not a weak commitment."""
    with pytest.raises(KeyMaterialError):
        dg.check_key(b"short")


def test_path_queries_cover_abs_ancestors_suffixes_and_name() -> None:
    """An absolute read is looked up as itself, by ancestors, suffixes and basename."""
    q = dg.path_queries("/srv/golden/t/tests/test_x.py", ancestors=True)
    assert ("abs", "/srv/golden/t/tests/test_x.py") in q
    assert ("dir", "/srv/golden/t/tests") in q
    assert ("rel", "tests/test_x.py") in q
    assert ("rel", "t/tests/test_x.py") in q
    assert ("name", "test_x.py") in q
    assert ("dir", "/srv/golden/t/tests/test_x.py") in q
    assert ("abs", "/srv/golden/t/tests") not in q


def test_path_references_find_paths_in_command_lines() -> None:
    """Paths inside shell and python one-liners are extracted."""
    cmd = "python -c \"print(open('/srv/t/solution/m.py').read())\"; cat ../x/y.txt"
    assert dg.path_references(cmd) == ["/srv/t/solution/m.py", "../x/y.txt"]


def test_marker_carries_the_digest_prefix() -> None:
    """A marker is [redacted:<first 8 bytes hex>] and the marker pattern reads it back."""
    d = dg.window_digest(KEY, ["a", "b"])
    m = dg.marker(d)
    assert dg.MARKER_RE.fullmatch(m) is not None
    assert dg.MARKER_RE.findall(m) == [d[:8].hex()]
