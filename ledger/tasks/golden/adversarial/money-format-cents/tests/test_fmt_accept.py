import pytest

from money import format_money


@pytest.mark.parametrize("cents, text", [(105, "$1.05"), (7, "$0.07"), (0, "$0.00"), (-250, "-$2.50"), (-5, "-$0.05"), (-123456789, "-$1,234,567.89")])
def test_amounts(cents, text):
    assert format_money(cents) == text


@pytest.mark.parametrize("bad", [1.5, True, "100"])
def test_type(bad):
    with pytest.raises(TypeError):
        format_money(bad)
