"""The grade step: the hidden tests (canaries mixed in), the completion signals, the signal
canaries and the regression suite, under the attempt's limits and (sandboxed) in a fresh
grading sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ledger.run.attempt.canaries import CANARY_SIGNAL_INDEX, signal_claim
from ledger.run.attempt.commands import SandboxWrap, Wrap, no_wrap, run_signal, run_suite
from ledger.run.attempt.events import Out, Redact, emit_result, limit_hits
from ledger.run.attempt.prepare import attempt_limits
from ledger.run.contracts import AttemptPlan, no_filter
from ledger.run.workspace import Workspace, install_hidden_tests, remove_tree
from ledger.tasks.model import Task

if TYPE_CHECKING:
    from attest.canary import Derived


def _capture(plan: AttemptPlan, task: Task, tree: Workspace, sandboxed: bool) -> Any:
    """The grading capture of ``tree`` (``ledger.sandbox.gradetrace``): on when the attempt's
    trace mode is strace (the agent's capture) unless the run turned it off (``grading_trace:
    false``, the benchmark's baseline), its scope the tree and the hidden paths."""
    from ledger.run.attempt.prepare import hidden_for
    from ledger.run.process import resolve_trace
    from ledger.sandbox.gradetrace import GradingCapture, grading_scope

    scope = grading_scope(tree=tree.worktree, hidden_dir=task.hidden_tests_dir,
                          private=[tree.home, tree.scratch], secret=hidden_for(task, plan.config))
    on = resolve_trace(plan.trace)[0] == "strace" and plan.config.get("grading_trace") is not False
    return GradingCapture(scratch=tree.scratch, scope=scope, sandboxed=sandboxed, enabled=on)


@contextlib.contextmanager
def limited(plan: AttemptPlan, task: Task, out: Out, policy: Any, redact: Redact,
            tree: Workspace) -> Any:
    """The grading commands' wrap under the attempt's limits (one cgroup for all of them):
    a ``SandboxWrap`` into ``policy``, or (no sandbox) the command as it is, each under the
    grading capture; ``limit.hit`` entries (phase ``grading``) for what they ran into, then the
    ``grading.trace`` entry (when every grading command ran: a sandbox that never started is
    ``sandbox.failed`` instead)."""
    from ledger.sandbox.limits import Enforcement

    enf = Enforcement(attempt_limits(plan, task), sandboxed=policy is not None, label="grading")
    wrap: Any
    if policy is not None:
        wrap = SandboxWrap(policy, "grading", redact, limits=enf)
    else:
        def wrap(argv: list[str]) -> list[str]:
            return argv

        wrap.preexec = enf.preexec
    capture = _capture(plan, task, tree, sandboxed=policy is not None)
    try:
        yield capture.wrap(wrap)
        hits = enf.hits()
    finally:
        if isinstance(wrap, SandboxWrap):
            wrap.close()
        enf.close()
    limit_hits(out, "grading", hits)
    out.entry("grading.trace", capture.record())


def ids_of(expected: Mapping[str, Any] | None) -> list[str] | None:
    return list(expected["ids"]) if expected is not None else None


def baseline_ids(baseline: Mapping[str, Any] | None) -> list[str] | None:
    """The regression suite's expected ids: every test the baseline (the starting tree, before
    the agent) reported, when it ran under the reporter to its end with every id listed."""
    if (baseline is None or baseline.get("outcomes") != "reporter"
            or not (baseline.get("report") or {}).get("ended")
            or sum(baseline["counts"].values()) != len(baseline["tests"])):
        return None
    return [t["id"] for t in baseline["tests"]]


def _hidden_suite(ws: Workspace, task: Task, redact: Redact, timeout: float,
                  wrap: Wrap = no_wrap, expected: Sequence[str] | None = None,
                  canaries: Derived | None = None,
                  canary_out: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The hidden suite; a grading command with a reward file is judged by the reward it wrote."""
    from ledger.tasks.apply import hidden_env, read_reward, reward_passes

    verifier = ws.scratch / "verifier"
    if verifier.exists():
        remove_tree(verifier)
    verifier.mkdir(mode=0o700)
    if task.grading is not None and task.grading.timeout_s:
        timeout = task.grading.timeout_s
    result = run_suite(ws, "hidden", task.hidden_test_command, redact=redact, timeout=timeout,
                       extra_env=hidden_env(task, ws.worktree, verifier), wrap=wrap,
                       expected=expected, canaries=canaries, canary_out=canary_out)
    if task.grading is not None and task.grading.reward_file is not None:
        reward, _detail = read_reward(verifier, task.grading.reward_file)
        result["reward"] = reward
        result["passed"] = reward_passes(reward)
        result["outcomes"] = "reward-file"
        result.pop("anomalies", None)
    return result


def grade_hidden(ws: Workspace, task: Task, out: Out, redact: Redact, timeout: float,
                  canaries: Derived | None, wrap: Wrap = no_wrap,
                  expected: Sequence[str] | None = None) -> None:
    """Hidden tests (with the test canaries mixed in), the signals, the signal canaries: the
    ``signal.result`` entries, the hidden ``test.result`` (real tests only, the canaries
    counted in its ``canaries`` map) and the ``canary.result`` (outcomes by committed item, no
    name or text)."""
    from ledger.tasks import canaries as tc

    install_hidden_tests(ws, task)
    if canaries is not None:
        tc.install(canaries, task, ws.worktree)
    claims: dict[int, str] = {}
    for index, sig in enumerate(task.signals):
        res = run_signal(ws, index, sig, redact=redact, timeout=timeout, wrap=wrap)
        emit_result(out, "signal.result", res)
        claims[index] = signal_claim(res, sig)
    seen: dict[str, tuple[str, str]] = {}
    for k, c in enumerate(canaries.signals if canaries is not None else ()):
        sig = tc.signal_of(c, task)
        res = run_signal(ws, CANARY_SIGNAL_INDEX + k, sig, redact=no_filter, timeout=timeout,
                         wrap=wrap)
        seen[c.key] = (signal_claim(res, sig), claims.get(int(c.name.split(":")[1]), "missing"))
    hidden = _hidden_suite(ws, task, redact, timeout, wrap=wrap, expected=expected,
                           canaries=canaries, canary_out=seen)
    emit_result(out, "test.result", hidden)
    if canaries is None:
        return
    from attest.canary import result

    out.entry("canary.result", {"canaries": result(
        canaries, seen, exit_code=hidden.get("exit_code"),
        session=str(hidden.get("outcomes") or "reporter"))})


def grade_isolated(plan: AttemptPlan, task: Task, ws: Workspace, diff: Mapping[str, Any],
                    out: Out, redact: Redact, test_timeout: float, grade: Workspace,
                    policy: Any, *, expected: Mapping[str, Any] | None = None,
                    baseline_ids: Sequence[str] | None = None,
                    canaries: Derived | None = None) -> None:
    """Grade in ``grade`` under ``policy`` (``prepare_grading``), a new sandbox: the agent's
    graded changes (``ledger.sandbox.grading``), then the hidden tests; nothing the agent
    started is alive (its PID namespace ended with it)."""
    from ledger.sandbox.grading import apply_changes, graded_changes

    graded, dropped = graded_changes(
        diff.get("files") or [], owned=task.owned_files, hidden_dir=task.hidden_tests_dir,
        repo_dir=task.repo_dir, worktree=ws.worktree)
    dropped += apply_changes(graded, source=ws.worktree, target=grade.worktree)
    lost = {d["path"] for d in dropped}
    out.entry("grading", {
        "isolation": "sandbox",
        "graded": [f["path"] for f in graded if f["path"] not in lost],
        "dropped": [{"path": redact(d["path"]), "reason": d["reason"]} for d in dropped],
        "sandbox": policy.as_data(),
    })
    with limited(plan, task, out, policy, redact, grade) as wrap:
        grade_hidden(grade, task, out, redact, test_timeout, canaries, wrap=wrap,
                      expected=ids_of(expected))
        if task.regression_command:
            emit_result(out, "test.result", run_suite(grade, "regression", task.regression_command,
                                                  redact=redact, timeout=test_timeout, wrap=wrap,
                                                  expected=baseline_ids, required="reported"))
