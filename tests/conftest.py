"""Session-wide: no test sees the machine's own agent CLIs or model keys (tests/agent_env.py).

Per test: a private config folder. ``ledger verify`` remembers the largest checkpoint it verified
per log under ``$XDG_CONFIG_HOME/eval-ledger/seen/`` and witnesses keep their keys under
``$XDG_CONFIG_HOME/eval-ledger/witness/``; a fresh XDG_CONFIG_HOME per test keeps tests
independent of each other and of the real home.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import agent_env


@pytest.fixture(scope="session", autouse=True)
def hide_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Strip agent CLIs from PATH and agent keys/endpoints from the environment for every test."""
    saved = dict(os.environ)
    agent_env.hide(os.environ, tmp_path_factory.mktemp("agent-free-path"))
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _private_config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XDG_CONFIG_HOME at a fresh folder for this test (child processes inherit it)."""
    path = tmp_path_factory.mktemp("xdg-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(path))
    return path
