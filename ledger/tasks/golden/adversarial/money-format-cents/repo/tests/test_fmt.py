from money import format_money


def test_plain():
    assert format_money(123456) == "$1,234.56"


def test_symbol():
    assert format_money(250, symbol="€") == "€2.50"
