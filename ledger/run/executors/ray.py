"""Run attempts on a Ray cluster; the coordinator stays the only journal writer. This module is
the coordinator's side (``RayExecutor``); what runs on a worker (the event sink actor,
``run_on_worker``) is ``ray_worker.py``.

    coordinator                                       Ray worker (some node)
    -----------                                       ----------------------
    node  -> picks a node with a free slot
    submit(plan)                                      run_on_worker(plan, archive, sink):
      task folder -> pack_task -> ray.put               phase "started" (host, node id, pid)
      remote task, pinned to that node,                 materialize(cache, sha256) (verified)
      max_retries=0 ------------------------------->    run_attempt(plan, emit)   <- the SAME
    events()  <-- pull <-- EventSink actor <-- push     attempt code as the local executor
      (entries and phases, as they happen)              (batched, as they happen)
    cancel(id) -> stop flag in the sink ----------->    next push sees it: SIGUSR1/2 to itself,
                                                        AttemptStopped, clean-up kills the
                                                        agent's process group, attempt.finished

Ray never retries anything (``max_retries=0``): a task lost with its node or worker yields a
synthesized ``attempt.finished`` with status ``interrupted``, and ``--resume`` runs that slot again
under a new try number, as with the local executor. Every attempt is pinned to the node chosen
when the coordinator read ``node`` (it journals that in ``attempt.started`` just before it
submits), so the journal says where each attempt ran before it runs.

Task material travels as a content-addressed archive (``ledger.run.archive``): packed once per
task, put in Ray's object store, unpacked on the worker into a cache keyed by its SHA-256 and
verified before use; ``run_attempt`` then checks the task hash recorded in ``run.started``.
The event sink is an actor pinned to the coordinator's node, so losing a worker node loses no
event already pushed.

Security: a local instance started here (no ``address``) listens on 127.0.0.1 only and requires a
fresh random token (Ray token authentication); an existing cluster is reached with the token the
user configured for Ray (``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``/
``~/.ray/auth_token``). While an attempt runs, the worker removes Ray's variables (the token
among them) from the environment the agent inherits.

Ray is an optional dependency: ``pip install 'eval-ledger[ray]'``. It is imported only when a
``RayExecutor`` is made.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import secrets
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import UsageError
from ledger.run.archive import pack_task
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors import INSTALL_HINT
from ledger.run.executors.protocol import DEFAULT_RUNNER, finished_event
from ledger.run.executors.ray_worker import (
    HEARTBEAT_S,
    PUSH_TIMEOUT_S,
    EventSink,
    WorkerOptions,
    first_line,
    run_on_worker,
    warm_worker,
)

POLL_S = 0.05  # how long one pull waits for events at most
STOP_GRACE_S = 10.0
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024
_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def import_ray() -> Any:
    """The ``ray`` module, or one clear UsageError naming the install command."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


# --------------------------------------------------------------------------- coordinator side


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    host: str
    slots: int

    @property
    def label(self) -> str:
        """How the journal names the node: ``<hostname>/<ray node id>``."""
        return f"{self.host}/{self.node_id}"


def _is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _loopback_resolution(ray: Any) -> Iterator[None]:
    """Ray maps 127.0.0.1 to the machine's external address before binding or connecting; for a
    loopback-only instance or address that is wrong, so switch that mapping off meanwhile."""
    try:
        from ray._private import ray_constants
    except ImportError:  # a Ray without it: the loopback check after start-up still holds
        yield
        return
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


class RayExecutor:
    """Runs attempts as Ray tasks, one CPU slot each (``cpus_per_attempt``).

    ``address`` names an existing cluster (``host:port`` of its head); without it a private,
    loopback-only, token-protected local instance with ``parallel`` slots is started and stopped
    on ``close()``. If this process is already connected to Ray, that connection is used as is.
    """

    kind = "ray"

    def __init__(self, parallel: int = 1, *, address: str | None = None,
                 runner: str = DEFAULT_RUNNER, cache_dir: str | os.PathLike[str] | None = None,
                 cpus_per_attempt: float = 1.0, stop_grace_s: float = STOP_GRACE_S,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        if parallel < 1:
            raise UsageError("--parallel must be at least 1")
        if cpus_per_attempt <= 0:
            raise UsageError("cpus_per_attempt must be positive")
        self._ray = import_ray()
        self.parallel = parallel
        self.cpus = cpus_per_attempt
        self.stop_grace_s = stop_grace_s
        self.options = WorkerOptions(runner=runner,
                                     cache_dir=str(cache_dir) if cache_dir is not None else None,
                                     heartbeat_s=heartbeat_s)
        self.address: str | None = None
        self._owns_connection = False
        self._saved_env: dict[str, str | None] | None = None
        self._closed = False
        self._connect(address)
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._affinity = NodeAffinitySchedulingStrategy
        try:
            here = ray.get_runtime_context().get_node_id()
            self._sink = ray.remote(EventSink).options(
                num_cpus=0, max_restarts=0, max_concurrency=64,
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
            ).remote()
            self._remote = ray.remote(run_on_worker)
        except Exception:
            self._shutdown_ray()
            raise
        self._outstanding: dict[str, AttemptPlan] = {}
        self._refs: dict[Any, str] = {}  # ObjectRef -> attempt id
        self._ref_of: dict[str, Any] = {}
        self._placed: dict[str, str] = {}  # attempt id -> node id it is pinned to
        self._next_node: NodeInfo | None = None
        self._reserved: dict[str, NodeInfo] = {}  # place(plan) -> submit(plan)
        self._stops: dict[str, tuple[str, float]] = {}  # attempt id -> (status, deadline)
        self._reported: set[str] = set()  # attempt.finished seen for these (queued or yielded)
        self._ready: deque[AttemptEvent] = deque()
        self._archives: dict[str, tuple[str, Any]] = {}  # task root -> (sha256, ObjectRef)
        self.ran_on: dict[str, dict[str, Any]] = {}  # attempt id -> the worker's "started" phase
        self.placements: dict[str, str] = {}  # attempt id -> node label it was pinned to

    # -- connecting

    def _connect(self, address: str | None) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        if address in (None, "", "local"):
            self._start_local()
            return
        try:
            if _is_loopback(str(address)):
                with _loopback_resolution(ray):
                    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except Exception as exc:
            raise UsageError(f"cannot connect to the Ray cluster at {address}: "
                             f"{first_line(str(exc)) or type(exc).__name__}") from None
        self._owns_connection = True
        self.address = str(address)

    def _start_local(self) -> None:
        """A private single-node instance: loopback only, token auth with a fresh token."""
        ray = self._ray
        self._saved_env = {k: os.environ.get(k) for k in _AUTH_ENV}
        os.environ.pop("RAY_AUTH_MODE", None)  # unset: Ray turns token auth on for a new instance
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # ... and uses this token
        quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with _loopback_resolution(ray):
                context = ray.init(
                    address="local", num_cpus=max(1, int(self.parallel * self.cpus + 0.999)),
                    num_gpus=0, include_dashboard=False, _node_ip_address="127.0.0.1",
                    object_store_memory=LOCAL_OBJECT_STORE_BYTES, log_to_driver=False,
                    logging_level=logging.ERROR,
                    # attempts run at normal priority, as with the local executor (Ray's
                    # default for workers is nice 15, which skews wall times under load)
                    _system_config={"worker_niceness": 0},
                )
        except Exception as exc:
            self._restore_env()
            raise UsageError(f"cannot start a local Ray instance: "
                             f"{first_line(str(exc)) or type(exc).__name__}") from None
        finally:
            quiet.setLevel(level)
        self._owns_connection = True
        self.address = str(context.address_info.get("gcs_address", "local"))
        exposed = [n.get("NodeManagerAddress") for n in ray.nodes()
                   if not _is_loopback(str(n.get("NodeManagerAddress", "")))]
        if exposed or not _is_loopback(self.address):
            self._shutdown_ray()
            raise UsageError(f"the local Ray instance did not bind to 127.0.0.1 only "
                             f"({self.address}, {exposed}); refusing to run on it")
        # One warm worker per slot, started now rather than by the first attempts.
        warm = ray.remote(warm_worker)
        with contextlib.suppress(Exception):
            ray.get([warm.options(num_cpus=self.cpus, max_retries=0).remote()
                     for _ in range(self.parallel)], timeout=60)

    def _restore_env(self) -> None:
        if self._saved_env is None:
            return
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env = None

    def _shutdown_ray(self) -> None:
        if self._owns_connection:
            with contextlib.suppress(Exception):
                self._ray.shutdown()
            self._owns_connection = False
        self._restore_env()

    # -- placement

    def nodes(self) -> list[NodeInfo]:
        """Alive nodes that can hold at least one attempt, in a stable order."""
        out = []
        for n in self._ray.nodes():
            cpus = float(n.get("Resources", {}).get("CPU", 0))
            if n.get("Alive") and cpus >= self.cpus:
                out.append(NodeInfo(str(n["NodeID"]),
                                    str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress")),
                                    int(cpus // self.cpus + 1e-9)))
        return sorted(out, key=lambda n: n.node_id)

    def _choose(self) -> NodeInfo:
        nodes = self.nodes()
        if not nodes:
            raise UsageError(f"no live Ray node offers {self.cpus:g} CPU for an attempt")
        load = Counter(self._placed[a] for a in self._outstanding if a in self._placed)
        load.update(n.node_id for n in self._reserved.values())
        return min(nodes, key=lambda n: (load[n.node_id] / n.slots, load[n.node_id]))

    @property
    def node(self) -> str:
        """The node the next submitted attempt will be pinned to (``<hostname>/<node id>``).

        The coordinator reads this just before ``submit`` to journal it in ``attempt.started``.
        """
        self._next_node = self._choose()
        return self._next_node.label

    def place(self, plan: AttemptPlan) -> dict[str, str | None]:
        """Pick the node and pack the task for ``plan`` before it is journaled and submitted:
        the fields ``attempt.started`` should carry (``node``, ``archive``)."""
        info = self._choose()
        self._reserved[plan.attempt_id] = info
        sha, _ref = self._archive(plan.task_root)
        return {"node": info.label, "archive": sha}

    def _archive(self, task_root: str) -> tuple[str, Any]:
        if task_root not in self._archives:
            archive = pack_task(Path(task_root))
            self._archives[task_root] = (archive.sha256, self._ray.put(archive.data))
        return self._archives[task_root]

    # -- the Executor interface

    def submit(self, plan: AttemptPlan) -> None:
        if self._closed:
            raise UsageError("executor is closed")
        info = self._reserved.pop(plan.attempt_id, None) or self._next_node or self._choose()
        self._next_node = None
        sha, ref = self._archive(plan.task_root)
        task = self._remote.options(
            num_cpus=self.cpus, max_retries=0, retry_exceptions=False,
            scheduling_strategy=self._affinity(info.node_id, soft=False),
            name=f"ledger-attempt:{plan.attempt_id}",
        ).remote(plan, sha, [ref], self._sink, self.options)
        self._outstanding[plan.attempt_id] = plan
        self._placed[plan.attempt_id] = info.node_id
        self.placements[plan.attempt_id] = info.label
        self._refs[task] = plan.attempt_id
        self._ref_of[plan.attempt_id] = task

    def events(self, idle_timeout: float | None = None) -> Iterator[AttemptEvent]:
        """Entries and phases as they arrive, until every submitted attempt has finished (or,
        with ``idle_timeout``, until nothing arrived for that long)."""
        last = time.monotonic()
        while self._outstanding or self._ready:
            if not self._ready:
                self._poll()
            while self._ready:
                event = self._ready.popleft()
                if event.attempt_id not in self._outstanding:
                    continue  # late news about an attempt already settled
                if event.kind == "phase" and event.data.get("phase") == "started":
                    self.ran_on[event.attempt_id] = dict(event.data)
                if event.kind == "attempt.finished":
                    self._settle(event.attempt_id)
                last = time.monotonic()
                yield event
            if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                return

    def ready(self) -> int:
        """How many events are waiting here right now."""
        return len(self._ready)

    def cancel(self, attempt_id: str, *, status: str = "cancelled") -> None:
        """Ask the worker to stop the attempt (its own clean-up kills the agent's process
        group); if it has not reported within ``stop_grace_s``, the attempt is recorded as
        stopped anyway."""
        if attempt_id not in self._outstanding or attempt_id in self._stops:
            return
        self._stops[attempt_id] = (status, time.monotonic() + self.stop_grace_s)
        with contextlib.suppress(Exception):
            self._ray.get(self._sink.stop.remote(attempt_id, status), timeout=PUSH_TIMEOUT_S)

    def close(self) -> None:
        """Stop what still runs (interrupted), wait for it briefly, then release Ray."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        try:
            pending = [self._ref_of[a] for a in self._outstanding if a in self._ref_of]
            for attempt_id in list(self._outstanding):
                with contextlib.suppress(Exception):
                    ray.get(self._sink.stop.remote(attempt_id, "interrupted"), timeout=5)
            if pending:
                _ready, rest = ray.wait(pending, num_returns=len(pending),
                                        timeout=self.stop_grace_s, fetch_local=False)
                for ref in rest:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
            with contextlib.suppress(Exception):
                ray.kill(self._sink)
        finally:
            self._archives.clear()
            self._shutdown_ray()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals

    @property
    def running(self) -> list[str]:
        return list(self._outstanding)

    def _settle(self, attempt_id: str) -> None:
        self._outstanding.pop(attempt_id, None)
        self._placed.pop(attempt_id, None)
        self._stops.pop(attempt_id, None)
        ref = self._ref_of.pop(attempt_id, None)
        if ref is not None:
            self._refs.pop(ref, None)

    def _take(self, batch: list[AttemptEvent]) -> None:
        for event in batch:
            if event.kind == "attempt.finished":
                if event.attempt_id in self._reported:
                    continue
                self._reported.add(event.attempt_id)
            self._ready.append(event)

    def _synthesize(self, attempt_id: str, status: str, error: str) -> None:
        plan = self._outstanding.get(attempt_id)
        if plan is None or attempt_id in self._reported:
            return
        self._take([finished_event(plan, status, error)])

    def _pull(self, timeout: float) -> None:
        try:
            batch = self._ray.get(self._sink.pull.remote(timeout), timeout=timeout + PUSH_TIMEOUT_S)
        except Exception as exc:  # the sink is gone: nothing more can arrive
            for attempt_id in list(self._outstanding):
                self._synthesize(attempt_id, "interrupted",
                                 f"lost the event stream from the workers: {first_line(str(exc))}")
            return
        self._take(batch)

    def _poll(self) -> None:
        self._pull(POLL_S)
        self._reap()
        self._expire_stops()

    def _reap(self) -> None:
        """Attempts whose Ray task ended without reporting: lost node or worker, cancelled."""
        if not self._refs:
            return
        done, _ = self._ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0,
                                 fetch_local=False)
        silent = [ref for ref in done if self._refs[ref] not in self._reported]
        if not silent:
            return
        self._pull(0)  # whatever a finished task pushed is in the sink before its task ended
        for ref in silent:
            attempt_id = self._refs[ref]
            if attempt_id in self._reported:
                continue
            status, error = self._failure(ref, attempt_id)
            self._synthesize(attempt_id, status, error)

    def _failure(self, ref: Any, attempt_id: str) -> tuple[str, str]:
        from ray import exceptions as rx

        requested = self._stops.get(attempt_id, ("interrupted", 0.0))[0]
        node = self.placements.get(attempt_id, "?")
        try:
            self._ray.get(ref, timeout=5)
        except rx.TaskCancelledError:
            return requested, f"{requested}: the Ray task was cancelled"
        except (rx.RayTaskError, rx.RuntimeEnvSetupError) as exc:
            cause = getattr(exc, "cause", None) or exc
            return "error", first_line(f"the attempt failed on node {node}: "
                                        f"{type(cause).__name__}: {cause}")
        except Exception as exc:  # node died, worker crashed, unschedulable, object lost, ...
            return "interrupted", first_line(f"lost on node {node} before it reported back "
                                              f"({type(exc).__name__}: {exc})")
        return "interrupted", f"the Ray task on node {node} ended without reporting the attempt"

    def _expire_stops(self) -> None:
        now = time.monotonic()
        for attempt_id, (status, deadline) in list(self._stops.items()):
            if now < deadline or attempt_id in self._reported:
                continue
            self._synthesize(attempt_id, status, f"{status} by the coordinator; the worker did "
                             f"not report within {self.stop_grace_s:g}s")
            ref = self._ref_of.get(attempt_id)
            if ref is not None:
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref, force=False)


__all__ = [
    "INSTALL_HINT",
    "EventSink",
    "NodeInfo",
    "RayExecutor",
    "WorkerOptions",
    "import_ray",
    "run_on_worker",
]
