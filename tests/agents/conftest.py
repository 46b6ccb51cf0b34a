"""Fixtures for agent tests: a scripted model server started and stopped by each test."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from tests.agents.scripted_model import ScriptedModel, Turn


@pytest.fixture()
def scripted_model() -> Iterator[Callable[..., ScriptedModel]]:
    """A factory: ``scripted_model(turns, **options)`` starts a server that the test stops."""
    started: list[ScriptedModel] = []

    def start(script: Iterable[Turn] = (), **options: Any) -> ScriptedModel:
        server = ScriptedModel(script, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
