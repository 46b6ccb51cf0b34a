import pytest

from greeter import greet


def test_no_argument_greets_the_world():
    assert greet() == "Hello, world!"


@pytest.mark.parametrize("empty", [None, "", "   ", "\t\n"])
def test_missing_names_greet_the_world(empty):
    assert greet(empty) == "Hello, world!"


def test_surrounding_whitespace_is_dropped():
    assert greet("  Linus\t") == "Hello, Linus!"


def test_ordinary_names_unchanged():
    assert greet("Margaret") == "Hello, Margaret!"
