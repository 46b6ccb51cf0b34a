import pytest

from numerals.roman import to_roman


@pytest.mark.parametrize("n, s", [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (1994, "MCMXCIV"), (3999, "MMMCMXCIX")])
def test_to_roman(n, s):
    assert to_roman(n) == s


@pytest.mark.parametrize("bad", [0, 4000, -3, 2.5])
def test_to_roman_range(bad):
    with pytest.raises(ValueError):
        to_roman(bad)
