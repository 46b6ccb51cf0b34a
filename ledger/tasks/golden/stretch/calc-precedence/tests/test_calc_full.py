import pytest

from calc import CalcError, evaluate


@pytest.mark.parametrize(
    "expr, value",
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("8 - 3 - 2", 3),
        ("8 / 4 / 2", 1.0),
        ("2 * -3", -6),
        ("-(2 + 3)", -5),
        ("--4", 4),
        ("+7", 7),
        ("1.5 * 2", 3.0),
        (".5 + 10.", 10.5),
        ("((1))", 1),
        ("2*(3+(4-1))*2", 24),
        ("7 / 2", 3.5),
    ],
)
def test_values(expr, value):
    assert evaluate(expr) == value


def test_types():
    assert type(evaluate("2 * 3 - 1")) is int
    assert type(evaluate("4 / 2")) is float
    assert type(evaluate("1.0 + 1")) is float


@pytest.mark.parametrize("bad", ["(1 + 2", "1 + 2)", "()", "2 *", "* 2", "1 (2)", "3 4", "1..2", "."])
def test_malformed(bad):
    with pytest.raises(CalcError):
        evaluate(bad)


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 / (2 - 2)")
