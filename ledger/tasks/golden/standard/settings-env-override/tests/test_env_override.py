import pytest

from appcfg.convert import convert
from appcfg.settings import DEFAULTS, load_settings


def test_overrides_with_types():
    env = {"APP_PORT": "9000", "APP_DEBUG": " Yes ", "APP_RATIO": "0.25", "APP_HOST": "example.org", "APP_OTHER": "x"}
    assert load_settings(env=env) == {"host": "example.org", "port": 9000, "debug": True, "ratio": 0.25}


def test_defaults_untouched():
    before = dict(DEFAULTS)
    load_settings(env={"APP_PORT": "1"})
    assert DEFAULTS == before


def test_uses_os_environ(monkeypatch):
    monkeypatch.setenv("APP_DEBUG", "on")
    assert load_settings({"debug": False})["debug"] is True


def test_error_names_variable():
    with pytest.raises(ValueError, match="APP_PORT"):
        load_settings(env={"APP_PORT": "eighty"})


@pytest.mark.parametrize("text, like, out", [("1", False, True), ("OFF", True, False), ("42", 0, 42), ("-3", 7, -3), ("2.5", 1.0, 2.5), (" x ", "", " x ")])
def test_convert(text, like, out):
    result = convert(text, like)
    assert result == out and type(result) is type(like)


@pytest.mark.parametrize("text, like", [("maybe", False), ("1.5", 0), ("abc", 0.0)])
def test_convert_errors(text, like):
    with pytest.raises(ValueError):
        convert(text, like)
