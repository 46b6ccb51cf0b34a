"""The worker side of the Ray executor (``ray.py``): what runs in a Ray task on some node.

    EventSink        the actor on the coordinator's node: workers push, the coordinator pulls
    run_on_worker    the body of one Ray task: the task archive materialized and verified, the
                     attempt run by the same runner as the local executor, its events pushed in
                     batches as they happen; a guard process sweeps the attempt's processes if
                     the worker dies first
    warm_worker      imports what an attempt imports, so a fresh worker is ready
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ledger
from ledger.errors import LedgerError
from ledger.run.archive import default_cache_dir, materialize
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors.protocol import (
    DEFAULT_RUNNER,
    AttemptStopped,
    Stopper,
    finished_event,
    load_runner,
)

HEARTBEAT_S = 0.25  # a worker asks for stop requests at least this often
PUSH_TIMEOUT_S = 30.0
ERROR_LIMIT = 500


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line[:ERROR_LIMIT]


# --------------------------------------------------------------------------- the event sink actor


class EventSink:
    """A Ray actor (async) on the coordinator's node: workers push events, the coordinator pulls.

    ``push`` returns the stop request for the pushing attempt (None, "cancelled" or
    "interrupted"), so a worker learns about a cancellation on its next push or heartbeat.
    """

    def __init__(self) -> None:
        self._events: list[AttemptEvent] = []
        self._stops: dict[str, str] = {}
        self._arrived: Any = None

    def _signal(self) -> Any:
        import asyncio

        if self._arrived is None:
            self._arrived = asyncio.Event()
        return self._arrived

    async def push(self, attempt_id: str, batch: list[AttemptEvent]) -> str | None:
        if batch:
            self._events.extend(batch)
            self._signal().set()
        return self._stops.get(attempt_id)

    async def stop(self, attempt_id: str, status: str) -> None:
        self._stops.setdefault(attempt_id, status)

    async def pull(self, timeout: float) -> list[AttemptEvent]:
        import asyncio

        if not self._events and timeout > 0:
            arrived = self._signal()
            arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arrived.wait(), timeout)
        out, self._events = self._events, []
        return out


# --------------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs an attempt (picklable; sent with every task)."""

    runner: str = DEFAULT_RUNNER
    cache_dir: str | None = None
    harness_version: str = ledger.__version__
    heartbeat_s: float = HEARTBEAT_S


class _SinkStream:
    """Sends one attempt's events to the sink in order, in batches, as they happen.

    A flusher thread pushes whatever has accumulated as soon as something arrives (events pile
    up while a push is in flight, which makes the batches), and at least every ``heartbeat_s``
    to learn about stop requests. If the sink is gone (the coordinator died), the attempt is
    stopped as ``interrupted``: nobody would record it.
    """

    def __init__(self, ray: Any, sink: Any, attempt_id: str, stopper: Stopper,
                 heartbeat_s: float) -> None:
        self._ray, self._sink, self._attempt = ray, sink, attempt_id
        self._stopper = stopper
        self._heartbeat = heartbeat_s
        self._queue: deque[AttemptEvent] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.stop_status: str | None = None
        self.lost = False

    def put(self, event: AttemptEvent) -> None:
        self._queue.append(event)
        self._wake.set()

    def flush(self) -> str | None:
        """Push everything queued now; returns the stop request, if any."""
        with self._lock:
            if self.lost:
                return self.stop_status
            batch: list[AttemptEvent] = []
            while self._queue:
                batch.append(self._queue.popleft())
            try:
                status = self._ray.get(self._sink.push.remote(self._attempt, batch),
                                       timeout=PUSH_TIMEOUT_S)
            except Exception:
                self.lost = True
                status = "interrupted"
            if status and self.stop_status is None:
                self.stop_status = status
                self._stopper.request(status)
            return self.stop_status

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="ledger-sink-stream", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            self._wake.wait(self._heartbeat)
            self._wake.clear()
            if self._done.is_set():
                break
            self.flush()

    def close(self) -> None:
        self._done.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.flush()


# The guard: a tiny detached process (its own session, re-parented away from the worker, so
# Ray's clean-up of a dead worker's children leaves it alone) holding the read end of a pipe
# from the worker. "done" then EOF: the
# attempt ended normally. EOF alone: the worker died (SIGKILL, lost raylet, job torn down after
# the coordinator died) before its clean-up ran, so the guard kills every process that carries
# this attempt's marker (``LEDGER_ATTEMPT=<attempt id>#...``, inherited by the agent and its
# descendants, setsid ones included), as the attempt's own clean-up would have.
_GUARD = r"""
import os, signal, sys, time
if os.fork():  # detach: Ray kills a dead worker's children, and this must outlive it
    os._exit(0)
if sys.stdin.buffer.read().strip() == b"done":
    sys.exit(0)
needle = b"LEDGER_ATTEMPT=" + sys.argv[1].encode() + b"#"
for _ in range(3):
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/" + name + "/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if any(item.startswith(needle) for item in env.split(b"\0")):
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
"""


class _Guard:
    """Kills the attempt's processes if this worker process dies before its clean-up ran."""

    def __init__(self, attempt_id: str) -> None:
        import subprocess
        import sys

        self._proc: Any = None
        with contextlib.suppress(OSError):
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _GUARD, attempt_id], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                env={"PATH": os.defpath}, close_fds=True)

    def release(self, clean: bool) -> None:
        """``clean``: the attempt's own clean-up ran; otherwise the guard sweeps too."""
        if self._proc is None:
            return
        with contextlib.suppress(Exception):
            if clean:
                self._proc.stdin.write(b"done")
            self._proc.stdin.close()
        with contextlib.suppress(Exception):
            self._proc.wait(timeout=5)


@contextlib.contextmanager
def _without_ray_env() -> Iterator[None]:
    """Hide Ray's variables (the cluster token among them) from what the agent inherits."""
    hidden = {k: v for k, v in os.environ.items() if k.startswith("RAY_")}
    for key in hidden:
        os.environ.pop(key, None)
    try:
        yield
    finally:
        os.environ.update(hidden)


def run_on_worker(plan: AttemptPlan, archive_sha256: str, archive_box: list[Any], sink: Any,
                  options: WorkerOptions) -> str:
    """The body of one Ray task: one attempt, its events pushed to ``sink``; returns the node id.

    Always reports ``attempt.finished`` unless the process itself dies (then the coordinator
    synthesizes ``interrupted``).
    """
    import ray

    node_id: str = ray.get_runtime_context().get_node_id()
    stopper = Stopper()
    stream = _SinkStream(ray, sink, plan.attempt_id, stopper, options.heartbeat_s)
    reported = False

    def emit(event: AttemptEvent) -> None:
        nonlocal reported
        if event.kind == "attempt.finished":
            if reported:
                return
            reported = True
        stream.put(event)

    def finish(status: str, error: str | None) -> None:
        emit(finished_event(plan, status, error))

    stopper.install()
    try:
        emit(AttemptEvent(plan.attempt_id, plan.task_id, "phase", {
            "phase": "started", "node": socket.gethostname(), "node_id": node_id,
            "pid": os.getpid(), "archive": archive_sha256, "nice": os.nice(0),
        }))
        stream.flush()
        stream.start()
        if stopper.requested:
            finish(stopper.requested, f"{stopper.requested} before it started")
            return node_id
        if options.harness_version != ledger.__version__:
            finish("error", f"node {socket.gethostname()} runs eval-ledger {ledger.__version__}, "
                            f"the coordinator {options.harness_version}")
            return node_id
        try:
            cache = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
            root = materialize(cache, archive_sha256, lambda: bytes(ray.get(archive_box[0])))
        except LedgerError as exc:
            finish("error", f"task archive: {exc}")
            return node_id
        except Exception as exc:  # the object store lost it, the cache's disk is full, ...
            finish("error", first_line(f"task archive: {type(exc).__name__}: {exc}"))
            return node_id
        if stopper.requested:
            finish(stopper.requested, f"{stopper.requested} before it started")
            return node_id
        runner = load_runner(options.runner)
        guard = _Guard(plan.attempt_id)
        clean = False
        with _without_ray_env():
            stopper.armed = True
            try:
                runner(replace(plan, task_root=str(root)), emit, stop_guard=stopper)
                clean = True
            except AttemptStopped as stop:  # arrived during clean-up, or after the report
                clean = True
                finish(stop.status, f"{stop.status} during clean-up")
            except Exception as exc:  # the attempt code itself failed
                clean = True
                finish("error", first_line(f"{type(exc).__name__}: {exc}"))
            finally:  # SystemExit (Ray's SIGTERM) or KeyboardInterrupt: the guard sweeps too
                stopper.armed = False
                guard.release(clean)
        return node_id
    finally:
        stopper.armed = False
        stream.close()
        stopper.uninstall()


WARM_MODULES = ("ledger.run.attempt", "ledger.agents", "ledger.agents.process",
                "ledger.tasks.loader", "ledger.tasks.material", "attest.redact", "ledger.agents.costs")


def warm_worker() -> int:
    """Import what an attempt imports, so a fresh worker process is ready (like the local
    executor's forkserver preload); returns the worker's pid."""
    import importlib

    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    return os.getpid()


__all__ = ["HEARTBEAT_S", "PUSH_TIMEOUT_S", "EventSink", "WorkerOptions", "first_line", "run_on_worker",
           "warm_worker"]
