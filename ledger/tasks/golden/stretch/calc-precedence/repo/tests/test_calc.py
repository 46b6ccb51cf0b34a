import pytest

from calc import CalcError, evaluate


def test_add_sub():
    assert evaluate("1 + 2 - 4") == -1
    assert evaluate(" 40+2 ") == 42


@pytest.mark.parametrize("bad", ["", "1 +", "+", "1 2", "1 $ 2"])
def test_errors(bad):
    with pytest.raises(CalcError):
        evaluate(bad)
