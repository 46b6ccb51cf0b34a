"""One contract, every executor: these tests run against LocalExecutor (test_executor_contract.py)
and RayExecutor (test_ray_executor.py, on that module's loopback cluster) alike; each module
imports them and defines the ``executor`` fixture for its implementation.

The coordinator relies on exactly these behaviours (``ledger.run.executors.protocol.Executor``)
and never probes an executor for optional methods.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors import KINDS, Executor
from tests.run.minitasks import make_ledger


def _script_agent(tmp: Path, name: str, body: str) -> str:
    """A ``cmd:`` agent spec running ``body`` (dedented) with this interpreter."""
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


def _plan_for(home: Path, task_id: str, agent: str, timeout: float = 60.0) -> AttemptPlan:
    """A plan of the mini task ``task_id`` for ``agent``, as the coordinator would make it."""
    from ledger.tasks.loader import load_task

    task = load_task(home / "golden" / "mini" / task_id)
    return AttemptPlan(
        run_id="r-test", attempt_id=f"r-test/{task_id}/a/1/1", task_root=str(task.root),
        task_id=task_id, agent_spec=agent, repeat=1, try_no=1, timeout_s=timeout, trace="none",
        config={"commitment_key": os.urandom(32), "tier": "mini", "task_hash": task.hash,
                "agent_extra": {}, "named_agents": {}})


SLEEPY = """
    import time
    time.sleep(120)
"""


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
