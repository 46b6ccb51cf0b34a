"""The coordinator of a run: plans attempts, hands them to an executor, and is the ONLY journal
writer.

    execute_run(home, RunRequest)
      keys (created if absent) -> tasks -> agents (all must be able to run, checked up front)
      run.started | run.resumed
      loop: attempt.started (journaled before the attempt is submitted) -> executor.submit
            executor.events() -> append each entry as it arrives (phases go to the progress view)
            after an attempt's attempt.finished: its clean-run attestation (see below)
      judge.verdict per scored attempt, run.finished, view.recorded, signed checkpoint

Attestation step, per attempt, once its last entry (``attempt.finished``) is journaled: sign a
checkpoint of the journal head, scan the attempt's entries against the commitment it journaled
before the agent started (``attest.scan.scan_attempt`` with the commitment key, under the scope
the worker reported in ``agent.started``: its folders, and a network allowlist of the task's
entries plus the agent's model API names and the addresses they resolved to, port 443 unless
declared otherwise), and append the signed, sealed ``attestation``
(``attest.attestation.build_attestation``), bound to that checkpoint. An attempt that never
journaled a commitment (it failed before its workspace existed) gets none.

At most ``parallel`` attempts are in flight, so an ``attempt.started`` entry marks when an
attempt was really handed to a worker. Ctrl-C (or SIGTERM) never tears an append in half: the
interrupt is held while an entry is written, then the running attempts are told to stop, their
last reports are appended, attempts that did not report get ``attempt.finished`` with status
``interrupted``, and ``run.finished`` says ``interrupted``. A coordinator killed outright leaves
a journal that verifies (every append is one transaction); ``--resume`` first marks its
unfinished attempts ``interrupted`` and then runs every (task, agent, repeat) slot that has no
``completed`` or ``error`` try under the next try number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import ledger
from attest.attestation import COMMITMENT_KEY_LABEL, SEAL_KEY_LABEL
from ledger.errors import NotFound, NothingToRun, TaskError, UsageError
from ledger.home import LedgerHome
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.run.config import TRACE_MODES, LedgerConfig, load_config
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.tasks.model import Task

HARNESS = f"eval-ledger {ledger.__version__}"
FINAL_STATUSES = ("completed", "error")  # a slot with such a try is not run again on resume
DEFAULT_TIERS = ("smoke",)
STOP_GRACE_S = 10.0
_AGENT_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class RunRequest:
    """What the user asked for; empty fields fall back to ledger.toml, then to the defaults."""

    tiers: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    parallel: int | None = None
    repeat: int | None = None
    timeout_s: float | None = None
    trace: str | None = None
    resume: str | None = None
    executor: str | None = None  # "local" | "ray"; None: ledger.toml [run] executor, else local
    ray_address: str | None = None
    test_timeout_s: float | None = None
    keep_worktrees: bool = False


@dataclass(frozen=True)
class AgentInfo:
    """An agent as the run records it (``run.started`` ``agents``)."""

    name: str
    spec: str
    kind: str
    version: str | None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)  # per task id

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "kind": self.kind, "version": self.version}


@dataclass(frozen=True)
class Slot:
    task: Task
    agent: AgentInfo
    repeat: int
    try_no: int

    def attempt_id(self, run_id: str) -> str:
        return f"{run_id}/{self.task.id}/{self.agent.name}/{self.repeat}/{self.try_no}"


@dataclass
class AttemptResult:
    """What the summary shows about one attempt (raw recorded facts, never a score)."""

    attempt: str
    task: str
    agent: str
    repeat: int
    try_no: int
    status: str | None = None
    error: str | None = None
    hidden_passed: bool | None = None
    hidden_counts: dict[str, int] = field(default_factory=dict)
    regression_passed: bool | None = None
    signals_passed: int = 0
    signals_total: int = 0
    wall_s: float | None = None
    cost_usd: float | None = None
    timed_out: bool = False
    crashed: bool = False
    orphans: int = 0
    attestation: str | None = None  # CLEAN | DIRTY | UNOBSERVED, None when not attested
    attestation_hash: str | None = None
    attestation_matches: int = 0

    @property
    def outcome(self) -> str:
        if self.status != "completed":
            return self.status or "unfinished"
        if self.timed_out:
            return "timeout"
        ok = bool(self.hidden_passed) and self.signals_passed == self.signals_total
        if ok and self.regression_passed is False:
            return "regressed"
        return "passed" if ok else "failed"

    def absorb(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "agent.finished":
            self.wall_s = data.get("wall_s")
            self.cost_usd = data.get("cost_usd")
            self.timed_out = bool(data.get("timed_out"))
            self.crashed = bool(data.get("crashed"))
            self.orphans = int(data.get("orphans") or 0)
        elif kind == "signal.result":
            self.signals_total += 1
            self.signals_passed += 1 if data.get("passed") else 0
        elif kind == "test.result" and data.get("suite") == "hidden":
            self.hidden_passed = bool(data.get("passed"))
            self.hidden_counts = dict(data.get("counts") or {})
        elif kind == "test.result" and data.get("suite") == "regression":
            self.regression_passed = bool(data.get("passed"))
        elif kind == "attempt.finished":
            self.status = data.get("status")
            self.error = data.get("error")
        elif kind == "attestation":
            att = data.get("attestation") or {}
            self.attestation = att.get("verdict")
            self.attestation_hash = data.get("hash")
            self.attestation_matches = int(att.get("match_count") or 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt, "task": self.task, "agent": self.agent,
            "repeat": self.repeat, "try": self.try_no, "status": self.status,
            "outcome": self.outcome, "error": self.error, "hidden_passed": self.hidden_passed,
            "hidden_counts": self.hidden_counts, "regression_passed": self.regression_passed,
            "signals": [self.signals_passed, self.signals_total], "wall_s": self.wall_s,
            "cost_usd": self.cost_usd, "timed_out": self.timed_out, "crashed": self.crashed,
            "orphans": self.orphans, "attestation": self.attestation,
            "attestation_hash": self.attestation_hash,
            "attestation_matches": self.attestation_matches,
        }


@dataclass
class RunSummary:
    run_id: str
    status: str  # "finished" | "interrupted"
    resumed: bool
    results: list[AttemptResult]
    checkpoint: str
    tree_size: int
    ledger: Path
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id, "status": self.status, "resumed": self.resumed,
            "attempts": [r.as_dict() for r in self.results], "checkpoint": self.checkpoint,
            "tree_size": self.tree_size, "ledger": str(self.ledger), "notes": list(self.notes),
            "next": [f"ledger report {self.run_id}", f"ledger verify {self.run_id}"],
        }


class Progress(Protocol):
    """What the command line shows while a run goes on (all methods are optional no-ops)."""

    def note(self, message: str) -> None: ...

    def start(self, run_id: str, total: int) -> None: ...

    def phase(self, attempt_id: str, phase: str) -> None: ...

    def finished(self, result: AttemptResult) -> None: ...

    def stop(self) -> None: ...


class NullProgress:
    def note(self, message: str) -> None:
        pass

    def start(self, run_id: str, total: int) -> None:
        pass

    def phase(self, attempt_id: str, phase: str) -> None:
        pass

    def finished(self, result: AttemptResult) -> None:
        pass

    def stop(self) -> None:
        pass


# --------------------------------------------------------------------------- interrupts


class _InterruptGate:
    """Ctrl-C and SIGTERM become KeyboardInterrupt, but never inside ``critical()``."""

    def __init__(self) -> None:
        self._depth = 0
        self._pending = False
        self._saved: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handler)

    def uninstall(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def _handler(self, _signum: int, _frame: Any) -> None:
        if self._depth:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._pending:
                self._pending = False
                raise KeyboardInterrupt


# --------------------------------------------------------------------------- integration points


def resolve_agents(specs: Sequence[str], config: LedgerConfig) -> list[Any]:
    from ledger.run.agents import resolve_agent

    return [resolve_agent(spec, config=config.agent_table()) for spec in specs]


def default_agents(config: LedgerConfig) -> tuple[list[str], str | None]:
    """The agents of a run without ``--agent``: ledger.toml, else the first CLI on PATH, else
    the demo agent (with a note saying so)."""
    if config.run.agents:
        return list(config.run.agents), None
    from ledger.run.agents import default_agent_spec

    spec, note = default_agent_spec()
    return [spec], note


def _check_trace(mode: str) -> None:
    """``--trace strace`` where strace cannot run is an error before anything runs."""
    from ledger.run.process import resolve_trace

    resolve_trace(mode)


def _pricing(home: LedgerHome) -> Any:
    from ledger.run.costs import default_pricing_file, load_pricing

    return load_pricing(default_pricing_file(home.path))


# --------------------------------------------------------------------------- planning


def new_run_id(now: datetime, rng: Callable[[int], bytes] = os.urandom) -> str:
    return f"r-{now.strftime('%Y%m%dT%H%M%SZ')}-{rng(3).hex()}"


def _keys(home: LedgerHome) -> Any:
    from ledger.journal.keys import ALL_FILES, init_keys, load_keys, new_key_name

    if not any((home.keys_dir / name).exists() for name in ALL_FILES):
        return init_keys(home.keys_dir, name=new_key_name())
    return load_keys(home.keys_dir)


def _agent_infos(agents: Sequence[Any], specs: Sequence[str]) -> list[AgentInfo]:
    """Check every agent can run here (before anything runs) and give each a unique name."""
    missing = []
    for agent, spec in zip(agents, specs, strict=True):
        ok, reason = agent.available()
        if not ok:
            missing.append(f"{spec}: {reason}")
    if missing:
        if len(missing) == len(agents):
            raise NothingToRun("no agent can run: " + "; ".join(missing))
        raise UsageError("agent cannot run: " + "; ".join(missing)
                         + " (remove it from --agent to run the others)")
    infos: list[AgentInfo] = []
    taken: set[str] = set()
    for agent, spec in zip(agents, specs, strict=True):
        base = "".join(c if c in _AGENT_NAME_OK else "-" for c in str(agent.name)) or "agent"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        infos.append(AgentInfo(name=name, spec=spec, kind=agent.kind, version=agent.version()))
    return infos


def _replay_files(journal: Journal, run_prefix: str, tasks: Sequence[Task]) -> dict[str, Any]:
    """For ``replay:RUN``: per task, the files the recorded run's scored attempt ended with.

    Read from the ``diff`` entry's ``files[].content`` (None = deleted). Files whose content was
    not recorded (binary, too large) are left as they are in the starting repo.
    """
    run_id = journal.resolve_run(run_prefix)
    finished: dict[str, str] = {}
    for e in journal.entries(run=run_id, kind="attempt.finished"):
        finished[e.data.get("attempt", "")] = e.data.get("status", "")
    best: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
    for e in journal.entries(run=run_id, kind="diff"):
        attempt = str(e.data.get("attempt", ""))
        parts = attempt.split("/")
        if e.task is None or len(parts) != 5:
            continue
        rank = (1 if finished.get(attempt) == "completed" else 0, -int(parts[3]), int(parts[4]))
        if e.task not in best or rank > best[e.task][0]:
            best[e.task] = (rank, e.data)
    out: dict[str, Any] = {}
    for task in tasks:
        if task.id not in best:
            raise NotFound(f"run {run_id} recorded no diff for task {task.id}: nothing to replay")
        files: dict[str, str | None] = {}
        for f in best[task.id][1].get("files", []):
            if f.get("status") == "deleted":
                files[f["path"]] = None
            elif isinstance(f.get("content"), str):
                files[f["path"]] = f["content"]
        out[task.id] = {"replay_files": files, "replay_run": run_id}
    return out


@dataclass
class _Plan:
    run_id: str
    tasks: list[Task]
    agents: list[AgentInfo]
    slots: list[Slot]
    config: dict[str, Any]
    repeat: int
    parallel: int
    timeout_s: float | None
    trace: str
    resumed: bool = False
    notes: list[str] = field(default_factory=list)


def _fresh_plan(home: LedgerHome, journal: Journal, req: RunRequest, cfg: LedgerConfig,
                progress: Progress, now: datetime, rng: Callable[[int], bytes]) -> _Plan:
    from ledger.tasks.loader import load_tasks, refuse_unrunnable

    task_ids = req.task_ids or cfg.run.tasks
    tiers = req.tiers or cfg.run.tiers or (() if task_ids else DEFAULT_TIERS)
    tasks = load_tasks(list(tiers) or None, list(task_ids) or None, overrides=home.golden_dir)
    if not tasks:
        raise TaskError(f"no tasks in tier(s) {', '.join(tiers)}")
    refuse_unrunnable(tasks)
    notes: list[str] = []
    specs = list(req.agents)
    if not specs:
        specs, note = default_agents(cfg)
        if note:
            notes.append(note)
            progress.note(note)
    agents = resolve_agents(specs, cfg)
    infos = _agent_infos(agents, specs)
    for i, info in enumerate(infos):
        if info.spec.startswith("replay:"):
            infos[i] = AgentInfo(info.name, info.spec, info.kind, info.version,
                                 _replay_files(journal, info.spec.split(":", 1)[1], tasks))
    repeat = req.repeat or cfg.run.repeat or 1
    parallel = req.parallel or cfg.run.parallel or 1
    timeout = req.timeout_s if req.timeout_s is not None else cfg.run.timeout
    trace = req.trace or cfg.run.trace or "auto"
    if trace not in TRACE_MODES:
        raise UsageError(f"--trace must be one of {', '.join(TRACE_MODES)}")
    _check_trace(trace)
    if repeat < 1 or parallel < 1:
        raise UsageError("--repeat and --parallel must be at least 1")
    slots = [Slot(t, a, r, 1) for t in tasks for a in infos for r in range(1, repeat + 1)]
    config = {
        "tiers": sorted({t.tier for t in tasks}), "task_ids": [t.id for t in tasks],
        "agents": [a.spec for a in infos], "repeat": repeat, "parallel": parallel,
        "timeout_s": timeout, "trace": trace, "executor": executor_kind(req, cfg),
    }
    return _Plan(new_run_id(now, rng), tasks, infos, slots, config, repeat, parallel, timeout,
                 trace, notes=notes)


def _resume_plan(home: LedgerHome, journal: Journal, req: RunRequest, cfg: LedgerConfig) -> tuple[_Plan, list[str]]:
    """The slots of an earlier run that have no completed or error try, under new try numbers.

    Returns the plan and the attempt ids that were started but never reported (to be marked
    interrupted before the run resumes).
    """
    from ledger.tasks.loader import load_tasks

    if req.tiers or req.task_ids or req.agents or req.repeat:
        raise UsageError("--resume takes the tasks, agents and repeats the run recorded; "
                         "drop --tier/--task/--agent/--repeat")
    run_id = journal.resolve_run(req.resume)
    started = next(iter(journal.entries(run=run_id, kind="run.started")), None)
    if started is None:
        raise NotFound(f"run {run_id} has no run.started entry")
    rec_cfg = dict(started.data.get("config", {}))
    rec_tasks = list(started.data.get("tasks", []))
    rec_agents = list(started.data.get("agents", []))
    by_tier: dict[str, list[str]] = {}
    for t in rec_tasks:
        by_tier.setdefault(t["tier"], []).append(t["id"])
    tasks: list[Task] = []
    for tier, ids in by_tier.items():
        tasks.extend(load_tasks([tier], ids, overrides=home.golden_dir))
    hashes = {t["id"]: t["hash"] for t in rec_tasks}
    for task in tasks:
        if task.hash != hashes.get(task.id):
            raise TaskError(f"task {task.id} changed since run {run_id} started "
                            f"(hash {task.hash[:12]}, recorded {str(hashes.get(task.id))[:12]}); "
                            "start a new run instead")
    order = {t["id"]: i for i, t in enumerate(rec_tasks)}
    tasks.sort(key=lambda t: order[t.id])
    specs = [a["spec"] for a in rec_agents]
    infos = _agent_infos(resolve_agents(specs, cfg), specs)
    infos = [AgentInfo(a["name"], i.spec, i.kind, i.version) for a, i in zip(rec_agents, infos, strict=True)]
    for i, info in enumerate(infos):
        if info.spec.startswith("replay:"):
            infos[i] = AgentInfo(info.name, info.spec, info.kind, info.version,
                                 _replay_files(journal, info.spec.split(":", 1)[1], tasks))

    tries: dict[tuple[str, str, int], int] = {}
    done: set[tuple[str, str, int]] = set()
    open_attempts: dict[str, None] = {}
    for e in journal.entries(run=run_id):
        if e.kind == "attempt.started":
            key = (str(e.task), str(e.data.get("agent")), int(e.data.get("repeat", 0)))
            tries[key] = max(tries.get(key, 0), int(e.data.get("try", 0)))
            open_attempts[str(e.data.get("attempt"))] = None
        elif e.kind == "attempt.finished":
            attempt = str(e.data.get("attempt"))
            open_attempts.pop(attempt, None)
            parts = attempt.split("/")
            if len(parts) == 5 and e.data.get("status") in FINAL_STATUSES:
                done.add((parts[1], parts[2], int(parts[3])))
    repeat = int(rec_cfg.get("repeat", 1))
    slots = [
        Slot(t, a, r, tries.get((t.id, a.name, r), 0) + 1)
        for t in tasks for a in infos for r in range(1, repeat + 1)
        if (t.id, a.name, r) not in done
    ]
    timeout = req.timeout_s if req.timeout_s is not None else rec_cfg.get("timeout_s")
    _check_trace(req.trace or str(rec_cfg.get("trace", "auto")))
    plan = _Plan(run_id, tasks, infos, slots, rec_cfg, repeat,
                 req.parallel or int(rec_cfg.get("parallel", 1)), timeout,
                 req.trace or str(rec_cfg.get("trace", "auto")), resumed=True)
    return plan, list(open_attempts)


# --------------------------------------------------------------------------- the run


MAX_PENDING = 500  # streamed entries held back at most before they are appended


def _ready(executor: Any) -> int:
    ready = getattr(executor, "ready", None)
    return int(ready()) if callable(ready) else 0


def _events(executor: Any, *, idle_timeout: float) -> Iterator[AttemptEvent]:
    """``executor.events`` that returns when idle (executors without the option: plain)."""
    try:
        return iter(executor.events(idle_timeout=idle_timeout))
    except TypeError:
        return iter(executor.events())


def executor_kind(req: RunRequest, cfg: LedgerConfig) -> str:
    return req.executor or cfg.run.executor or "local"


def make_executor(kind: str, parallel: int, *, ray_address: str | None = None) -> Any:
    """``local``: the process pool; ``ray``: attempts on a Ray cluster (optional extra)."""
    if kind == "local":
        from ledger.run.executor import LocalExecutor

        return LocalExecutor(parallel=parallel)
    if kind == "ray":
        from ledger.run.ray_executor import RayExecutor, import_ray

        import_ray()  # one clear error naming `pip install 'eval-ledger[ray]'` when missing
        return RayExecutor(parallel, address=ray_address)
    raise UsageError(f"unknown executor {kind!r}; available: local, ray")


# --------------------------------------------------------------------------- attestation


def interpreter_prefixes() -> tuple[str, ...]:
    """This interpreter's installation folders (as given and resolved), readable by every agent."""
    out: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        out += [p, os.path.realpath(p)]
    return tuple(p for p in dict.fromkeys(out) if p.startswith("/") and p != "/")


def _abs_path(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith("/") and value != "/" else None


def _ip_entries(text: Any, port: int) -> list[str]:
    """Allowlist entries for one resolved address at ``port``, in the form strace reports a
    connection: ``1.2.3.4:443`` (and ``[::ffff:1.2.3.4]:443``, the same address through an IPv6
    socket), ``[2001:db8::1]:443``. Nothing for what is not a single, specified address."""
    import ipaddress

    try:
        addr = ipaddress.ip_address(text) if isinstance(text, str) else None
    except ValueError:
        return []
    if addr is not None and addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr is None or addr.is_unspecified:
        return []
    if addr.version == 4:
        return [f"{addr}:{port}", f"[::ffff:{addr}]:{port}"]
    return [f"[{addr.compressed}]:{port}"]


def endpoint_allowlist(endpoints: Any) -> tuple[str, ...]:
    """Network allowlist entries for the model API endpoints an ``agent.started`` entry reports:
    each declared name at its port (``api.anthropic.com:443``; it matches a connection the trace
    names by host) and each address it resolved to, as an exact IP at that port. Malformed
    records allow nothing (a CIDR block, ``0.0.0.0`` or a non-integer port never widens the
    scope)."""
    from ledger.run.agents.presets import endpoint_host_ok

    out: list[str] = []
    for rec in endpoints if isinstance(endpoints, list) else ():
        if not isinstance(rec, Mapping):
            continue
        host, port = rec.get("host"), rec.get("port", 443)
        if (not isinstance(host, str) or not endpoint_host_ok(host) or isinstance(port, bool)
                or not isinstance(port, int) or not 0 < port < 65536):
            continue
        out.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        addresses = rec.get("addresses")
        for addr in addresses if isinstance(addresses, list) else ():
            out += _ip_entries(addr, port)
    return tuple(dict.fromkeys(out))


def scan_policy(started: Entry | None, network_allowlist: Sequence[str] = ()) -> Any:
    """The scope of one attempt: the folders its worker reported in ``agent.started``, the
    interpreter, and the network: the task's allowlist, then the agent's model API endpoints
    (names and resolved addresses, see ``endpoint_allowlist``).

    Without ``agent.started`` (the agent never ran) the worktree is unknown: a path that names no
    real folder stands in, so nothing counts as inside it.
    """
    from attest.scan import ScanPolicy

    data = started.data if started is not None else {}
    readable = [p for p in (data.get("readable") or []) if _abs_path(p)]
    network = tuple(dict.fromkeys([*network_allowlist,
                                   *endpoint_allowlist(data.get("endpoints"))]))
    return ScanPolicy.for_attempt(
        worktree=_abs_path(data.get("cwd")) or "/nonexistent/ledger-worktree",
        home=_abs_path(data.get("home")),
        scratch=_abs_path(data.get("scratch")),
        interpreter_prefixes=interpreter_prefixes(),
        network_allowlist=network,
        extra_read=tuple(readable),
    )


class Attestor:
    """The attestation step of the coordinator (which stays the only journal writer).

    ``attest(attempt, task)`` reads the attempt's entries back from the journal, scans them with
    the commitment key and returns the data of its ``attestation`` entry (not appended here), or
    None when the attempt journaled no commitment.
    """

    def __init__(self, journal: Journal, keys: Any) -> None:
        self.journal = journal
        self.keys = keys
        self._key = keys.subkey(COMMITMENT_KEY_LABEL)
        self._built: dict[str, Any] = {}  # task id -> commitment built from the task files

    def _commitment(self, task: Task | None, stored: Any) -> Any:
        """The journaled commitment; the one rebuilt from the task files when it is the same
        (it carries the prefilters that make the scan fast), else the stored one."""
        from attest.commitment import Commitment
        from attest.material import commitment_for_task

        journaled = Commitment.from_data(stored)
        if task is not None:
            if task.id not in self._built:
                try:
                    self._built[task.id] = commitment_for_task(task, key=self._key)
                except Exception:  # the task folder changed or vanished: scan the stored one
                    self._built[task.id] = None
            built = self._built[task.id]
            if built is not None and built.digest == journaled.digest:
                return built
        return journaled

    def entries(self, run_id: str, attempt_id: str, task_id: str, start: int = 0) -> list[Entry]:
        return [e for e in self.journal.entries(start=start, run=run_id, task=task_id)
                if e.data.get("attempt") == attempt_id]

    def attest(self, run_id: str, attempt_id: str, task_id: str, task: Task | None,
               start: int = 0) -> dict[str, Any] | None:
        from attest.attestation import attestation_hash, build_attestation
        from attest.redact import Redactor
        from attest.scan import scan_attempt

        entries = self.entries(run_id, attempt_id, task_id, start)
        commit = next((e for e in entries if e.kind == "commitment"), None)
        if commit is None:
            return None
        commitment = self._commitment(task, commit.data.get("commitment"))
        started = next((e for e in entries if e.kind == "agent.started"), None)
        network = tuple(task.network_allowlist) if task is not None else ()
        scan = scan_attempt(
            entries, attempt=attempt_id, commitment=commitment,
            policy=scan_policy(started, network), scanner=Redactor(commitment, self._key),
        )
        note = self.journal.checkpoint(self.keys)
        att = build_attestation(
            scan, checkpoint_note=note, signer=self.keys.signer,
            seal_key=self.keys.subkey(SEAL_KEY_LABEL),
            prove=lambda seq, size: self.journal.inclusion_proof(seq, size).hashes,
        )
        return {"attempt": attempt_id, "attestation": att, "hash": attestation_hash(att)}


class Coordinator:
    """Runs one plan against one journal. Use :func:`execute_run`."""

    def __init__(self, home: LedgerHome, journal: Journal, keys: Any, plan: _Plan,
                 cfg: LedgerConfig, req: RunRequest, progress: Progress,
                 executor_factory: Callable[[str, int], Any]) -> None:
        self.home, self.journal, self.keys, self.plan = home, journal, keys, plan
        self.cfg, self.req, self.progress = cfg, req, progress
        self.executor_factory = executor_factory
        self.source = home
        self.gate = _InterruptGate()
        self._pending: list[tuple[str, dict[str, Any], str | None, str | None]] = []
        self.results: dict[str, AttemptResult] = {}
        self.in_flight: dict[str, Slot] = {}
        self.node = socket.gethostname()
        self._plan_config: dict[str, Any] = {}
        self.attestor = Attestor(journal, keys)
        self.tasks = {t.id: t for t in plan.tasks}
        self._first_seq: dict[str, int] = {}  # attempt id -> seq of its attempt.started
        self.resolver: Callable[[str, int], Sequence[str]] | None = None  # None: the node's DNS

    # -- journal writes (the only ones a run makes)

    def append(self, kind: str, data: Mapping[str, Any], *, task: str | None = None) -> Entry:
        self._flush()
        with self.gate.critical():
            return self.journal.append(kind, data, run=self.plan.run_id, task=task)

    def _flush(self) -> None:
        """Append the streamed entries held back while a burst was still arriving, in order."""
        if self._pending:
            with self.gate.critical():
                self.journal.append_many(self._pending)
                self._pending.clear()

    def attest(self, attempt_id: str, task_id: str) -> None:
        """Append the attempt's attestation (after its last entry); a failure is reported, and
        never stops the run."""
        data: dict[str, Any] | None = None
        try:
            with self.gate.critical():
                data = self.attestor.attest(self.plan.run_id, attempt_id, task_id,
                                            self.tasks.get(task_id),
                                            start=self._first_seq.get(attempt_id, 0))
                if data is not None:
                    self.append("attestation", data, task=task_id)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a harness bug must not lose the rest of the run
            self.progress.note(f"attestation of {attempt_id} failed: {type(exc).__name__}: {exc}")
        if data is not None and attempt_id in self.results:
            self.results[attempt_id].absorb("attestation", data)

    def attest_missing(self) -> None:
        """Attest the attempts of this run that journaled a commitment and finished but have no
        attestation (the coordinator stopped in between)."""
        committed: dict[str, str] = {}
        finished: set[str] = set()
        attested: set[str] = set()
        for e in self.journal.entries(run=self.plan.run_id):
            attempt = e.data.get("attempt")
            if not isinstance(attempt, str):
                continue
            if e.kind == "commitment" and e.task is not None:
                committed[attempt] = e.task
            elif e.kind == "attempt.finished":
                finished.add(attempt)
            elif e.kind == "attestation":
                attested.add(attempt)
        for attempt, task_id in committed.items():
            if attempt in finished and attempt not in attested:
                self.attest(attempt, task_id)

    def _attempt_plan(self, slot: Slot) -> AttemptPlan:
        p = self.plan
        config = {
            **self._plan_config,
            "tier": slot.task.tier,
            "task_hash": slot.task.hash,
            "agent_extra": dict(slot.agent.extra.get(slot.task.id, {})),
        }
        timeout = p.timeout_s if p.timeout_s is not None else slot.task.max_duration_s
        return AttemptPlan(
            run_id=p.run_id, attempt_id=slot.attempt_id(p.run_id), task_root=str(slot.task.root),
            task_id=slot.task.id, agent_spec=slot.agent.spec, repeat=slot.repeat,
            try_no=slot.try_no, timeout_s=float(timeout), trace=p.trace, config=config,
        )

    def _start(self, executor: Any, slot: Slot) -> None:
        plan = self._attempt_plan(slot)
        # In flight before it is journaled: an interrupt right after the append still gets the
        # attempt marked interrupted.
        self.results[plan.attempt_id] = AttemptResult(
            plan.attempt_id, slot.task.id, slot.agent.name, slot.repeat, slot.try_no)
        self.in_flight[plan.attempt_id] = slot
        # A remote executor places the attempt first: the node it will run on and the hash of
        # the task archive it will run are journaled before it is submitted.
        placed = executor.place(plan) if hasattr(executor, "place") else {}
        try:
            started = self.append("attempt.started", {
                "attempt": plan.attempt_id, "agent": slot.agent.name,
                "agent_spec": slot.agent.spec, "repeat": slot.repeat, "try": slot.try_no,
                "tier": slot.task.tier,
                "node": placed.get("node") or getattr(executor, "node", self.node),
                "archive": placed.get("archive"),
            }, task=slot.task.id)
            self._first_seq[plan.attempt_id] = started.seq
        except BaseException:
            if not self._journaled(plan.attempt_id):
                del self.in_flight[plan.attempt_id]
                del self.results[plan.attempt_id]
            raise
        executor.submit(plan)

    def _journaled(self, attempt_id: str) -> bool:
        return any(e.data.get("attempt") == attempt_id for e in self.journal.entries(
            run=self.plan.run_id, kind="attempt.started"))

    def _handle(self, event: AttemptEvent, ready: int = 0) -> bool:
        """Append one streamed event; True when it finished its attempt.

        While more events are already waiting (``ready``), entries are held and appended as one
        transaction when the burst ends (or at MAX_PENDING, or before anything else is
        appended), so a burst of trace events costs one commit, not one each.
        """
        if event.attempt_id not in self.in_flight:
            return False
        if event.kind == "phase":
            self.progress.phase(event.attempt_id, str(event.data.get("phase")))
            return False
        self._pending.append((event.kind, event.data, self.plan.run_id, event.task_id))
        if ready <= 0 or len(self._pending) >= MAX_PENDING or event.kind == "attempt.finished":
            self._flush()
        result = self.results[event.attempt_id]
        result.absorb(event.kind, event.data)
        if event.kind == "attempt.finished":
            del self.in_flight[event.attempt_id]
            self.attest(event.attempt_id, event.task_id)
            self.progress.finished(result)
            return True
        return False

    def run(self) -> RunSummary:
        p = self.plan
        self._plan_config = {
            "commitment_key": self.keys.subkey(COMMITMENT_KEY_LABEL),
            "named_agents": self.cfg.agent_table(),
            "pricing": _pricing(self.source),
            "keep_worktree": self.req.keep_worktrees,
        }
        if self.req.test_timeout_s is not None:
            self._plan_config["test_timeout_s"] = self.req.test_timeout_s
        if self.resolver is not None:
            self._plan_config["resolver"] = self.resolver
        queue = list(p.slots)
        status = "finished"
        executor: Any = None
        self.gate.install()
        try:
            self.progress.start(p.run_id, len(queue))
            if queue:
                kind = executor_kind(self.req, self.cfg)
                if self.executor_factory is make_executor:
                    executor = make_executor(kind, min(p.parallel, len(queue)),
                                             ray_address=self.req.ray_address or self.cfg.run.ray_address)
                else:
                    executor = self.executor_factory(kind, min(p.parallel, len(queue)))
            try:
                while queue or self.in_flight:
                    while queue and len(self.in_flight) < p.parallel:
                        self._start(executor, queue.pop(0))
                    for event in executor.events():
                        if self._handle(event, _ready(executor)) and queue:
                            break
            except KeyboardInterrupt:
                status = "interrupted"
                self._stop(executor)
            self._finish(status)
        finally:
            if executor is not None:
                executor.close()
            self.gate.uninstall()
            self.progress.stop()
        note = self.journal.checkpoint(self.keys)
        return RunSummary(p.run_id, status, p.resumed, list(self.results.values()), note,
                          self.journal.size, self.home.path, list(p.notes))

    def _stop(self, executor: Any) -> None:
        """After Ctrl-C: stop running attempts, append what they still report, mark the rest."""
        self.progress.note("interrupted: stopping running attempts (Ctrl-C again to stop now)")
        if executor is not None:
            for attempt_id in list(self.in_flight):
                try:
                    executor.cancel(attempt_id, status="interrupted")
                except TypeError:
                    executor.cancel(attempt_id)
            deadline = time.monotonic() + STOP_GRACE_S
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
                while self.in_flight and time.monotonic() < deadline:
                    for event in _events(executor, idle_timeout=0.5):
                        self._handle(event, _ready(executor))
                        if not self.in_flight or time.monotonic() > deadline:
                            break
        for attempt_id, slot in list(self.in_flight.items()):
            data = {"attempt": attempt_id, "status": "interrupted",
                    "error": "the run was interrupted before the attempt reported back"}
            with contextlib.suppress(KeyboardInterrupt):
                self.append("attempt.finished", data, task=slot.task.id)
            self.results[attempt_id].absorb("attempt.finished", data)
            del self.in_flight[attempt_id]
            with contextlib.suppress(KeyboardInterrupt):
                self.attest(attempt_id, slot.task.id)

    def _finish(self, status: str) -> None:
        """Judge verdicts, run.finished, then the recorded view (which covers run.finished)."""
        run_id = self.plan.run_id
        with contextlib.suppress(KeyboardInterrupt):
            self._flush()
        with contextlib.suppress(KeyboardInterrupt), self.gate.critical():
            self._judge()
            slots = {(t.id, a.name, r) for t in self.plan.tasks for a in self.plan.agents
                     for r in range(1, self.plan.repeat + 1)}
            completed = self._completed_slots()
            self.journal.append("run.finished", {
                "status": status, "attempts": len(slots), "completed": len(completed & slots),
            }, run=run_id)
            self._record_view()

    def _completed_slots(self) -> set[tuple[str, str, int]]:
        """(task, agent, repeat) of every slot of the run with a ``completed`` try."""
        out: set[tuple[str, str, int]] = set()
        for e in self.journal.entries(run=self.plan.run_id, kind="attempt.finished"):
            parts = str(e.data.get("attempt", "")).split("/")
            if e.data.get("status") == "completed" and len(parts) == 5 and parts[3].isdigit():
                out.add((parts[1], parts[2], int(parts[3])))
        return out

    def _judge(self) -> None:
        try:
            from evaluators.judge import (
                JUDGE_NAME,
                JUDGE_VERSION,
                attempt_facts_from_entries,
                offline_verdict,
            )
        except ImportError:  # integration point: the judge is not installed in this build
            return
        run_id = self.plan.run_id
        judged = {
            str(e.data.get("attempt"))
            for e in self.journal.entries(run=run_id, kind="judge.verdict")
            if e.data.get("judge") == JUDGE_NAME and e.data.get("version") == JUDGE_VERSION
        }
        facts = attempt_facts_from_entries(self.journal.entries(run=run_id), run_id)
        items = [
            {"kind": "judge.verdict", "data": {"attempt": aid, **offline_verdict(facts[aid])},
             "run": run_id, "task": facts[aid].get("task")}
            for aid in sorted(facts)
            if aid not in judged and facts[aid].get("status") == "completed"
        ]
        if items:
            self.journal.append_many(items)

    def _record_view(self) -> None:
        try:
            from evaluators.views import recorded_view_data
        except ImportError:  # integration point: the evaluators are not installed in this build
            return
        run_id = self.plan.run_id
        data = recorded_view_data(self.journal.entries(run=run_id), run_id)
        self.journal.append("view.recorded", data, run=run_id)


def _task_record(task: Task) -> dict[str, Any]:
    return {
        "id": task.id, "title": task.title, "tier": task.tier, "hash": task.hash,
        "max_duration_s": float(task.max_duration_s), "max_cost_usd": float(task.max_cost_usd),
        "max_tokens": int(task.max_tokens), "owned_files": list(task.owned_files),
        "expected_files_modified": list(task.expected_files_modified),
    }


def execute_run(
    home: LedgerHome,
    request: RunRequest,
    *,
    progress: Progress | None = None,
    executor_factory: Callable[[str, int], Any] = make_executor,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    rng: Callable[[int], bytes] = os.urandom,
    source: LedgerHome | None = None,
    resolver: Callable[[str, int], Sequence[str]] | None = None,
) -> RunSummary:
    """Run (or resume) a run end to end and return its summary; the journal has every event.

    ``source`` is where ``ledger.toml`` and operator tasks come from when they are not beside
    the journal (``--no-save`` runs against a temporary ledger). ``resolver`` (picklable, sent
    to the workers) replaces the node's DNS for the agents' model API endpoints, e.g.
    ``functools.partial(attempt.static_resolver, {...})``.
    """
    progress = progress or NullProgress()
    source = source or home
    cfg = load_config(source.config_path)
    home.path.mkdir(parents=True, exist_ok=True)
    keys = _keys(home)
    journal = Journal.open(home.journal_path, create=True)
    try:
        if request.resume:
            plan, unreported = _resume_plan(source, journal, request, cfg)
            coordinator = Coordinator(home, journal, keys, plan, cfg, request, progress,
                                      executor_factory)
            coordinator.source = source
            coordinator.resolver = resolver
            for attempt_id in unreported:
                coordinator.append("attempt.finished", {
                    "attempt": attempt_id, "status": "interrupted",
                    "error": "no result was recorded (the coordinator stopped)",
                }, task=attempt_id.split("/")[1])
            coordinator.attest_missing()
            coordinator.append("run.resumed", {
                "remaining": [s.attempt_id(plan.run_id) for s in plan.slots]})
        else:
            plan = _fresh_plan(source, journal, request, cfg, progress, now(), rng)
            coordinator = Coordinator(home, journal, keys, plan, cfg, request, progress,
                                      executor_factory)
            coordinator.source = source
            coordinator.resolver = resolver
            coordinator.append("run.started", {
                "harness_version": HARNESS,
                "config": plan.config,
                "tasks": [_task_record(t) for t in plan.tasks],
                "agents": [a.record() for a in plan.agents],
            })
        return coordinator.run()
    finally:
        journal.close()
