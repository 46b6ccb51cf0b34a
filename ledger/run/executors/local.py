"""The local executor: attempts in worker processes on this machine.

    coordinator --submit(plan)--> LocalExecutor --plan--> worker process: run_attempt(plan, emit)
    coordinator <--events()----- LocalExecutor <--AttemptEvent (queue, as they happen)-- worker

``LocalExecutor(parallel=N)`` keeps N worker processes (forkserver, else spawn; never fork,
because the coordinator may have threads). Each worker gets plans through its own inbox, so the
executor always knows which process runs which attempt. Stopping an attempt is a signal to its
worker: SIGUSR1 means cancelled, SIGUSR2 interrupted (the worker keeps serving), SIGTERM
interrupted and stop serving. The worker's ``Stopper`` (``protocol.py``) turns it into an
exception inside the attempt, whose clean-up kills the agent's process group and reports
``attempt.finished``.
Workers ignore SIGINT (Ctrl-C is the coordinator's to handle) and stop on their own when the
coordinator process disappears. Python runs a signal handler in the main thread between bytecodes
or when a blocking call returns EINTR; a signal that lands just before a blocking call starts waits
for that call to return. The attempt code therefore never blocks long in one call (the agent
runner selects in 20 ms steps, test commands are polled), so a stop takes effect within ~50 ms.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ledger.errors import UsageError
from ledger.log import get_logger
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors.protocol import (
    DEFAULT_RUNNER,
    STOP_SIGNALS,
    UNSET,
    AttemptStopped,
    Stopper,
    finished_event,
    load_runner,
    restore_import_path,
    safe_import_path,
)

_POLL_S = 0.05
_PARENT_POLL_S = 0.25
SWITCH_INTERVAL_S = 0.0002
_STOP_GRACE_S = 10.0


# --------------------------------------------------------------------------- worker side


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _watch_parent(parent_pid: int) -> None:
    """Stop this worker when the coordinator is gone (SIGKILL-ed coordinators included)."""
    while _alive(parent_pid):
        time.sleep(_PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(_STOP_GRACE_S)
    os._exit(3)


def worker_main(inbox: Any, out: Any, parent_pid: int, runner: str = DEFAULT_RUNNER,
                user_safe_path: str = UNSET) -> None:
    """Entry point of a worker process: run plans from ``inbox`` until it yields None."""
    restore_import_path(user_safe_path)  # started with a safe sys.path; agents get the user's env
    from ledger.run.workspace import drain_removals, remove_in_background

    run_attempt = load_runner(runner)
    remove_in_background()  # the next attempt need not wait for the last one's folders to go
    # The attempt's helper threads (the trace follower, background copies, the queue's feeder)
    # hand the interpreter back within 0.2 ms instead of Python's default 5 ms: the attempt's
    # own thread waits on children and must not wait on them.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stopper = Stopper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopper.install((signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM))
    # Helper threads (parent watchdog, the queue's feeder) start with the stop signals blocked,
    # so the kernel delivers them to the main thread, where they interrupt a blocking call.
    stop_signals = {signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
        out.put(AttemptEvent("", "", "phase", {"phase": "worker-ready"}))  # starts the feeder
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    node = socket.gethostname()

    reported: set[str] = set()

    def emit(event: AttemptEvent) -> None:
        if event.kind == "attempt.finished":
            reported.add(event.attempt_id)
        out.put(event)

    try:
        while not stopper.leaving:
            stopper.idle = True
            try:
                plan = inbox.get()
            except AttemptStopped:
                continue
            finally:
                stopper.idle = False
            if plan is None:
                break
            emit(AttemptEvent(plan.attempt_id, plan.task_id, "phase",
                              {"phase": "started", "node": node, "pid": os.getpid()}))
            log = get_logger(run=plan.run_id, attempt=plan.attempt_id, pid=os.getpid())
            log.debug("attempt.running", node=node)
            stopper.requested = None
            stopper.armed = True
            try:
                run_attempt(plan, emit, stop_guard=stopper)
            except AttemptStopped as stop:  # arrived during clean-up, or after the report
                if plan.attempt_id not in reported:
                    emit(finished_event(plan, stop.status, f"{stop.status} during clean-up"))
            except Exception as exc:  # the attempt code itself failed: report, keep serving
                if plan.attempt_id not in reported:
                    emit(finished_event(plan, "error", f"{type(exc).__name__}: {exc}"))
            finally:
                stopper.armed = False
                log.debug("attempt.done", reported=plan.attempt_id in reported)
    finally:
        drain_removals()
        out.close()
        if _alive(parent_pid):
            out.join_thread()  # deliver the last events
        else:
            out.cancel_join_thread()  # nobody reads any more; do not block on exit


# --------------------------------------------------------------------------- coordinator side


@dataclass
class _Worker:
    process: Any
    inbox: Any
    current: AttemptPlan | None = None


def default_start_method() -> str:
    methods = mp.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


class LocalExecutor:
    """Runs attempts in ``parallel`` worker processes on this machine."""

    kind = "local"

    def __init__(self, parallel: int = 1, *, start_method: str | None = None,
                 runner: str = DEFAULT_RUNNER) -> None:
        if parallel < 1:
            raise UsageError("--parallel must be at least 1")
        self.parallel = parallel
        self.runner = runner
        self.node = socket.gethostname()
        self._ctx: Any = mp.get_context(start_method or default_start_method())
        if self._ctx.get_start_method() == "forkserver":
            self._ctx.set_forkserver_preload(["ledger.run.attempt", "ledger.run.executors.local"])
        with safe_import_path():  # the resource tracker starts here
            self._out: Any = self._ctx.Queue()
        self._workers: list[_Worker] = []
        self._pending: deque[AttemptPlan] = deque()
        self._outstanding: dict[str, AttemptPlan] = {}
        self._local: deque[AttemptEvent] = deque()  # events made here (cancel, worker death)
        self._closed = False

    # -- the Executor interface

    def place(self, plan: AttemptPlan) -> dict[str, str | None]:
        """Every attempt runs on this machine; no archive is shipped."""
        return {"node": self.node, "archive": None}

    def submit(self, plan: AttemptPlan) -> None:
        if self._closed:
            raise UsageError("executor is closed")
        self._outstanding[plan.attempt_id] = plan
        self._pending.append(plan)
        self._dispatch()

    def events(self, *, idle_timeout: float | None = None) -> Iterator[AttemptEvent]:
        """Events as they arrive, until every submitted attempt has finished (or, with
        ``idle_timeout``, until nothing arrived for that many seconds)."""
        last = time.monotonic()
        while self._outstanding or self._local:
            self._dispatch()
            if self._local:
                event = self._local.popleft()
            else:
                try:
                    event = self._out.get(timeout=_POLL_S)
                except queue.Empty:
                    self._reap()
                    if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                        return
                    continue
            last = time.monotonic()
            if event.attempt_id not in self._outstanding:
                continue  # late news about an attempt already settled (cancelled, worker died)
            if event.kind == "attempt.finished":
                self._settle(event.attempt_id)
            yield event

    def ready(self) -> int:
        """How many events are waiting right now (the coordinator appends a burst as one batch)."""
        try:
            return len(self._local) + int(self._out.qsize())
        except (NotImplementedError, OSError):  # qsize is not available on every platform
            return 0

    def cancel(self, attempt_id: str, *, status: str = "cancelled") -> None:
        """Stop one attempt: drop it if it has not started, else signal its worker."""
        plan = self._outstanding.get(attempt_id)
        if plan is None:
            return
        for queued in list(self._pending):
            if queued.attempt_id == attempt_id:
                self._pending.remove(queued)
                self._local.append(finished_event(plan, status, f"{status} before it started"))
                return
        for worker in self._workers:
            if worker.current is not None and worker.current.attempt_id == attempt_id:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, STOP_SIGNALS.get(status, signal.SIGUSR1))

    def close(self) -> None:
        """Stop everything: interrupt running attempts, stop the workers, reap them."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            if worker.current is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, signal.SIGTERM)
            else:
                with contextlib.suppress(Exception):
                    worker.inbox.put(None)
        deadline = time.monotonic() + _STOP_GRACE_S
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(1.0)
        # Drop whatever is still queued so the queue's feeder thread can exit.
        with contextlib.suppress(Exception):
            while True:
                self._out.get_nowait()
        self._out.close()
        self._out.cancel_join_thread()
        self._workers.clear()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals

    @property
    def running(self) -> list[str]:
        return [w.current.attempt_id for w in self._workers if w.current is not None]

    def _settle(self, attempt_id: str) -> None:
        self._outstanding.pop(attempt_id, None)
        for worker in self._workers:
            if worker.current is not None and worker.current.attempt_id == attempt_id:
                worker.current = None

    def _start_worker(self) -> _Worker:
        with safe_import_path() as user_safe_path:  # the forkserver (or a spawned worker)
            inbox = self._ctx.SimpleQueue()
            process = self._ctx.Process(
                target=worker_main, args=(inbox, self._out, os.getpid(), self.runner, user_safe_path),
                daemon=True, name="ledger-worker",
            )
            process.start()
        worker = _Worker(process=process, inbox=inbox)
        self._workers.append(worker)
        return worker

    def _dispatch(self) -> None:
        while self._pending:
            idle = next((w for w in self._workers if w.current is None and w.process.is_alive()), None)
            if idle is None:
                if len(self._workers) >= self.parallel:
                    return
                idle = self._start_worker()
            plan = self._pending.popleft()
            idle.current = plan
            idle.inbox.put(plan)

    def _reap(self) -> None:
        """Settle attempts whose worker died, and forget dead workers."""
        for worker in list(self._workers):
            if worker.process.is_alive():
                continue
            self._workers.remove(worker)
            if worker.current is not None:
                code = worker.process.exitcode
                self._local.append(finished_event(
                    worker.current, "interrupted",
                    f"worker process died (exit code {code}) before the attempt reported back",
                ))
                worker.current = None
