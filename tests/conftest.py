"""Session-wide: no test sees the machine's own agent CLIs or model keys (tests/agent_env.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

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
