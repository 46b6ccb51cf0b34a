"""The contracts between the run and its executors: what a worker is sent, what it streams back.

    AttemptPlan --executor (ledger.run.executors)--> AttemptEvent stream (entries, phase updates)

The agent's own contracts (``AttemptContext``, ``Invocation``, ``ProcessOutcome``, ...) are the
Agent port's: ``ledger.agents.contracts``. Everything here is plain data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class AttemptSettings:
    """What the coordinator tells an attempt besides its identity: ``AttemptPlan.config`` read
    once, by name and type (``from_config``), so the attempt never reads a mapping by string.

    A key this worker does not know is refused (the attempt ends in error, nothing runs): a
    setting added on one side only shows at once instead of being silently ignored."""

    commitment_key: bytes | None = None  # the run's commitment subkey (32 bytes; checked on use)
    tier: str | None = None  # the task's tier, as the run loaded it
    task_hash: str | None = None  # the task's hash the journal recorded (checked on load)
    secret_patterns: tuple[Mapping[str, Any], ...] = ()  # ``SecretPattern.as_data()`` each
    named_agents: Mapping[str, Any] = field(default_factory=dict)  # ``[agents]`` of ledger.toml
    agent_extra: Mapping[str, Any] = field(default_factory=dict)  # what the agent gets for this task
    agent_config: Mapping[str, Sequence[str]] = field(default_factory=dict)  # config copied per agent
    pricing: Any = None  # the run's price table (None: the built-in one)
    keep_worktree: bool = False
    sandbox: str = "none"  # the backend the coordinator resolved ``--sandbox`` to
    sandbox_hidden: tuple[str, ...] = ()  # folders no sandbox shows (the ledger home, the source)
    image: Mapping[str, Any] | None = None  # the task's ``environment.ready`` data (container backends)
    environment_error: str | None = None  # the task's image could not be made ready: nothing runs
    canaries: bool = True  # False: the run turned them off (the benchmark's baseline)
    grading_trace: bool = True  # False: grading not traced (the benchmark's baseline)
    limits: Mapping[str, Any] | None = None  # ``[limits]`` of ledger.toml
    test_timeout_s: float | None = None  # None: the tasks' default limit
    resolver: Callable[[str, int], Sequence[str]] | None = None  # endpoint lookups (tests)
    resolve_timeout_s: float | None = None  # None: the default for all endpoints together
    known_expected: Mapping[str, Any] | None = None  # hidden ids this ledger already collected

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AttemptSettings:
        """The settings of a plan's ``config`` mapping (what the coordinator sends)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            from ledger.errors import TaskError

            raise TaskError(f"the attempt plan carries settings this worker does not know: "
                            f"{', '.join(unknown)}; nothing was run")
        key = config.get("commitment_key")
        timeout = config.get("test_timeout_s")
        resolve_timeout = config.get("resolve_timeout_s")
        tier, task_hash = config.get("tier"), config.get("task_hash")
        return cls(
            commitment_key=bytes(key) if isinstance(key, bytes | bytearray) else None,
            tier=str(tier) if tier is not None else None,
            task_hash=str(task_hash) if task_hash else None,
            secret_patterns=tuple(config.get("secret_patterns") or ()),
            named_agents=dict(config.get("named_agents") or {}),
            agent_extra=dict(config.get("agent_extra") or {}),
            agent_config={str(k): tuple(v) for k, v in (config.get("agent_config") or {}).items()},
            pricing=config.get("pricing"),
            keep_worktree=bool(config.get("keep_worktree")),
            sandbox=str(config.get("sandbox") or "none"),
            sandbox_hidden=tuple(str(h) for h in config.get("sandbox_hidden") or ()),
            image=dict(config["image"]) if isinstance(config.get("image"), Mapping) else None,
            environment_error=str(config["environment_error"]) if config.get("environment_error") else None,
            canaries=config.get("canaries", True) is not False,
            grading_trace=config.get("grading_trace", True) is not False,
            limits=config.get("limits"),
            test_timeout_s=float(timeout) if timeout is not None else None,
            resolver=config.get("resolver"),
            resolve_timeout_s=float(resolve_timeout) if resolve_timeout is not None else None,
            known_expected=dict(config["known_expected"])
            if isinstance(config.get("known_expected"), Mapping) else None,
        )


@dataclass(frozen=True)
class AttemptPlan:
    """One task x agent x repeat x try, fully described, picklable, sent to a worker."""

    run_id: str
    attempt_id: str
    task_root: str  # the task folder on the worker's file system
    task_id: str
    agent_spec: str
    repeat: int
    try_no: int
    timeout_s: float
    trace: str  # "auto" | "strace" | "none"
    config: Mapping[str, Any] = field(default_factory=dict)  # ``AttemptSettings`` as data

    @property
    def settings(self) -> AttemptSettings:
        """The typed settings of ``config`` (parsed on each call: take it once)."""
        return AttemptSettings.from_config(self.config)


@dataclass(frozen=True)
class AttemptEvent:
    """Streamed from a worker to the coordinator: an entry to append, or a phase update."""

    attempt_id: str
    task_id: str
    kind: str  # entry kind, or "phase" for a progress update (not journaled)
    data: dict[str, Any]

