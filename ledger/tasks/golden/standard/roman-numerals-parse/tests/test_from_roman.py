import pytest

from numerals.roman import from_roman, to_roman


def test_round_trip_everything():
    for n in range(1, 4000):
        assert from_roman(to_roman(n)) == n


def test_case_and_whitespace():
    assert from_roman("  xlii ") == 42


@pytest.mark.parametrize("bad", ["", "   ", "IIII", "VV", "IC", "MCMC", "XM", "ABC", "MMMM", "IIV", "VX", "I I"])
def test_rejects(bad):
    with pytest.raises(ValueError):
        from_roman(bad)
