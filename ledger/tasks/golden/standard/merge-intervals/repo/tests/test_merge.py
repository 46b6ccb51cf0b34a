import pytest

from spans import merge_intervals


def test_overlapping():
    assert merge_intervals([(1, 4), (2, 6), (8, 9)]) == [(1, 6), (8, 9)]


def test_empty():
    assert merge_intervals([]) == []


def test_bad_interval():
    with pytest.raises(ValueError):
        merge_intervals([(5, 1)])
