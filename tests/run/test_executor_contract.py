"""The executor contract suite (tests/run/executor_contract.py) against LocalExecutor; the same
tests run against RayExecutor in test_ray_executor.py, on its loopback cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger.run.executors import make_executor
from tests.run.executor_contract import (  # noqa: F401 - collected here, run against local
    test_an_attempt_streams_started_first_and_finishes_exactly_once,
    test_cancel_reports_the_status_asked_for,
    test_close_twice_is_fine_and_submit_after_close_is_refused,
    test_every_kind_implements_the_protocol,
    test_idle_timeout_returns_while_an_attempt_still_runs,
    test_place_names_a_node_before_submit,
)


@pytest.fixture()
def executor() -> Iterator[Any]:
    """A fresh LocalExecutor with one slot; closed at the end of the test."""
    ex = make_executor("local", 1)
    try:
        yield ex
    finally:
        ex.close()
