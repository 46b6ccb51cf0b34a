import pytest

import miniini
from miniini import ParseError, parse


def test_continuation():
    text = "[msg]\nbody = first\n   second\n\tthird\nnext = x\n"
    assert parse(text)["msg"] == {"body": "first\nsecond\nthird", "next": "x"}


def test_continuation_without_value():
    with pytest.raises(ParseError):
        parse("[a]\n  floating\n")


def test_comment_ends_value():
    with pytest.raises(ParseError):
        parse("a = 1\n# note\n  more\n")


def test_same_section_and_nested():
    text = "[p]\nroot = /srv\napp = ${root}/app\nlogs = ${app}/logs\n"
    assert parse(text)["p"]["logs"] == "/srv/app/logs"


def test_other_section_and_default():
    text = "name = demo\n[db]\nhost = h\n[app]\nurl = pg://${db:host}/${:name}\n"
    assert parse(text)["app"]["url"] == "pg://h/demo"


def test_forward_reference():
    assert parse("a = ${b}!\nb = B\n")[""]["a"] == "B!"


def test_escaped_dollar():
    assert parse("cost = $$5 for ${x}\nx = $$y\n")[""]["cost"] == "$5 for $y"


@pytest.mark.parametrize("text, name", [("a = ${nope}", "nope"), ("a = ${s:k}", "s:k"), ("a = ${b}\nb = ${a}", "a")])
def test_interpolation_errors(text, name):
    with pytest.raises(miniini.InterpolationError, match=name):
        parse(text)


def test_interpolation_error_is_value_error():
    assert issubclass(miniini.InterpolationError, ValueError)
