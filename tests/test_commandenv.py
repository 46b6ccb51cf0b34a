"""ledger.commandenv: the one environment a command runs with, in each of its uses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ledger.commandenv import command_env


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_TEST_SECRET", "s3cret")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("XDG_CACHE_HOME", "/operator/.cache")


def test_fresh_env_holds_nothing_of_the_host_but_path(host: None) -> None:
    """Grading's environment: private HOME and temp folders, no host variable but PATH, this
    interpreter first on it, no plugin autoload."""
    env = command_env(home="/h", scratch="/s")
    assert "LEDGER_TEST_SECRET" not in env and "PYTHONPATH" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert (env["HOME"], env["TMPDIR"], env["TMP"], env["TEMP"]) == ("/h", "/s", "/s", "/s")
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1" and env["PYTHONHASHSEED"] == "0"


def test_the_bench_may_load_pytest_plugins(host: None) -> None:
    """``pytest_plugins``: the bench's checks run the answer's tests with its plugins."""
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in command_env(home="/h", scratch="/h",
                                                               pytest_plugins=True)


def test_validate_keeps_the_host_without_its_steering(host: None) -> None:
    """``tasks validate`` on this host: the caller's variables, PYTHONPATH dropped, HOME kept."""
    env = command_env(os.environ)
    assert env["LEDGER_TEST_SECRET"] == "s3cret" and "PYTHONPATH" not in env
    assert env["HOME"] == os.environ["HOME"] and env["XDG_CACHE_HOME"] == "/operator/.cache"


def test_an_image_path_replaces_the_hosts() -> None:
    """Inside a task's image: exactly the image's PATH, no harness interpreter on it."""
    assert command_env(path="/usr/bin:/bin")["PATH"] == "/usr/bin:/bin"


def test_a_box_rehomes_and_keeps_the_rest() -> None:
    """A box's inside: HOME and temp folders moved, the operator's folders dropped, the rest
    (the reporter's PYTHONPATH, PATH) exactly as given."""
    given = {"PATH": "/x", "PYTHONPATH": "/plugin", "HOME": "/operator", "XDG_CACHE_HOME": "/c"}
    env = command_env(given, home="/h", scratch="/s", harness=False)
    assert env == {"PATH": "/x", "PYTHONPATH": "/plugin", "HOME": "/h", "TMPDIR": "/s", "TMP": "/s",
                   "TEMP": "/s"}
