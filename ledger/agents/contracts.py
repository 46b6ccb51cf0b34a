"""The contracts of the Agent port: what an agent is told, what it is run as, what comes back.

    spec string --resolve_agent()--> Agent --invocation(ctx)--> Invocation (argv, env, parser)
    Invocation --run_agent_process()--> ProcessOutcome (exit, signal, wall time, bounded output,
                                        orphans, trace events, parsed transcript events, usage)

Everything here is plain data; the modules that do the work import these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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


KINDS = ("builtin", "cli", "cmd", "http")  # the agent families a profile names


@dataclass(frozen=True)
class AgentProfile:
    """What an agent is, declared by the agent itself: the run reads these facts and never
    probes the agent's class or attributes. ``kind`` is the family journaled with the run's
    agents (``run.started``); every decision the attempt makes reads one of the other fields."""

    kind: str  # one of KINDS: a label for people and the journal, never branched on
    runs_harness_code: bool = False  # the harness's own Python runs it (built-ins, the HTTP loop):
    #                                 its sandbox shows the harness, it gets the task commands' env
    sees_solution: bool = False  # it reads the task's solution (the oracle): DIRTY by design
    uses_model: bool = False  # it calls a model: an attempt that never reached one is an agent_error
    watch_reach: bool = False  # its output is watched live for a model it cannot reach (CLIs)
    model: str | None = None  # the model it is pointed at (prices), when it names one
    endpoints: tuple[str, ...] = ()  # model API hosts it may reach (host[:port])
    transcript: str | None = None  # the transcript parser of its stdout; None: raw output only
    inputs: frozenset[str] = frozenset()  # what the run hands it in ``AttemptContext.extra``
    #                                     besides the context: INPUTS
    sandbox_argv: tuple[str, ...] = ()  # the command line its sandbox is tried with before a
    #                                     run starts (empty: none is tried ahead)
    replays: str | None = None  # the recorded run whose files it replays (``replay:RUN``): the
    #                             plan reads that run's diffs for its ``replay_files``

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"agent kind {self.kind!r} is none of {KINDS}")
        unknown = sorted(self.inputs - INPUTS)
        if unknown:
            raise ValueError(f"agent inputs {unknown} are none of {sorted(INPUTS)}")


# ``AgentProfile.inputs``: task_root (the task folder: the oracle), demo_steps (the task's public
# demonstration), replay_files (the files a recorded run ended with), budgets (the task's token
# and cost budgets and the model's price: the HTTP agent stops at them itself)
INPUTS = frozenset({"task_root", "demo_steps", "replay_files", "budgets"})


class Agent(Protocol):
    name: str  # short name used in attempt ids and reports (e.g. "claude", "demo", "cmd-fake")
    spec: str  # the spec string the user gave

    def profile(self) -> AgentProfile: ...  # what it is (endpoints read from the environment now)

    def available(self) -> tuple[bool, str]: ...  # (can run here, reason if not)

    def version(self) -> str | None: ...

    def invocation(self, ctx: AttemptContext) -> Invocation: ...


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
    # (or the box's capture of its opens missed some); why, when it is known
    trace_partial_reason: str | None = None
    capture: str | None = None  # with a trace: "fanotify+strace" | "strace" (``capture_mode``)
    sandbox_failed: str | None = None  # the box's ``failure``: the sandbox never ran the agent
    limits: dict[str, Any] | None = None  # ``Enforcement.as_data()``: values and mechanisms
    limit_hits: list[dict[str, Any]] = field(default_factory=list)  # ``limit.hit`` data


class CaptureFilter(Protocol):
    """Applied to every captured text before it is journaled (redaction against the commitment)."""

    def __call__(self, text: str) -> str: ...


def no_filter(text: str) -> str:
    return text
