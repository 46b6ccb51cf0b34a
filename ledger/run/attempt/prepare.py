"""Preparing an attempt: its task (hash checked), its agent, its ground-truth commitment and
redactor, its limits, its backend, and the grading tree with its box."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.commandenv import command_env
from ledger.errors import TaskError
from ledger.run.attempt.events import Out
from ledger.run.contracts import AttemptPlan, AttemptSettings
from ledger.run.workspace import Workspace, create_grading_tree
from ledger.tasks.model import Task

if TYPE_CHECKING:
    from attest.redact import Redactor
    from ledger.sandbox.port import Box, Sandbox, SandboxStatus


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What every step of one attempt shares, fixed once it is prepared: the plan and its
    settings, the task (hash checked), the agent, the workspace, the outlet and the redactor."""

    plan: AttemptPlan
    settings: AttemptSettings
    task: Task
    agent: Any
    ws: Workspace
    out: Out
    redact: Redactor
    sandbox: Sandbox  # the backend (``ledger.sandbox.port``) its boxes come from; confining
                      # (``isolated``), it grades in a fresh tree
    test_timeout: float  # seconds per test command and signal


def load_plan_task(plan: AttemptPlan, settings: AttemptSettings) -> Task:
    """The task the plan names; its hash must be the one the journal recorded."""
    from ledger.tasks.loader import load_task

    task = load_task(Path(plan.task_root), tier=settings.tier)
    expected = settings.task_hash
    if expected and task.hash != expected:
        raise TaskError(
            f"task {task.id} changed since the run recorded it (hash {task.hash[:12]}..., "
            f"journal says {str(expected)[:12]}...)"
        )
    return task


def attempt_limits(settings: AttemptSettings, task: Task) -> Any:
    """The attempt's ``Limits``: the defaults, ``ledger.toml``'s ``[limits]``, the task's."""
    from ledger.sandbox.limits import resolve_limits

    return resolve_limits(settings.limits, getattr(task, "limits", None))


def baseline_tree(ws: Workspace) -> Workspace:
    """The attempt's worktree with a home and a temp folder for the public tests alone."""
    root = ws.root / "baseline"
    home, scratch = root / "home", root / "scratch"
    for folder in (root, home, scratch):
        folder.mkdir(mode=0o700, exist_ok=True)
    return dataclasses.replace(ws, home=home, scratch=scratch, pending_git=None)


def resolve_sandbox(settings: AttemptSettings) -> SandboxStatus:
    """The backend the coordinator resolved ``--sandbox`` to, checked on this node
    (``ledger.sandbox.registry.resolve``: a named backend that does not work here is
    ``NothingToRun``, exit 3); a container engine is not probed again (see below)."""
    from ledger.errors import EngineFailed
    from ledger.sandbox.port import SandboxStatus
    from ledger.sandbox.registry import is_engine, resolve

    if settings.environment_error:  # the run could not make the task's image: a harness error
        raise EngineFailed(f"the task's environment is not ready: {settings.environment_error}")
    if is_engine(settings.sandbox):
        # No probe container per worker: the plan ran one, and an engine that fails on this
        # node fails the attempt's first box command (sandbox.failed, an infra failure).
        return SandboxStatus(settings.sandbox, settings.sandbox, "probed by the run")
    return resolve(settings.sandbox)


def hidden_for(task: Task, settings: AttemptSettings) -> list[str]:
    from ledger.sandbox.paths import hidden_paths

    return hidden_paths(task.root, settings.sandbox_hidden)


def task_programs(task: Task) -> list[str]:
    """Test programs a task names by absolute path outside the system folders (an imported
    task's virtualenv interpreter): the grading sandbox must be able to read their tree."""
    from ledger.sandbox.paths import outside_system

    return outside_system((task.test_command if task.graded_by_ids else task.hidden_test_command,
                           task.regression_command))


def grading_box(att: Attempt, tree: Workspace) -> Box:
    """The backend's grading box over ``tree``: the tree, its home and scratch writable, the
    task's test programs readable, nothing hidden shown."""
    from ledger.sandbox.port import GradingRequest

    return att.sandbox.grading_box(GradingRequest(
        worktree=tree.worktree, home=tree.home, scratch=tree.scratch,
        hidden=tuple(hidden_for(att.task, att.settings)),
        path_env=command_env(home=tree.home, scratch=tree.scratch)["PATH"], programs=tuple(task_programs(att.task))))


def prepare_grading(att: Attempt) -> tuple[Workspace, Box]:
    """The grading tree (a fresh copy of the task's starting repo, inside the attempt's folder:
    removed with it, after the attempt has reported; no agent's sandbox shows it) and the
    grading box over it. Nothing of the agent's, nothing hidden: it may be made early."""
    tree = create_grading_tree(att.task, parent=att.ws.root)
    return tree, grading_box(att, tree)


def resolve_plan_agent(plan: AttemptPlan, settings: AttemptSettings) -> Any:
    from ledger.agents import resolve_agent

    return resolve_agent(plan.agent_spec, config=settings.named_agents)


_COMMITMENTS: dict[tuple[str, str, bytes], Any] = {}  # a worker's commitments, by task and key
_COMMITMENTS_MAX = 64


def commitment_of(task: Task, key: bytes) -> Any:
    """``commitment_for_task``, kept per worker: it is a function of the task's files (their
    hash, checked against the run's by ``load_plan_task``), its folder and the key."""
    from ledger.tasks.material import commitment_for_task

    cache_key = (task.hash, str(Path(task.root).resolve()), key)
    commitment = _COMMITMENTS.get(cache_key)
    if commitment is None:
        commitment = commitment_for_task(task, key=key)
        if len(_COMMITMENTS) >= _COMMITMENTS_MAX:
            _COMMITMENTS.clear()
        _COMMITMENTS[cache_key] = commitment
    return commitment


def commit_ground_truth(task: Task, settings: AttemptSettings) -> tuple[dict[str, Any], Redactor]:
    """The ground-truth commitment (emitted before the agent) and the redactor built from it."""
    from attest.redact import Redactor

    key = settings.commitment_key
    if key is None or len(key) != 32:
        raise TaskError("the attempt plan carries no commitment key; nothing was run")
    from attest.redact import SecretPattern

    commitment = commitment_of(task, key)
    secrets = [SecretPattern.from_data(p) for p in settings.secret_patterns]
    return commitment.as_data(), Redactor(commitment, key, secrets=secrets)
