"""One attempt, worker side, as a pipeline of steps: prepare, agent, collect, grade."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.run.attempt.agent import Prepared, discard, prepare_agent, prepare_ahead, run_agent
from ledger.run.attempt.canaries import attempt_canaries
from ledger.run.attempt.collect import collect
from ledger.run.attempt.commands import DEFAULT_TEST_TIMEOUT_S, run_suite
from ledger.run.attempt.events import Emit, Out, sandbox_failed_data
from ledger.run.attempt.expected import expected_hidden
from ledger.run.attempt.grade import baseline_ids, grade
from ledger.run.attempt.prepare import (
    Attempt,
    baseline_tree,
    commit_ground_truth,
    load_plan_task,
    resolve_plan_agent,
    resolve_sandbox,
)
from ledger.run.background import Background
from ledger.run.contracts import AttemptPlan, AttemptSettings
from ledger.run.executors.protocol import AttemptStopped
from ledger.run.workspace import Workspace, create_workspace
from ledger.sandbox.port import BoxStartFailed

if TYPE_CHECKING:
    from attest.canary import Derived
    from ledger.sandbox.port import Box


def run_attempt(plan: AttemptPlan, emit: Emit, *, stop_guard: Any = None) -> None:
    """Run one attempt and stream its events; always ends with ``attempt.finished``.

    ``stop_guard`` (the worker's signal handler state) is disarmed before clean-up, so a late
    stop request cannot cut the clean-up short.
    """
    out = Out(plan, emit)
    ws: Workspace | None = None
    settings: AttemptSettings | None = None
    status, error = "completed", None
    try:
        settings = plan.settings
        ws = _run(plan, settings, out)
    except AttemptStopped as stop:
        status, error = stop.status, f"{stop.status} by the coordinator"
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted"
    except BoxStartFailed as exc:  # the harness's sandbox never ran a grading command
        with contextlib.suppress(Exception):
            out.entry("sandbox.failed", sandbox_failed_data(exc.stage, exc.message, exc.backend))
        status, error = "error", str(exc)
    except LedgerError as exc:
        status, error = "error", str(exc)
    except Exception as exc:  # a harness bug must not take the worker down
        status, error = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if stop_guard is not None:
            stop_guard.armed = False
        ws = ws or _CURRENT.pop(plan.attempt_id, None)
        _CURRENT.pop(plan.attempt_id, None)
        try:
            out.entry("attempt.finished", {"status": status, "error": error})
        finally:
            # Removing the attempt's folders is housekeeping, not part of the result: it runs
            # after the report (the worker takes no other plan until it is done).
            if ws is not None and not (settings is not None and settings.keep_worktree):
                with contextlib.suppress(Exception):
                    ws.cleanup()


_CURRENT: dict[str, Workspace] = {}  # so clean-up finds the workspace when _run is cut short


def _run(plan: AttemptPlan, settings: AttemptSettings, out: Out) -> Workspace:
    """prepare, agent, collect, grade."""
    att, canaries = _prepare(plan, settings, out)
    prep, grading, expected, regression_ids = _before_agent(att)
    out.phase("agent")
    if not run_agent(att, prep):
        return att.ws  # the sandbox never ran the agent: nothing to grade (sandbox.failed says why)
    # From here on the agent's processes are gone: ground truth may enter.
    diff, target = collect(att, grading)
    out.phase("tests")
    grade(att, target, expected=expected, regression_ids=regression_ids, canaries=canaries)
    out.entry("diff", diff)
    return att.ws


def _prepare(plan: AttemptPlan, settings: AttemptSettings, out: Out
             ) -> tuple[Attempt, Derived | None]:
    """The task, the agent, the workspace, the ``commitment`` and ``canary.commitment``."""
    from ledger.tasks.loader import load_repo_history

    task = load_plan_task(plan, settings)
    agent = resolve_plan_agent(plan, settings)
    from ledger.sandbox.registry import bound

    # a container backend runs the task's image
    image = settings.image
    if image and task.environment is not None:  # its boxes mount the worktree at the task's workdir too
        image = {**image, "workdir": task.environment.workdir}
    backend = bound(resolve_sandbox(settings).mode, image)
    out.phase("workspace")
    ws = create_workspace(task, history=load_repo_history(task), shadow_git=backend.isolated)
    _CURRENT[plan.attempt_id] = ws

    commitment, redact = commit_ground_truth(task, settings)
    out.entry("commitment", {"commitment": commitment})
    canaries = attempt_canaries(task, settings)
    if canaries is not None:  # committed before the agent starts; their text never journaled
        from attest.canary import commit

        out.entry("canary.commitment", {"canaries": commit(canaries)})
    timeout = settings.test_timeout_s
    return Attempt(plan, settings, task, agent, ws, out, redact, backend,
                   DEFAULT_TEST_TIMEOUT_S if timeout is None else timeout), canaries


def _before_agent(att: Attempt) -> tuple[Prepared, tuple[Workspace, Box] | None,
                                          dict[str, Any] | None, list[str] | None]:
    """The baseline (``test.baseline``) and, beside it, the agent's run and the hidden test ids
    (``grading.expected``) worked out: (the prepared agent, the grading tree and policy made
    ahead or None, the expected hidden ids, the regression suite's expected ids)."""
    task, ws, out = att.task, att.ws, att.out
    # Sandboxed, the agent's sandbox and the grading tree (the starting repo, under the
    # attempt's folder that the agent's sandbox does not show) are worked out while the public
    # tests run; those run, as the grading does, with a home and temp folder of their own (the
    # agent's config is being copied into its home meanwhile).
    job = (Background(prepare_ahead, att)
           if att.sandbox.isolated and task.regression_command else None)
    # The hidden test ids are collected (when this worker has not yet for the task) while the
    # public tests run: two pytest processes, two cores.
    collecting = Background(expected_hidden, att)
    baseline = None
    try:
        if task.regression_command:  # tasks graded by test ids or a reward file have none
            out.phase("baseline")
            baseline = run_suite(
                baseline_tree(ws) if att.sandbox.isolated else ws, "regression", task.regression_command,
                redact=att.redact, timeout=att.test_timeout, label="baseline")
            out.entry("test.baseline", baseline)
        prep, grading = job.result() if job is not None else (prepare_agent(att), None)
        ws.ready()
    except BaseException:
        if job is not None:
            discard(job)
        collecting.wait()  # its tree is under the attempt's folder, removed next
        raise
    expected = collecting.result()
    if expected is not None:  # fixed, and journaled, before the agent starts
        out.entry("grading.expected", expected)
    return prep, grading, expected, baseline_ids(baseline)
