import pytest

from tablefmt import format_table


def test_numeric_right_aligned():
    out = format_table(["id", "name"], [[7, "x"], [1234, "yy"]])
    assert out.splitlines() == ["  id | name", "-----+-----", "   7 | x", "1234 | yy"]


def test_floats_two_decimals_and_none():
    out = format_table(["k", "v"], [["pi", 3.14159], ["e", None], ["one", 1.0]])
    assert out.splitlines() == ["k   |    v", "----+-----", "pi  | 3.14", "e   |", "one | 1.00"]


def test_mixed_column_stays_text():
    out = format_table(["m"], [[1], ["two"]])
    assert out.splitlines() == ["m", "---", "1", "two"]


def test_bools_are_text():
    out = format_table(["flag", "n"], [[True, 5], [False, 10]])
    assert out.splitlines() == ["flag  |  n", "------+---", "True  |  5", "False | 10"]


def test_all_none_column_is_text():
    out = format_table(["a", "b"], [[None, "x"]])
    assert out.splitlines() == ["a | b", "--+--", "  | x"]


def test_ragged_row():
    with pytest.raises(ValueError):
        format_table(["a", "b"], [[1]])
