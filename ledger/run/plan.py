"""Planning a run: which (task, agent, repeat, try) slots it runs, fresh or resumed.

    fresh_plan(home, journal, RunRequest, config)    tasks x agents x repeats, under a new run id
    resume_plan(home, journal, RunRequest, config)   the slots of a recorded run with no
                                                     ``completed`` or ``error`` try, next try number

Planning reads the journal (``--resume``, ``replay:RUN`` agents) and never writes it; the
coordinator journals the plan (``run.started`` / ``run.resumed``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from evaluators.fold import parse_attempt_id
from ledger.agents.strace import TRACE_MODES
from ledger.errors import NotFound, NothingToRun, TaskError, UsageError
from ledger.home import LedgerHome
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.run.config import LedgerConfig
from ledger.session import attempt_id, new_run_id
from ledger.tasks.model import Task

FINAL_STATUSES = ("completed", "error")  # a slot with such a try is not run again on resume
DEFAULT_TIERS = ("smoke",)
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
    sandbox: str | None = None  # "auto" or a sandbox backend; None: ledger.toml, else auto
    resume: str | None = None
    retry: str | None = None  # with resume: "infra" re-runs only the infra-failed attempts
    executor: str | None = None  # "local" | "ray"; None: ledger.toml [run] executor, else local
    ray_address: str | None = None
    test_timeout_s: float | None = None
    keep_worktrees: bool = False
    agent_base_url: str | None = None  # --agent-base-url: every CLI preset's model endpoint
    canaries: bool = True  # --no-canaries: attempts get none (control runs, benchmark baseline)
    grading_trace: bool = True  # False: grading commands not under strace (the benchmark baseline)
    allow_image_change: bool = False  # a task's image may differ from the digest it was validated with


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
        return attempt_id(run_id, self.task.id, self.agent.name, self.repeat, self.try_no)


def resolve_agents(specs: Sequence[str], config: LedgerConfig) -> list[Any]:
    from ledger.agents import resolve_agent

    return [resolve_agent(spec, config=config.agent_table()) for spec in specs]


def default_agents(config: LedgerConfig) -> tuple[list[str], str | None]:
    """The agents of a run without ``--agent``: ledger.toml, else the first CLI on PATH, else
    the demo agent (with a note saying so)."""
    if config.run.agents:
        return list(config.run.agents), None
    from ledger.agents import default_agent_spec

    spec, note = default_agent_spec()
    return [spec], note


def _resolve_sandbox(requested: str, tasks: Sequence[Task], notes: list[str]) -> dict[str, str]:
    """The sandbox backend of each task (``ledger.run.environments.task_backends``: a named
    backend that cannot work here is exit 3, as is a task with an environment and no engine);
    ``auto`` without isolation says, in one line, how to get it."""
    from ledger.run.environments import task_backends
    from ledger.sandbox import registry

    backends = task_backends(tasks, requested)
    for mode in dict.fromkeys(backends.values()):
        count = sum(1 for m in backends.values() if m == mode)
        status = registry.resolve(mode)
        every = "every attempt" if count == len(tasks) else f"the attempts of {count} task(s)"
        if mode == "none" and requested == "auto":
            notes.append(f"warning: {every} without isolation ({registry.resolve('auto').reason})")
        elif mode != "none":  # say which isolation was used, not only its absence
            where = " container" if registry.is_engine(mode) else " sandbox"
            notes.append(f"isolation: {every} in a {status.reason}{where}")
    return backends


def run_sandbox(backends: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(the run's ``sandbox``: the backend of most tasks, and ``sandbox_by_task``: the tasks that
    run in another one, as the run records them; empty when every task runs in the same)."""
    counts: dict[str, int] = {}
    for mode in backends.values():
        counts[mode] = counts.get(mode, 0) + 1
    main = max(counts, key=lambda m: (counts[m], not m.startswith(("podman", "docker")))) if counts else "none"
    return main, {t: m for t, m in backends.items() if m != main}


def _sandbox_argv(agent: Any) -> tuple[list[str], bool]:
    """(the command line the agent's sandbox is built for, whether it runs harness code)."""
    profile = agent.profile()
    return list(profile.sandbox_argv), profile.runs_harness_code


def _preflight_sandboxes(sandbox: str, agents: Sequence[Any], specs: Sequence[str], *,
                         hidden: Sequence[str]) -> None:
    """Start each agent's box once with a trivial command before anything is journaled: a box
    that cannot start is ``NothingToRun`` (exit 3) with the backend's reason, and no run."""
    from ledger.sandbox import registry
    from ledger.sandbox.paths import hidden_paths, packaged_tasks_dir
    from ledger.sandbox.preflight import check_agent_box

    backend = registry.get(sandbox)
    hide = list(dict.fromkeys([*hidden_paths(Path(packaged_tasks_dir()), hidden)]))
    failed = []
    for agent, spec in zip(agents, specs, strict=True):
        argv, harness = _sandbox_argv(agent)
        if not argv:
            continue
        path_env = os.environ.get("PATH", os.defpath)
        if harness:
            path_env = os.pathsep.join([os.path.dirname(sys.executable), path_env])
        why = check_agent_box(backend, argv, path_env=path_env, hidden=hide, harness_code=harness)
        if why is not None:
            failed.append(f"{spec}: {why}")
    if failed:
        raise NothingToRun("the sandbox cannot start (nothing was run): " + "; ".join(failed))


def _demo_note(tasks: Sequence[Task], notes: list[str]) -> None:
    """The demo agent re-enacts a recorded demonstration: say which tasks have none (there it
    does nothing, and the attempt fails), rather than fail them silently."""
    without = [t.id for t in tasks if not t.demo]
    if without:
        shown = ", ".join(without[:5]) + (f" and {len(without) - 5} more" if len(without) > 5 else "")
        notes.append(f"note: the demo agent has a demonstration for {len(tasks) - len(without)} of "
                     f"{len(tasks)} task(s); on the others ({shown}) it does nothing and fails them: "
                     "name a real agent with --agent (docs/agents.md)")


def _check_trace(mode: str) -> None:
    """``--trace strace`` where strace cannot run is an error before anything runs."""
    from ledger.agents.process import resolve_trace

    resolve_trace(mode)


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
        infos.append(AgentInfo(name=name, spec=spec, kind=agent.profile().kind,
                               version=agent.version()))
    return infos


def _with_replay_files(infos: Sequence[AgentInfo], agents: Sequence[Any], journal: Journal,
                       tasks: Sequence[Task]) -> list[AgentInfo]:
    """Each agent that replays a recorded run (``AgentProfile.replays``) with, per task, the
    files that run ended with; the others as they are."""
    out: list[AgentInfo] = []
    for info, agent in zip(infos, agents, strict=True):
        run = agent.profile().replays
        out.append(info if run is None else AgentInfo(info.name, info.spec, info.kind, info.version,
                                                      _replay_files(journal, run, tasks)))
    return out


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
        parsed = parse_attempt_id(attempt)
        if e.task is None or parsed is None:
            continue
        _run, _task, _agent, repeat, try_no = parsed
        rank = (1 if finished.get(attempt) == "completed" else 0, -repeat, try_no)
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
class RunPlan:
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
    prior: list[Entry] = field(default_factory=list)  # a resumed run's entries, read once
    sandboxes: dict[str, str] = field(default_factory=dict)  # task id -> its sandbox backend
    environments: dict[str, Any] = field(default_factory=dict)  # task id -> environments.TaskEnvironment

    def sandbox_of(self, task_id: str) -> str:
        """The backend the attempts of ``task_id`` run in."""
        return self.sandboxes.get(task_id) or str(self.config.get("sandbox") or "none")


def fresh_plan(home: LedgerHome, journal: Journal, req: RunRequest, cfg: LedgerConfig,
               now: datetime, rng: Callable[[int], bytes]) -> RunPlan:
    """Tasks x agents x repeats under a new run id; ``notes`` say what was chosen for the user."""
    from ledger.tasks.loader import load_tasks, refuse_unrunnable

    task_ids = req.task_ids or cfg.run.tasks
    tiers = req.tiers or cfg.run.tiers or (() if task_ids else DEFAULT_TIERS)
    tasks = load_tasks(list(tiers) or None, list(task_ids) or None, overrides=home.golden_dir)
    if not tasks:
        raise TaskError(f"no tasks in tier(s) {', '.join(tiers)}")
    notes: list[str] = []
    backends = _resolve_sandbox(req.sandbox or cfg.run.sandbox or "auto", tasks, notes)
    refuse_unrunnable([t for t in tasks if not _in_container(backends[t.id])])
    specs = list(req.agents)
    if not specs:
        specs, note = default_agents(cfg)
        if note:
            notes.append(note)
    agents = resolve_agents(specs, cfg)
    infos = _with_replay_files(_agent_infos(agents, specs), agents, journal, tasks)
    repeat = req.repeat or cfg.run.repeat or 1
    parallel = req.parallel or cfg.run.parallel or 1
    timeout = req.timeout_s if req.timeout_s is not None else cfg.run.timeout
    trace = req.trace or cfg.run.trace or "auto"
    if trace not in TRACE_MODES:
        raise UsageError(f"--trace must be one of {', '.join(TRACE_MODES)}")
    _check_trace(trace)
    for mode in dict.fromkeys(backends.values()):
        # A container engine's probe has started a container already; an agent box of it that
        # cannot start is each attempt's sandbox.failed (exit 3 when none of the agent's started).
        if mode != "none" and not _in_container(mode):
            _preflight_sandboxes(mode, agents, specs, hidden=[str(home.path)])
    sandbox, by_task = run_sandbox(backends)
    if repeat < 1 or parallel < 1:
        raise UsageError("--repeat and --parallel must be at least 1")
    if any(a.spec == "demo" for a in infos):
        _demo_note(tasks, notes)
    slots = [Slot(t, a, r, 1) for t in tasks for a in infos for r in range(1, repeat + 1)]
    config = {
        "tiers": sorted({t.tier for t in tasks}), "task_ids": [t.id for t in tasks],
        "agents": [a.spec for a in infos], "repeat": repeat, "parallel": parallel,
        "timeout_s": timeout, "trace": trace, "executor": executor_kind(req, cfg),
        "sandbox": sandbox,
    }
    if by_task:  # recorded only when tasks differ: a run in one backend reads as it always has
        config["sandbox_by_task"] = by_task
    if not req.canaries:  # recorded only when off: a run without canaries says so
        config["canaries"] = False
    if not req.grading_trace:  # likewise: its attempts' grading.trace says "off"
        config["grading_trace"] = False
    return RunPlan(new_run_id(now, rng), tasks, infos, slots, config, repeat, parallel, timeout,
                   trace, notes=notes, sandboxes=backends,
                   environments=_environments(home, tasks, backends, req, notes))


def _in_container(mode: str) -> bool:
    from ledger.sandbox import registry

    return registry.is_engine(mode)


def _environments(home: LedgerHome, tasks: Sequence[Task], backends: Mapping[str, str], req: RunRequest,
                  notes: list[str]) -> dict[str, Any]:
    """Each containerised task's image made ready before anything is journaled (built once,
    cached); a build that failed is a note here and a harness error for its attempts."""
    from ledger.run import environments

    ready = environments.prepare(tasks, backends, allow_image_change=req.allow_image_change,
                                 validated_dir=home.validated_dir)
    for env in ready.values():
        if env.failed:
            notes.append(f"warning: task {env.task_id}: its environment is not ready ({env.error}); "
                         "its attempts end as harness errors")
    return ready


def resume_plan(home: LedgerHome, journal: Journal, req: RunRequest,
                cfg: LedgerConfig) -> tuple[RunPlan, list[str]]:
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
    agents = resolve_agents(specs, cfg)
    infos = [AgentInfo(a["name"], i.spec, i.kind, i.version)
             for a, i in zip(rec_agents, _agent_infos(agents, specs), strict=True)]
    infos = _with_replay_files(infos, agents, journal, tasks)

    tries: dict[tuple[str, str, int], int] = {}
    done: set[tuple[str, str, int]] = set()
    open_attempts: dict[str, None] = {}
    prior = list(journal.entries(run=run_id))
    for e in prior:
        if e.kind == "attempt.started":
            key = (str(e.task), str(e.data.get("agent")), int(e.data.get("repeat", 0)))
            tries[key] = max(tries.get(key, 0), int(e.data.get("try", 0)))
            open_attempts[str(e.data.get("attempt"))] = None
        elif e.kind == "attempt.finished":
            attempt = str(e.data.get("attempt"))
            open_attempts.pop(attempt, None)
            parsed = parse_attempt_id(attempt)
            if parsed is not None and e.data.get("status") in FINAL_STATUSES:
                done.add(parsed[1:4])
    repeat = int(rec_cfg.get("repeat", 1))
    if req.retry == "infra":
        # only the slots whose scored attempt failed because the harness or the machine did
        # (evaluators/stats_view.py INFRA_KINDS), under new try numbers; nothing else
        from evaluators.stats_view import infra_attempts

        retry = {parsed[1:4] for a in infra_attempts(prior, run_id)
                 if (parsed := parse_attempt_id(a)) is not None}
        slots = [Slot(t, a, r, tries.get((t.id, a.name, r), 0) + 1)
                 for t in tasks for a in infos for r in range(1, repeat + 1)
                 if (t.id, a.name, r) in retry]
    elif req.retry is not None:
        raise UsageError(f"--retry takes infra, not {req.retry!r}")
    else:
        slots = [
            Slot(t, a, r, tries.get((t.id, a.name, r), 0) + 1)
            for t in tasks for a in infos for r in range(1, repeat + 1)
            if (t.id, a.name, r) not in done
        ]
    timeout = req.timeout_s if req.timeout_s is not None else rec_cfg.get("timeout_s")
    _check_trace(req.trace or str(rec_cfg.get("trace", "auto")))
    backends = _resumed_sandboxes(rec_cfg, tasks)
    running = {s.task.id for s in slots}
    plan = RunPlan(run_id, tasks, infos, slots, rec_cfg, repeat,
                   req.parallel or int(rec_cfg.get("parallel", 1)), timeout,
                   req.trace or str(rec_cfg.get("trace", "auto")), resumed=True, prior=prior,
                   sandboxes=backends,
                   environments=_environments(home, [t for t in tasks if t.id in running], backends, req, []))
    return plan, list(open_attempts)


def _resumed_sandboxes(rec_cfg: Mapping[str, Any], tasks: Sequence[Task]) -> dict[str, str]:
    """The backend each task of a resumed run recorded, checked on this machine: an isolated run's
    rest must be isolated the same way (a backend that cannot work here is exit 3)."""
    from ledger.sandbox import registry

    main = str(rec_cfg.get("sandbox") or "none")
    by_task = rec_cfg.get("sandbox_by_task") if isinstance(rec_cfg.get("sandbox_by_task"), Mapping) else {}
    backends = {t.id: str(by_task.get(t.id, main)) for t in tasks}
    for mode in dict.fromkeys(backends.values()):
        if mode != "none":
            registry.resolve(mode)
    return backends


def executor_kind(req: RunRequest, cfg: LedgerConfig) -> str:
    return req.executor or cfg.run.executor or "local"


def task_record(task: Task) -> dict[str, Any]:
    return {
        "id": task.id, "title": task.title, "tier": task.tier, "hash": task.hash,
        "max_duration_s": float(task.max_duration_s), "max_cost_usd": float(task.max_cost_usd),
        "max_tokens": int(task.max_tokens), "owned_files": list(task.owned_files),
        "expected_files_modified": list(task.expected_files_modified),
        # where a mined or imported task came from (its cluster in the statistics), no commit
        **({"source": {k: task.source[k] for k in ("repo", "format") if k in task.source}}
           if task.source else {}),
    }
