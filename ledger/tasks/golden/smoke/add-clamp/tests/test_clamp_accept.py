import pytest

from mathx import clamp


@pytest.mark.parametrize(
    "value, low, high, expected",
    [(5, 0, 3, 3), (-2, 0, 3, 0), (2, 0, 3, 2), (0, 0, 3, 0), (3, 0, 3, 3), (1.5, 1.0, 2.0, 1.5), (9.5, 1.0, 2.0, 2.0)],
)
def test_clamp(value, low, high, expected):
    assert clamp(value, low, high) == expected


def test_degenerate_interval():
    assert clamp(10, 4, 4) == 4


def test_low_above_high_is_an_error():
    with pytest.raises(ValueError):
        clamp(1, 5, 2)
