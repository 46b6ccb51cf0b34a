from rangeutil import inclusive_range


def test_includes_stop():
    assert inclusive_range(1, 5) == [1, 2, 3, 4, 5]


def test_single_value():
    assert inclusive_range(4, 4) == [4]


def test_step_landing_on_stop():
    assert inclusive_range(0, 9, 3) == [0, 3, 6, 9]


def test_step_not_landing_on_stop():
    assert inclusive_range(1, 4, 2) == [1, 3]


def test_negative_step():
    assert inclusive_range(5, 1, -2) == [5, 3, 1]
    assert inclusive_range(3, 0, -1) == [3, 2, 1, 0]
