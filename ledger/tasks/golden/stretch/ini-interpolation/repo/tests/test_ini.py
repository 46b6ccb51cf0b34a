import pytest

from miniini import ParseError, parse


def test_sections_and_comments():
    text = "top = 1\n# comment\n[db]\nhost = localhost\n; another\nport=5432\n"
    assert parse(text) == {"": {"top": "1"}, "db": {"host": "localhost", "port": "5432"}}


def test_bad_line():
    with pytest.raises(ParseError):
        parse("[a]\njust words\n")


def test_dollar_without_brace_kept():
    assert parse("price = 5$")[""]["price"] == "5$"
