"""The fold's state and its typed field access (evaluators/fold.py folds entries into it).

    FoldState      one run's accumulated state; AttemptState per attempt, TaskInfo per task
    TestRun        one recorded run of a test suite; RecordedView a view.recorded and its recompute
    new_state      an empty state
    _str, _int...  typed reads of an entry's data: a field of the wrong type raises _Malformed,
                   which the fold counts (the entry is ignored), never lets out

Pure: data in, values out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluators.structure import Finding


class _Malformed(Exception):
    """An entry field has the wrong type; the fold counts the entry and moves on."""


# ---------------------------------------------------------------------------- typed field access

def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _Malformed(key)
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Malformed(key)
    return value


def _int(data: dict[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Malformed(key)
    return value


def _opt_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Malformed(key)
    return value


def _opt_num(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _Malformed(key)
    return float(value)


def _bool(data: dict[str, Any], key: str, default: bool | None = None) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise _Malformed(key)
    return value


def _str_list(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Malformed(key)
    return tuple(value)


# ---------------------------------------------------------------------------- state

@dataclass(frozen=True)
class TaskInfo:
    """A task as ``run.started`` described it (budgets, tier, hash, the files it names)."""

    id: str
    title: str | None
    tier: str | None
    hash: str | None
    max_duration_s: float | None
    max_cost_usd: float | None
    owned_files: tuple[str, ...]
    expected_files: tuple[str, ...]
    cluster: str | None = None  # the statistics' cluster (evaluators/stats_view.py)

    @property
    def named_files(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.owned_files) | set(self.expected_files)))


@dataclass(frozen=True)
class TestRun:
    """One recorded run of a test suite (``test.result`` or ``test.baseline``)."""

    passed: bool
    exit_code: int | None
    counts: dict[str, int]
    outcomes: dict[str, str]  # test id -> outcome; empty when none were parsed
    messages: tuple[str, ...]  # messages of failed and errored tests
    source: str | None = None  # "reporter" | "exit-code" | "reward-file"; None: an older journal
    anomalies: tuple[str, ...] = ()  # grading anomaly reason codes, recorded and re-derived
    reported_ids: tuple[str, ...] | None = None  # every id, when the reporter's list is whole


@dataclass
class AttemptState:
    """Everything the fold has seen about one attempt (one task x agent x repeat x try)."""

    attempt: str
    first_seq: int
    task: str | None = None
    agent: str | None = None
    repeat: int | None = None
    try_no: int | None = None
    tier: str | None = None
    started: bool = False
    trace: str | None = None
    status: str | None = None  # from attempt.finished; None = not finished
    error: str | None = None
    agent_finished: bool = False
    exit_code: int | None = None
    signal: int | None = None
    wall_s: float | None = None
    timed_out: bool = False
    crashed: bool = False
    orphans: int = 0
    limits_hit: tuple[str, ...] = ()  # ``limit.hit`` entries: "memory", "grading:processes"...
    telemetry: bool = False
    cost_usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    signals: dict[int, bool] = field(default_factory=dict)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)  # grading.expected ids
    grading_anomalies: list[str] = field(default_factory=list)  # reason codes, every source
    hidden: TestRun | None = None
    regression: TestRun | None = None
    baseline: TestRun | None = None
    diff_recorded: bool = False
    diff_files: tuple[tuple[str, str, int, int], ...] = ()
    patch: str = ""
    patch_truncated: bool = False
    conflict_markers: bool = False
    apply_failed: bool = False
    reads: set[str] = field(default_factory=set)  # resolved (or named) paths read
    read_names: set[str] = field(default_factory=set)  # paths as named and as resolved
    counted_reads: int = 0  # distinct files fs.read.summary counts without naming them
    writes: set[str] = field(default_factory=set)
    writes_outside: set[str] = field(default_factory=set)
    activity: int = 0  # fs.*, proc.exec, net.connect, tool.* entries seen
    judge: dict[str, Any] | None = None  # the latest valid judge.verdict
    attestation: str | None = None  # the latest verdict
    isolation: str | None = None  # the latest attestation's isolation ("sandbox"/"none")
    agent_error: str | None = None  # agent.finished's agent_error kind (never reached a model)
    sandbox_failed: str | None = None  # what a sandbox.failed entry said (an infra failure)
    canary_commitment: dict[str, Any] | None = None  # the canary.commitment's map
    canary_result: dict[str, Any] | None = None  # the canary.result's map


@dataclass
class RecordedView:
    """A ``view.recorded`` entry, with the view recomputed from the entries before it."""

    seq: int
    evaluator: str
    version: str
    recorded: Any
    computed: dict[str, Any] | None  # None when the evaluator is not this one


@dataclass
class FoldState:
    """The accumulated state of one run's fold."""

    run_id: str | None
    started: bool = False
    harness_version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    finished: dict[str, Any] | None = None
    resumed: int = 0
    resumed_after_finish: bool = False
    attempts: dict[str, AttemptState] = field(default_factory=dict)
    entries: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    outcome_rule: bool = False  # a suite or signal was recorded with its outcomes' provenance
    limits_rule: bool = False  # an agent ran under recorded resource limits (agent.started.limits)
    foreign: int = 0  # entries of other runs (or of no run), skipped
    recorded_views: list[RecordedView] = field(default_factory=list)
    last_attempt: AttemptState | None = None  # the attempt of the previous entry (a lookup cache)
    # Set by views.py so that a view.recorded entry can be compared with the view at that point
    # without a second pass; (state) -> view.
    view_fn: Callable[[FoldState], dict[str, Any]] | None = None
    view_name: str | None = None
    # More views computed in the same pass (evaluator name -> view function): the registry
    # replays the golden and statistics views of a run with one fold.
    other_views: dict[str, Callable[[FoldState], dict[str, Any]]] = field(default_factory=dict)
    # facts_of's last result and the point it was derived at (evaluators/facts.py)
    facts_cache: tuple[int, Any] | None = None
    # Entries the run's structure does not place where they claim to be (evaluators/structure.py):
    # not folded, reported by replay and verify as ``injected``.
    injected: list[Finding] = field(default_factory=list)


def new_state(run_id: str | None = None) -> FoldState:
    """An empty state; with ``run_id`` None the run of the first entry that names one is used."""
    return FoldState(run_id=run_id)
