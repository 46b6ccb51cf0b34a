import pytest

from units import convert


def test_kelvin_both_ways():
    assert convert(0, "C", "K") == pytest.approx(273.15)
    assert convert(373.15, "K", "C") == pytest.approx(100)
    assert convert(32, "F", "K") == pytest.approx(273.15)
    assert convert(0, "K", "F") == pytest.approx(-459.67)


def test_case_insensitive():
    assert convert(0, "c", "k") == pytest.approx(273.15)


def test_unknown_unit():
    with pytest.raises(ValueError, match="R"):
        convert(1, "R", "C")


@pytest.mark.parametrize("value, unit", [(-1, "K"), (-273.2, "C"), (-460, "F")])
def test_below_absolute_zero(value, unit):
    with pytest.raises(ValueError):
        convert(value, unit, "C")
