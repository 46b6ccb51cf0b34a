"""The contract every executor keeps, and the worker-side pieces all of them share.

    coordinator --place(plan)--> executor   (where it will run: journaled in attempt.started)
    coordinator --submit(plan)-> executor --plan--> worker: run_attempt(plan, emit, stop_guard)
    coordinator <--events()----- executor <--AttemptEvent (as they happen)-- worker
    coordinator --cancel(id, status)-> executor --stop signal--> worker's Stopper -> AttemptStopped

An executor never writes the journal and never retries: a worker that dies mid-attempt yields a
synthesized ``attempt.finished`` with status ``interrupted``, and the coordinator decides what to
do (``--resume`` runs that slot again under a new try number). ``tests/run/executor_contract.py``
runs one suite against every implementation.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.sandbox.limits import defer_stop

DEFAULT_RUNNER = "ledger.run.attempt:run_attempt"
# Stop one attempt, keep the worker: SIGUSR1 (cancelled), SIGUSR2 (interrupted).
# SIGTERM: stop the attempt (interrupted) and the worker.
STOP_SIGNALS = {"cancelled": signal.SIGUSR1, "interrupted": signal.SIGUSR2}
SAFE_PATH_VAR = "PYTHONSAFEPATH"
UNSET = "\0unset"  # PYTHONSAFEPATH was not set


@contextlib.contextmanager
def safe_import_path() -> Iterator[str]:
    """While held, every Python interpreter this process starts (multiprocessing's forkserver,
    resource tracker and spawned workers; Ray's local processes) starts with ``PYTHONSAFEPATH=1``:
    no working directory and no script directory on its ``sys.path``, so a folder named
    ``attest/``, ``cli/``, ``evaluators/`` or ``ledger/`` where the user runs ``ledger`` is never
    imported by the harness. Yields the user's own value (for ``restore_import_path`` in the
    worker, so what the agent and the task's commands inherit is the user's environment)."""
    saved = os.environ.get(SAFE_PATH_VAR, UNSET)
    os.environ[SAFE_PATH_VAR] = "1"
    try:
        yield saved
    finally:
        if saved == UNSET:
            os.environ.pop(SAFE_PATH_VAR, None)
        else:
            os.environ[SAFE_PATH_VAR] = saved


def restore_import_path(saved: str) -> None:
    """In a worker started under ``safe_import_path``: put the user's own ``PYTHONSAFEPATH`` back
    (the worker's ``sys.path`` is already made), so agents and task commands run as outside."""
    if saved == UNSET:
        os.environ.pop(SAFE_PATH_VAR, None)
    else:
        os.environ[SAFE_PATH_VAR] = saved


@runtime_checkable
class Executor(Protocol):
    """Runs attempts somewhere and streams their events back; see the module docstring."""

    kind: str  # "local" | "ray"

    def place(self, plan: AttemptPlan) -> dict[str, str | None]:
        """Where ``plan`` will run, before it is journaled and submitted: ``node`` (and
        ``archive``, the hash of the task archive it will run, when one is shipped)."""
        ...

    def submit(self, plan: AttemptPlan) -> None: ...

    def events(self, *, idle_timeout: float | None = None) -> Iterator[AttemptEvent]:
        """Events as they arrive, until every submitted attempt has reported
        ``attempt.finished`` (or, with ``idle_timeout``, until nothing arrived for that long)."""
        ...

    def ready(self) -> int:
        """How many events wait right now (the coordinator appends a burst as one batch)."""
        ...

    def cancel(self, attempt_id: str, *, status: str = "cancelled") -> None: ...

    def close(self) -> None: ...


class AttemptStopped(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised inside a running attempt when the coordinator stops it (status says why)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def finished_event(plan: AttemptPlan, status: str, error: str | None) -> AttemptEvent:
    return AttemptEvent(plan.attempt_id, plan.task_id, "attempt.finished",
                        {"attempt": plan.attempt_id, "status": status, "error": error})


def load_runner(path: str) -> Any:
    """``module:function`` -> the function (how a worker finds the attempt code)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class Stopper:
    """A worker's stop signals -> one ``AttemptStopped`` while an attempt runs (``armed``).

    SIGUSR1 means cancelled, SIGUSR2 interrupted; SIGTERM interrupted and "stop serving"
    (``leaving``): a worker idle on its inbox (``idle``) wakes up and leaves. ``run_attempt``
    disarms it before clean-up, so a late stop cannot cut the clean-up short; the first stop
    asked for is kept in ``requested``.
    """

    def __init__(self) -> None:
        self.armed = False
        self.idle = False
        self.leaving = False
        self.requested: str | None = None
        self._saved: dict[int, Any] = {}

    def handler(self, signum: int, _frame: Any) -> None:
        status = "cancelled" if signum == signal.SIGUSR1 else "interrupted"
        self.requested = self.requested or status
        if signum == signal.SIGTERM:
            self.leaving = True
        if self.armed or (self.idle and self.leaving):
            if defer_stop(lambda: self.handler(signum, _frame)):
                return  # raised when the process being spawned has started (limits.spawning)
            self.armed = self.idle = False
            raise AttemptStopped(status)

    def install(self, signals: tuple[int, ...] = tuple(STOP_SIGNALS.values())) -> bool:
        """Handle ``signals`` here; False off the main thread (signals reach only that one)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in signals:
            self._saved[sig] = signal.signal(sig, self.handler)
        return True

    def uninstall(self) -> None:
        for sig, old in self._saved.items():
            signal.signal(sig, old)
        self._saved.clear()

    def request(self, status: str) -> None:
        """From another thread: stop the attempt running in the main thread."""
        self.requested = self.requested or status
        if self._saved:
            os.kill(os.getpid(), STOP_SIGNALS.get(status, signal.SIGUSR2))
