"""The grade step: the hidden tests (canaries mixed in), the completion signals, the signal
canaries and the regression suite, under the attempt's limits and (sandboxed) in a fresh
grading sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ledger.agents.contracts import no_filter
from ledger.run.attempt.canaries import signal_claim, signal_runs
from ledger.run.attempt.collect import Graded
from ledger.run.attempt.commands import Boxed, run_signal, run_suite
from ledger.run.attempt.events import Out, Redact, emit_result, limit_hits
from ledger.run.attempt.prepare import Attempt, attempt_limits
from ledger.run.workspace import Workspace, install_hidden_tests, remove_tree
from ledger.tasks.model import Signal, Task

if TYPE_CHECKING:
    from attest.canary import Canary, Derived
    from ledger.sandbox.port import Box


def _capture(att: Attempt, tree: Workspace, sandboxed: bool, traceable: bool = True) -> Any:
    """The grading capture of ``tree`` (``ledger.run.attempt.gradetrace``): on when the attempt's
    trace mode is strace (the agent's capture) unless the run turned it off (``grading_trace:
    false``, the benchmark's baseline), its scope the tree and the hidden paths."""
    from ledger.agents.process import resolve_trace
    from ledger.run.attempt.gradetrace import GradingCapture, grading_scope
    from ledger.run.attempt.prepare import hidden_for

    task = att.task
    scope = grading_scope(tree=tree.worktree, hidden_dir=task.hidden_tests_dir,
                          private=[tree.home, tree.scratch], secret=hidden_for(task, att.settings))
    on = resolve_trace(att.plan.trace)[0] == "strace" and att.settings.grading_trace
    return GradingCapture(scratch=tree.scratch, scope=scope, sandboxed=sandboxed, enabled=on,
                          traceable=traceable)


@contextlib.contextmanager
def limited(att: Attempt, box: Box, tree: Workspace) -> Iterator[Boxed]:
    """The grading commands in ``box`` under the attempt's limits (one cgroup for all of them),
    each under the grading capture; ``limit.hit`` entries (phase ``grading``) for what they ran
    into, then the ``grading.trace`` entry (when every grading command ran: a box that never
    started is ``sandbox.failed`` instead). Closes the box."""
    enf = box.enforcement(attempt_limits(att.settings, att.task), label="grading")
    capture = _capture(att, tree, sandboxed=box.isolated,
                       traceable=getattr(box, "captures_trace", True) is not False)
    try:
        yield Boxed(box, limits=enf, redact=att.redact, capture=capture)
        hits = enf.hits()
    finally:
        box.close()
        enf.close()
    limit_hits(att.out, "grading", hits)
    att.out.entry("grading.trace", capture.record())


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
                  boxed: Boxed | None = None, expected: Sequence[str] | None = None,
                  canaries: Derived | None = None,
                  canary_out: dict[str, tuple[str, str]] | None = None,
                  label: str | None = None) -> dict[str, Any]:
    """The hidden suite; a grading command with a reward file is judged by the reward it wrote."""
    from ledger.tasks.apply import hidden_env, read_reward, reward_passes

    verifier = ws.scratch / "verifier"
    if verifier.is_dir() and not verifier.is_symlink():  # emptied, not replaced: a box that
        for child in list(verifier.iterdir()):         # started mounts this very folder
            remove_tree(child)
    else:
        remove_tree(verifier)
        verifier.mkdir(mode=0o700)
    if task.grading is not None and task.grading.timeout_s:
        timeout = task.grading.timeout_s
    result = run_suite(ws, "hidden", task.hidden_test_command, redact=redact, timeout=timeout,
                       label=label, extra_env=hidden_env(task, ws.worktree, verifier), boxed=boxed,
                       expected=expected, canaries=canaries, canary_out=canary_out)
    if task.grading is not None and task.grading.reward_file is not None:
        reward, _detail = read_reward(verifier, task.grading.reward_file)
        result["reward"] = reward
        result["passed"] = reward_passes(reward)
        result["outcomes"] = "reward-file"
        result.pop("anomalies", None)
    return result


def _signal_results(ws: Workspace, runs: Sequence[tuple[int, Canary | None]],
                    sigs: Sequence[Signal], redact: Redact, timeout: float,
                    boxed: Boxed | None) -> list[dict[str, Any]]:
    """The ``signal.result`` data of every run, in order: with a signal canary among them and
    every run a ``python -c`` signal, one series in one sandboxed, traced interpreter
    (``signalseries``: real and canary runs alike); otherwise one process each. A canary's
    detail is not redacted (it never enters the journal)."""
    from ledger.run.attempt.signalseries import SERIES_BACKENDS, run_series, series_jobs

    redacts = [redact if c is None else no_filter for _i, c in runs]
    plan = None
    if boxed is not None and boxed.box.backend in SERIES_BACKENDS and any(
            c is not None for _i, c in runs):
        plan = series_jobs(sigs, timeout)
    if plan is not None:
        return run_series(ws, [(i, sig, r) for (i, _c), sig, r in zip(runs, sigs, redacts,
                                                                       strict=True)],
                          timeout=timeout, boxed=boxed, python=plan[0], jobs=plan[1])
    return [run_signal(ws, i, sig, redact=r, timeout=timeout, boxed=boxed,
                       log_name=f"signal-{turn}.log")
            for turn, ((i, _c), sig, r) in enumerate(zip(runs, sigs, redacts, strict=True))]


def own_command(ws: Workspace, task: Task, redact: Redact, timeout: float, canaries: Derived,
                boxed: Boxed | None, expected: Sequence[str] | None
                ) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """A task graded by its own command (no reporter tells ids apart): (its real hidden run, per
    test canary its outcome and its original's). The canary run is one more run of the command
    with every test canary's file installed over fresh hidden tests; it passes when its reward
    (or exit code) does, and every test canary then shares its claim, the real run's claim its
    original's. The two run in the order the key picks (``attest.canary.command_first``); the
    hidden tests are installed afresh before each, the canary run's output never journaled."""
    from attest.canary import command_first
    from ledger.tasks import canaries as tc

    runs: dict[str, dict[str, Any]] = {}
    for which in (("canary", "real") if command_first(canaries) else ("real", "canary")):
        install_hidden_tests(ws, task)
        if which == "canary":
            tc.install(canaries, task, ws.worktree)
            runs[which] = _hidden_suite(ws, task, no_filter, timeout, boxed=boxed,
                                        label="hidden-canary")
        else:
            runs[which] = _hidden_suite(ws, task, redact, timeout, boxed=boxed, expected=expected)
    install_hidden_tests(ws, task)
    claim = {k: "passed" if r.get("passed") else "failed" for k, r in runs.items()}
    return runs["real"], {c.key: (claim["canary"], claim["real"]) for c in canaries.tests}


def grade_hidden(ws: Workspace, task: Task, out: Out, redact: Redact, timeout: float,
                 canaries: Derived | None, boxed: Boxed | None = None,
                 expected: Sequence[str] | None = None) -> None:
    """Hidden tests (with the test canaries mixed in), the signals and the signal canaries in
    the key's order (``signal_runs``; each run's scratch log named by its turn only): the
    ``signal.result`` entries, the hidden ``test.result`` (real tests only, the canaries
    counted in its ``canaries`` map) and the ``canary.result`` (outcomes by committed item, no
    name or text)."""
    from ledger.tasks import canaries as tc

    install_hidden_tests(ws, task)
    own = canaries is not None and task.grading is not None and bool(canaries.tests)
    if canaries is not None and not own:
        tc.install(canaries, task, ws.worktree)
    claims: dict[int, str] = {}
    mine: list[tuple[Canary, str]] = []
    runs = signal_runs(task, canaries)
    sigs = [task.signals[i] if c is None else tc.signal_of(c, task) for i, c in runs]
    for (index, c), sig, res in zip(runs, sigs, _signal_results(
            ws, runs, sigs, redact, timeout, boxed), strict=True):
        if c is None:
            emit_result(out, "signal.result", res)
            claims[index] = signal_claim(res, sig)
        else:
            mine.append((c, signal_claim(res, sig)))
    seen: dict[str, tuple[str, str]] = {
        c.key: (claim, claims.get(int(c.name.split(":")[1]), "missing")) for c, claim in mine}
    if own and canaries is not None:
        hidden, by_test = own_command(ws, task, redact, timeout, canaries, boxed, expected)
        seen.update(by_test)
    else:
        hidden = _hidden_suite(ws, task, redact, timeout, boxed=boxed, expected=expected,
                               canaries=canaries, canary_out=seen)
    emit_result(out, "test.result", hidden)
    if canaries is None:
        return
    from attest.canary import result

    out.entry("canary.result", {"canaries": result(
        canaries, seen, exit_code=hidden.get("exit_code"),
        session=str(hidden.get("outcomes") or "reporter"))})


def grade(att: Attempt, target: Graded, *, expected: Mapping[str, Any] | None,
          regression_ids: Sequence[str] | None, canaries: Derived | None) -> None:
    """Grade the attempt in ``target`` (``collect``), whatever the sandbox: the ``grading``
    record when the graded changes were carried into a grading tree, then, under the attempt's
    limits and (sandboxed) in a new grading sandbox, the hidden tests, signals and canaries
    (``grade_hidden``) and the regression suite. In the agent's own tree (no sandbox) the
    tests the agent added are collected beside the baseline's (``extra_allowed``); nothing
    the agent started is alive (its process group, or its PID namespace, ended with it)."""
    if target.record is not None:
        att.out.entry("grading", target.record)
    task, out, redact = att.task, att.out, att.redact
    with limited(att, target.box, target.tree) as boxed:
        grade_hidden(target.tree, task, out, redact, att.test_timeout, canaries, boxed=boxed,
                     expected=ids_of(expected))
        if task.regression_command:
            emit_result(out, "test.result", run_suite(
                target.tree, "regression", task.regression_command, redact=redact,
                timeout=att.test_timeout, boxed=boxed, expected=regression_ids,
                required="reported", extra_allowed=target.own_tree))
