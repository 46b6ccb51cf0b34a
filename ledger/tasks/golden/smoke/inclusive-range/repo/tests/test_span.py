import pytest

from rangeutil import inclusive_range


def test_zero_step_rejected():
    with pytest.raises(ValueError):
        inclusive_range(1, 5, 0)


def test_wrong_direction_is_empty():
    assert inclusive_range(5, 1) == []
