"""The contracts between the parts of a run: agents, the bounded process runner, the executor.

    spec string --resolve_agent()--> Agent --invocation(ctx)--> Invocation (argv, env, parser)
    Invocation --run_agent_process()--> ProcessOutcome (exit, signal, wall time, bounded output,
                                        orphans, trace events, parsed transcript events, usage)
    AttemptPlan --executor (ledger.run.executors)--> AttemptEvent stream (entries, phase updates)

Everything here is plain data; the modules that do the work import these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

# One event destined for the journal: (kind, data). The coordinator adds run, task and attempt.
Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class AttemptContext:
    """What an agent needs to know to start: never the ground truth."""

    attempt_id: str
    task_id: str
    worktree: Path
    prompt_file: Path
    prompt: str
    home: Path  # a private, empty config home for this attempt (HOME, CODEX_HOME, ...)
    timeout_s: float
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Usage:
    """Token and cost telemetry parsed from an agent's own output (None = not reported)."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # as reported by the agent itself
    model: str | None = None
    model_calls: int | None = None  # model calls answered with success (None = not observable)
    agent_error: dict[str, str] | None = None  # {kind, detail}: the agent never reached its model
    # {model: (tokens_in, tokens_out)} when the agent names several models that answered (gemini
    # routes through a small model first): each is priced at its own rate
    by_model: dict[str, tuple[int, int]] | None = None


class OutputParser(Protocol):
    """Turns an agent's stdout, line by line, into activity events and usage."""

    def feed_line(self, line: str) -> list[Event]: ...

    def finish(self) -> Usage: ...


@dataclass(frozen=True)
class Invocation:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    parser_factory: Callable[[], OutputParser] | None = None
    secrets: tuple[str, ...] = ()  # strings to redact from argv/env/output before journaling
    # stdout is wholly the transcript the parser turns into entries (the HTTP agent): its raw
    # head is then not journaled a second time as an ``agent.output`` entry
    stdout_is_transcript: bool = False


class Agent(Protocol):
    name: str  # short name used in attempt ids and reports (e.g. "claude", "demo", "cmd-fake")
    spec: str  # the spec string the user gave
    kind: str  # "builtin" | "cli" | "cmd"

    def available(self) -> tuple[bool, str]: ...  # (can run here, reason if not)

    def version(self) -> str | None: ...

    def invocation(self, ctx: AttemptContext) -> Invocation: ...

    def endpoints(self) -> tuple[str, ...]: ...  # model API hosts the agent may reach (host[:port])


@dataclass
class ProcessOutcome:
    exit_code: int | None
    signal: int | None
    wall_s: float
    timed_out: bool
    orphans: int  # processes of the attempt still alive after the agent exited; all were killed
    stdout_text: str  # bounded head, decoded with errors="replace"
    stdout_total: int
    stderr_text: str
    stderr_total: int
    events: list[Event] = field(default_factory=list)  # trace + parsed transcript, in order
    usage: Usage = field(default_factory=Usage)
    trace: str = "none"  # "strace" | "none"
    trace_reason: str = ""
    agent_error: dict[str, str] | None = None  # set when a watch stopped the agent early
    trace_partial: bool = False  # the tracer let go of the agent before the agent ended
    sandbox_failed: str | None = None  # bwrap's message: the sandbox never ran the agent
    limits: dict[str, Any] | None = None  # ``Enforcement.as_data()``: values and mechanisms
    limit_hits: list[dict[str, Any]] = field(default_factory=list)  # ``limit.hit`` data


class CaptureFilter(Protocol):
    """Applied to every captured text before it is journaled (redaction against the commitment)."""

    def __call__(self, text: str) -> str: ...


def no_filter(text: str) -> str:
    return text


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
    canaries: bool = True  # False: the run turned them off (the benchmark's baseline)
    grading_trace: bool = True  # False: grading not traced (the benchmark's baseline)
    limits: Mapping[str, Any] | None = None  # ``[limits]`` of ledger.toml
    test_timeout_s: float | None = None  # None: the tasks' default limit
    resolver: Callable[[str, int], Sequence[str]] | None = None  # endpoint lookups (tests)
    resolve_timeout_s: float | None = None  # None: the default for all endpoints together

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
            canaries=config.get("canaries", True) is not False,
            grading_trace=config.get("grading_trace", True) is not False,
            limits=config.get("limits"),
            test_timeout_s=float(timeout) if timeout is not None else None,
            resolver=config.get("resolver"),
            resolve_timeout_s=float(resolve_timeout) if resolve_timeout is not None else None,
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

