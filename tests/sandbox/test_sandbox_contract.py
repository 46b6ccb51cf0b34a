"""The sandbox contract suite (tests/sandbox/sandbox_contract.py) against every registered backend
of ``ledger.sandbox.registry``: registering a backend is what puts it under test. A backend that
does not work on this machine is skipped with its own reason."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.sandbox import registry
from tests.sandbox.sandbox_contract import (  # noqa: F401 - collected here, run per backend
    test_a_box_that_confines_nothing_says_so,
    test_a_failed_command_is_not_a_box_that_never_started,
    test_a_program_missing_inside_is_the_box_failure,
    test_backend_and_boxes_implement_the_port,
    test_hidden_paths_are_invisible,
    test_honest_shapes_run,
    test_limits_apply_in_the_box,
    test_no_network_without_an_allowlist,
    test_preflight_starts_the_agent_box,
    test_proxy_journals_what_it_allowed_and_refused,
    test_trace_filter_keeps_the_command_lines,
    test_worktree_writable_nothing_else,
)


@pytest.fixture(params=registry.names())
def sandbox(request: pytest.FixtureRequest) -> Any:
    """Each registered backend, skipped where it does not work here."""
    backend = registry.get(request.param)
    available = backend.available()
    if not available.ok:
        pytest.skip(f"sandbox backend {backend.name}: {available.reason}")
    return backend


def test_the_builtin_backends_are_registered() -> None:
    """``none``, ``bwrap`` and the container engines are there, and ``--sandbox`` accepts
    ``auto``, each name and ``container`` (whichever engine works)."""
    assert {"none", "bwrap", "podman", "docker"} <= set(registry.names())
    assert registry.modes() == ("auto", *registry.names(), "container")
    assert [n for n in registry.names() if registry.is_engine(n)] == ["podman", "docker"]
