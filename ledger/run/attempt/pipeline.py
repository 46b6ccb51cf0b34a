"""One attempt, worker side, as a pipeline of steps: prepare, agent, collect, grade."""

from __future__ import annotations

import contextlib
from typing import Any

from ledger.errors import LedgerError
from ledger.run.attempt.agent import discard, prepare_agent, prepare_isolated, run_agent
from ledger.run.attempt.canaries import attempt_canaries
from ledger.run.attempt.commands import DEFAULT_TEST_TIMEOUT_S, SandboxStartFailed, run_suite
from ledger.run.attempt.events import Emit, Out, emit_result, sandbox_failed_data
from ledger.run.attempt.expected import expected_hidden
from ledger.run.attempt.grade import baseline_ids, grade_hidden, grade_isolated, ids_of, limited
from ledger.run.attempt.prepare import (
    baseline_tree,
    commit_ground_truth,
    isolated_of,
    load_plan_task,
    prepare_grading,
    resolve_plan_agent,
)
from ledger.run.background import Background
from ledger.run.contracts import AttemptPlan
from ledger.run.executors.contract import AttemptStopped
from ledger.run.workspace import Workspace, create_workspace, take_diff


def run_attempt(plan: AttemptPlan, emit: Emit, *, stop_guard: Any = None) -> None:
    """Run one attempt and stream its events; always ends with ``attempt.finished``.

    ``stop_guard`` (the worker's signal handler state) is disarmed before clean-up, so a late
    stop request cannot cut the clean-up short.
    """
    out = Out(plan, emit)
    ws: Workspace | None = None
    status, error = "completed", None
    try:
        ws = _run(plan, out)
    except AttemptStopped as stop:
        status, error = stop.status, f"{stop.status} by the coordinator"
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted"
    except SandboxStartFailed as exc:  # the harness's sandbox never ran a grading command
        with contextlib.suppress(Exception):
            out.entry("sandbox.failed", sandbox_failed_data(exc.stage, exc.message))
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
            if ws is not None and not plan.config.get("keep_worktree"):
                with contextlib.suppress(Exception):
                    ws.cleanup()


_CURRENT: dict[str, Workspace] = {}  # so clean-up finds the workspace when _run is cut short


def _run(plan: AttemptPlan, out: Out) -> Workspace:
    from ledger.tasks.loader import load_repo_history

    cfg = plan.config
    task = load_plan_task(plan)
    agent = resolve_plan_agent(plan)
    isolated = isolated_of(cfg)
    out.phase("workspace")
    ws = create_workspace(task, history=load_repo_history(task), shadow_git=isolated)
    _CURRENT[plan.attempt_id] = ws

    commitment, redact = commit_ground_truth(task, cfg)
    out.entry("commitment", {"commitment": commitment})
    canaries = attempt_canaries(task, cfg)
    if canaries is not None:  # committed before the agent starts; their text never journaled
        from attest.canary import commit

        out.entry("canary.commitment", {"canaries": commit(canaries)})

    test_timeout = float(cfg.get("test_timeout_s", DEFAULT_TEST_TIMEOUT_S))
    # Sandboxed, the agent's sandbox and the grading tree (the starting repo, under the
    # attempt's folder that the agent's sandbox does not show) are worked out while the public
    # tests run; those run, as the grading does, with a home and temp folder of their own (the
    # agent's config is being copied into its home meanwhile).
    job = (Background(prepare_isolated, plan, task, agent, ws)
           if isolated and task.regression_command else None)
    # The hidden test ids are collected (when this worker has not yet for the task) while the
    # public tests run: two pytest processes, two cores.
    collect = Background(expected_hidden, plan, task, ws, isolated, test_timeout)
    baseline = None
    try:
        if task.regression_command:  # tasks graded by test ids or a reward file have none
            out.phase("baseline")
            baseline = run_suite(
                baseline_tree(ws) if isolated else ws, "regression", task.regression_command,
                redact=redact, timeout=test_timeout, label="baseline")
            out.entry("test.baseline", baseline)
        prep, grading = (job.result() if job is not None
                         else (prepare_agent(plan, task, agent, ws, isolated=isolated), None))
        ws.ready()
    except BaseException:
        if job is not None:
            discard(job)
        collect.wait()  # its tree is under the attempt's folder, removed next
        raise

    expected = collect.result()
    if expected is not None:  # fixed, and journaled, before the agent starts
        out.entry("grading.expected", expected)
    regression_ids = baseline_ids(baseline)
    out.phase("agent")
    if not run_agent(plan, task, agent, ws, out, redact, prep):
        return ws  # the sandbox never ran the agent: nothing to grade (sandbox.failed says why)

    # From here on the agent process group is gone: ground truth may enter.
    if isolated:
        diff = take_diff(ws, task.repo_dir, redact=redact)
        out.phase("tests")
        grade, policy = grading if grading is not None else prepare_grading(plan, task, ws)
        grade_isolated(plan, task, ws, diff, out, redact, test_timeout, grade, policy,
                        expected=expected, baseline_ids=regression_ids, canaries=canaries)
        out.entry("diff", diff)
        return ws
    diff = take_diff(ws, task.repo_dir, redact=redact)
    out.phase("tests")
    with limited(plan, task, out, None, redact, ws) as wrap:
        grade_hidden(ws, task, out, redact, test_timeout, canaries, wrap=wrap,
                      expected=ids_of(expected))
        if task.regression_command:
            # the agent's own tree: tests it added are collected too (isolated grading drops them)
            emit_result(out, "test.result", run_suite(ws, "regression", task.regression_command,
                                                  redact=redact, timeout=test_timeout, wrap=wrap,
                                                  expected=regression_ids, required="reported",
                                                  extra_allowed=True))
    out.entry("diff", diff)
    return ws
