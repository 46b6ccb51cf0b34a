"""LocalExecutor: worker processes stream events as they happen; cancel, crash and close paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors.local import LocalExecutor
from ledger.run.executors.protocol import AttemptStopped

HERE = "tests.run.test_executor"


def _plan(n: int, **config: Any) -> AttemptPlan:
    return AttemptPlan(run_id="r-x", attempt_id=f"r-x/t{n}/a/1/1", task_root="/nonexistent",
                       task_id=f"t{n}", agent_spec="noop", repeat=1, try_no=1, timeout_s=30.0,
                       trace="none", config=config)


def _finish(plan: AttemptPlan, emit: Any, status: str, error: str | None = None) -> None:
    emit(AttemptEvent(plan.attempt_id, plan.task_id, "attempt.finished",
                      {"attempt": plan.attempt_id, "status": status, "error": error}))


# Runners (resolved by name inside the worker processes).

def steps_runner(plan: AttemptPlan, emit: Any, *, stop_guard: Any = None) -> None:
    """Emits three entries spaced in time, then finishes."""
    for i in range(3):
        emit(AttemptEvent(plan.attempt_id, plan.task_id, "agent.output",
                          {"attempt": plan.attempt_id, "i": i, "pid": os.getpid(),
                           "t": time.monotonic()}))
        time.sleep(float(plan.config.get("gap", 0.0)))
    _finish(plan, emit, "completed")


def sleepy_runner(plan: AttemptPlan, emit: Any, *, stop_guard: Any = None) -> None:
    """Sleeps until stopped; writes its pid so the test can look for it."""
    tmp = Path(plan.config["pidfile"] + ".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.rename(plan.config["pidfile"])  # appears complete, never half-written
    try:
        emit(AttemptEvent(plan.attempt_id, plan.task_id, "phase", {"phase": "agent"}))
        # Like the real attempt code (select/poll loops), block only in short calls: a signal
        # that lands just before a blocking call starts is handled when that call returns.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
        _finish(plan, emit, "completed")
    except AttemptStopped as stop:
        if stop_guard is not None:
            stop_guard.armed = False
        _finish(plan, emit, stop.status, "stopped")


def dying_runner(plan: AttemptPlan, emit: Any, *, stop_guard: Any = None) -> None:
    """The worker process dies mid-attempt (as if OOM-killed)."""
    emit(AttemptEvent(plan.attempt_id, plan.task_id, "agent.output", {"attempt": plan.attempt_id}))
    time.sleep(0.2)
    os._exit(9)


def buggy_runner(plan: AttemptPlan, emit: Any, *, stop_guard: Any = None) -> None:
    """The attempt code raises without reporting."""
    raise RuntimeError("harness bug")


def _collect(ex: LocalExecutor) -> list[AttemptEvent]:
    return list(ex.events())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_two_workers_run_attempts_concurrently_and_stream_in_order() -> None:
    """With parallel=2 two attempts overlap in time, each one's events arrive in emission order."""
    with LocalExecutor(parallel=2, runner=f"{HERE}:steps_runner") as ex:
        for n in range(2):
            ex.submit(_plan(n, gap=0.3))
        events = _collect(ex)
    per: dict[str, list[AttemptEvent]] = {}
    for e in events:
        per.setdefault(e.attempt_id, []).append(e)
    assert set(per) == {"r-x/t0/a/1/1", "r-x/t1/a/1/1"}
    for evs in per.values():
        kinds = [e.kind for e in evs]
        assert kinds == ["phase", "agent.output", "agent.output", "agent.output", "attempt.finished"]
        assert [e.data["i"] for e in evs if e.kind == "agent.output"] == [0, 1, 2]
    outs = [e for e in events if e.kind == "agent.output"]
    assert len({e.data["pid"] for e in outs}) == 2
    # streamed as they happened: the two attempts' outputs interleave
    order = [e.attempt_id for e in outs]
    assert order != sorted(order)


def test_started_phase_names_node_and_pid() -> None:
    """The first event of an attempt is a 'started' phase with the worker's node and pid."""
    with LocalExecutor(parallel=1, runner=f"{HERE}:steps_runner") as ex:
        ex.submit(_plan(0))
        first = next(iter(ex.events()))
        assert first.kind == "phase" and first.data["phase"] == "started"
        assert first.data["node"] == ex.node and first.data["pid"] != os.getpid()
        rest = _collect(ex)
    assert rest[-1].kind == "attempt.finished"


def test_cancel_running_attempt_reports_cancelled(tmp_path: Path) -> None:
    """cancel() stops a running attempt inside its worker, which reports status cancelled."""
    pidfile = tmp_path / "pid"
    with LocalExecutor(parallel=1, runner=f"{HERE}:sleepy_runner") as ex:
        ex.submit(_plan(0, pidfile=str(pidfile)))
        t0 = time.monotonic()
        finished = None
        for e in ex.events():
            if e.kind == "phase" and e.data["phase"] == "agent":
                ex.cancel(e.attempt_id)
            if e.kind == "attempt.finished":
                finished = e
        assert finished is not None and finished.data["status"] == "cancelled"
        assert time.monotonic() - t0 < 10


def test_cancel_queued_attempt_never_starts(tmp_path: Path) -> None:
    """An attempt cancelled before a worker took it finishes as cancelled without running."""
    with LocalExecutor(parallel=1, runner=f"{HERE}:steps_runner") as ex:
        ex.submit(_plan(0, gap=0.2))
        ex.submit(_plan(1))
        ex.cancel("r-x/t1/a/1/1", status="interrupted")
        events = _collect(ex)
    t1 = [e for e in events if e.task_id == "t1"]
    assert [e.kind for e in t1] == ["attempt.finished"]
    assert t1[0].data["status"] == "interrupted"


def test_dead_worker_yields_interrupted_and_the_pool_recovers() -> None:
    """A worker that dies mid-attempt gives attempt.finished 'interrupted'; later attempts still run."""
    with LocalExecutor(parallel=1, runner=f"{HERE}:dying_runner") as ex:
        ex.submit(_plan(0))
        events = _collect(ex)
        fin = [e for e in events if e.kind == "attempt.finished"]
        assert len(fin) == 1 and fin[0].data["status"] == "interrupted"
        assert "exit code 9" in fin[0].data["error"]
        ex.runner = f"{HERE}:steps_runner"
        ex.submit(_plan(1))
        assert _collect(ex)[-1].data["status"] == "completed"


def test_attempt_code_exception_is_reported_as_error() -> None:
    """If the attempt code raises without reporting, the worker reports 'error' and keeps serving."""
    with LocalExecutor(parallel=1, runner=f"{HERE}:buggy_runner") as ex:
        ex.submit(_plan(0))
        ex.submit(_plan(1))
        fin = [e for e in _collect(ex) if e.kind == "attempt.finished"]
    assert [e.data["status"] for e in fin] == ["error", "error"]
    assert "harness bug" in fin[0].data["error"]


def test_close_interrupts_running_attempts_and_reaps_workers(tmp_path: Path) -> None:
    """close() stops the running attempt's worker; no worker process is left."""
    pidfile = tmp_path / "pid"
    ex = LocalExecutor(parallel=1, runner=f"{HERE}:sleepy_runner")
    ex.submit(_plan(0, pidfile=str(pidfile)))
    for e in ex.events():
        if e.kind == "phase" and e.data["phase"] == "agent":
            break
    pid = int(pidfile.read_text())
    ex.close()
    assert not _alive(pid)


def test_parallel_must_be_positive() -> None:
    """parallel=0 is a usage error."""
    with pytest.raises(UsageError):
        LocalExecutor(parallel=0)


@pytest.mark.slow
def test_worker_stops_when_the_coordinator_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the coordinator: its worker notices and exits by itself."""
    pidfile = tmp_path / "pid"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from ledger.run.executors.local import LocalExecutor
        from tests.run.test_executor import _plan
        ex = LocalExecutor(parallel=1, runner="{HERE}:sleepy_runner")
        ex.submit(_plan(0, pidfile={str(pidfile)!r}))
        for e in ex.events():
            print(e.kind, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "phase"
    deadline = time.monotonic() + 10
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(pidfile.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)
