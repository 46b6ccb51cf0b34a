import pytest

from wraptext import wrap


def test_greedy():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_exact_fit():
    assert wrap("ab cd", 5) == ["ab cd"]


def test_bad_width():
    with pytest.raises(ValueError):
        wrap("x", 0)
