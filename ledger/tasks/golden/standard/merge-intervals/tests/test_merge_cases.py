from spans import merge_intervals


def test_touching_merge():
    assert merge_intervals([(1, 3), (3, 5)]) == [(1, 5)]


def test_unsorted():
    assert merge_intervals([(8, 9), (1, 2), (2, 4), (0, 1)]) == [(0, 4), (8, 9)]


def test_nested():
    assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]


def test_input_not_modified():
    data = [(5, 6), (1, 2)]
    merge_intervals(data)
    assert data == [(5, 6), (1, 2)]


def test_points():
    assert merge_intervals([(2, 2), (2, 2), (4, 4)]) == [(2, 2), (4, 4)]
