import pytest

from kvparse import parse


def test_quoted_semicolons_and_equals():
    assert parse('q="a;b=c"; n=2') == {"q": "a;b=c", "n": "2"}


def test_quoted_whitespace_kept():
    assert parse('pad = "  x  " ') == {"pad": "  x  "}


def test_escapes():
    assert parse(r'say="he said \"hi\""; path="C:\\tmp"') == {"say": 'he said "hi"', "path": "C:\\tmp"}


def test_empty_quoted_value():
    assert parse('e=""') == {"e": ""}


@pytest.mark.parametrize("bad", ['a="open', 'a="x"y', 'a="x" z; b=1'])
def test_malformed_quotes(bad):
    with pytest.raises(ValueError):
        parse(bad)


def test_duplicate_key_named():
    with pytest.raises(ValueError, match="dup"):
        parse("dup=1; other=2; dup=3")


def test_empty_key():
    with pytest.raises(ValueError):
        parse(" =1")
