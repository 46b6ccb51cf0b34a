"""One contract, every executor: the suite below runs against LocalExecutor and RayExecutor alike.

The coordinator relies on exactly these behaviours (``ledger.run.executors.contract.Executor``)
and never probes an executor for optional methods. The Ray half uses the loopback cluster of
``test_ray_executor`` and is skipped only when Ray is not installed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.run.contracts import AttemptEvent
from ledger.run.executors import KINDS, Executor, make_executor
from tests.run.minitasks import make_ledger
from tests.run.test_ray_executor import HAS_RAY, _plan_for, _script_agent, cluster  # noqa: F401

SLEEPY = """
    import time
    time.sleep(120)
"""


@pytest.fixture(params=["local", pytest.param("ray", marks=[
    pytest.mark.ray,
    pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'eval-ledger[ray]'")])])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh executor of each kind with one slot; closed at the end of the test."""
    options: dict[str, Any] = {}
    if request.param == "ray":
        request.getfixturevalue("cluster")
        options["cache_dir"] = tmp_path / "cache"
    ex = make_executor(request.param, 1, **options)
    try:
        yield ex
    finally:
        ex.close()


def _drain(ex: Any, deadline_s: float = 60.0) -> list[AttemptEvent]:
    out: list[AttemptEvent] = []
    t0 = time.monotonic()
    for event in ex.events():
        out.append(event)
        assert isinstance(ex.ready(), int) and ex.ready() >= 0
        assert time.monotonic() - t0 < deadline_s, "events() did not end"
    return out


def test_every_kind_implements_the_protocol(executor: Any) -> None:
    """Each executor is an ``Executor`` (runtime check of every method) and names its kind."""
    assert isinstance(executor, Executor)
    assert executor.kind in KINDS


def test_place_names_a_node_before_submit(executor: Any, tmp_path: Path) -> None:
    """place(plan) says where the attempt will run (what attempt.started journals)."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    placed = executor.place(_plan_for(home, "fix-sub", "noop"))
    assert isinstance(placed.get("node"), str) and placed["node"]
    assert set(placed) <= {"node", "archive"}


def test_an_attempt_streams_started_first_and_finishes_exactly_once(
        executor: Any, tmp_path: Path) -> None:
    """events() starts with the worker's started phase, ends after one attempt.finished."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    plan = _plan_for(home, "fix-sub", "noop")
    executor.place(plan)
    executor.submit(plan)
    events = _drain(executor)
    assert events[0].kind == "phase" and events[0].data["phase"] == "started"
    finished = [e for e in events if e.kind == "attempt.finished"]
    assert len(finished) == 1 and events[-1] is finished[0]
    assert finished[0].data["status"] == "completed"
    assert {e.attempt_id for e in events} == {plan.attempt_id}


def test_idle_timeout_returns_while_an_attempt_still_runs(executor: Any, tmp_path: Path) -> None:
    """events(idle_timeout=...) hands control back when nothing arrives, without settling."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    plan = _plan_for(home, "fix-sub", _script_agent(tmp_path, "sleepy.py", SLEEPY))
    executor.place(plan)
    executor.submit(plan)
    t0 = time.monotonic()
    seen = list(executor.events(idle_timeout=1.0))
    assert time.monotonic() - t0 < 60
    assert all(e.kind != "attempt.finished" for e in seen)
    executor.cancel(plan.attempt_id, status="interrupted")
    rest = _drain(executor)
    assert [e.data["status"] for e in rest if e.kind == "attempt.finished"] == ["interrupted"]


@pytest.mark.parametrize("status", ["cancelled", "interrupted"])
def test_cancel_reports_the_status_asked_for(executor: Any, tmp_path: Path, status: str) -> None:
    """cancel(id, status=...) ends a running attempt with exactly that status, promptly."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    plan = _plan_for(home, "fix-sub", _script_agent(tmp_path, "sleepy.py", SLEEPY))
    executor.place(plan)
    executor.submit(plan)
    t0 = time.monotonic()
    events: list[AttemptEvent] = []
    for event in executor.events():
        events.append(event)
        if event.kind == "agent.started":
            executor.cancel(plan.attempt_id, status=status)
    assert [e.data["status"] for e in events if e.kind == "attempt.finished"] == [status]
    assert time.monotonic() - t0 < 30


def test_close_twice_is_fine_and_submit_after_close_is_refused(executor: Any, tmp_path: Path) -> None:
    """close() is idempotent; a closed executor refuses work with a usage error."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    executor.close()
    executor.close()
    with pytest.raises(UsageError):
        executor.submit(_plan_for(home, "fix-sub", "noop"))
