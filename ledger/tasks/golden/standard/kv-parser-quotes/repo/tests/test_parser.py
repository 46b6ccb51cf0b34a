import pytest

from kvparse import parse


def test_simple_pairs():
    assert parse("a=1; b = two ;c=") == {"a": "1", "b": "two", "c": ""}


def test_empty_segments_ignored():
    assert parse(";; a=1 ;;") == {"a": "1"}
    assert parse("") == {}


def test_missing_equals():
    with pytest.raises(ValueError):
        parse("a=1; oops")
