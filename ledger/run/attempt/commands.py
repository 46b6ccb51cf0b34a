"""Running a task's test commands and completion signals in the worktree (or its grading
sandbox): the data of a ``test.result``, ``test.baseline`` or ``signal.result`` entry.

A pytest command runs with the harness's reporter (``ledger.sandbox.outcomes``) and is judged
by ``evaluators.grading`` from its records; any other command by its exit code."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.agents.contracts import no_filter
from ledger.commandenv import command_env
from ledger.run.attempt.canaries import split_canaries
from ledger.run.attempt.events import Redact
from ledger.run.workspace import Workspace
from ledger.tasks.checks import (  # the one runner and signal check (tasks validate uses them)
    SIGNAL_TIMEOUT_S,
    check_file_signal,
    python_argv,
    run_command,
    signal_argv,
)
from ledger.tasks.model import Signal
from ledger.textbound import bound_text

if TYPE_CHECKING:
    from attest.canary import Derived
    from ledger.sandbox.port import Box

MESSAGE_LIMIT = 500  # bytes of a test failure message
MAX_TESTS = 2000  # per-test outcomes listed per suite (counts are always complete)
DEFAULT_TEST_TIMEOUT_S = SIGNAL_TIMEOUT_S  # the limit tasks validate uses too (ledger.tasks.checks)


def is_pytest(argv: Sequence[str]) -> bool:
    return any(os.path.basename(a) in ("pytest", "py.test") for a in argv)


def first_line(text: str | None, redact: Redact) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return bound_text(redact(line), MESSAGE_LIMIT)[0]


def _reported(report: Any, redact: Redact) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Counts and the per-test list of a reporter's records (bounded, messages redacted)."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    tests: list[dict[str, str]] = []
    for tid, rec in report.tests.items():
        counts[rec["outcome"]] += 1
        if len(tests) < MAX_TESTS:
            item = {"id": tid, "outcome": rec["outcome"],
                    "message": first_line(rec["message"], redact)}
            if rec["reported"] != rec["outcome"]:
                item["reported"] = rec["reported"]
            tests.append(item)
    return counts, tests


@dataclasses.dataclass(frozen=True)
class Boxed:
    """Where the commands of one step run: a box of the Sandbox port (``ledger.sandbox.port``),
    the ``Enforcement`` of the attempt's limits they run under (None: none), and the redactor
    the backend's start-failure message passes (``BoxStartFailed``)."""

    box: Box
    limits: Any = None
    redact: Redact = no_filter
    stage: str = "grading"
    capture: Any = None  # the grading capture (``ledger.run.attempt.gradetrace``): strace outside


def unconfined(ws: Workspace) -> Boxed:
    """The ``none`` backend's box over ``ws``: commands run as they are, no limits."""
    from ledger.sandbox.port import GradingRequest
    from ledger.sandbox.registry import get

    return Boxed(get("none").grading_box(GradingRequest(ws.worktree, ws.home, ws.scratch)))


def _run_boxed(boxed: Boxed, argv: list[str], *, cwd: Path, env: Mapping[str, str],
               timeout: float, output: Path,
               pass_fds: Sequence[int] = ()) -> tuple[int, float, bool]:
    """``run_command`` of ``argv`` in the box; a box that never ran it is ``BoxStartFailed``
    (the harness's failure, never the graded code's)."""
    from ledger.sandbox.port import BoxStartFailed

    confined = boxed.box.command(argv, env, limits=boxed.limits)
    command = list(confined.argv)
    if boxed.capture is not None:  # ``strace ... --`` the confined command, labelled by argv
        command = boxed.capture.wrap(lambda _argv: list(confined.argv))(argv)
    code, duration, timed_out = run_command(
        command, cwd=cwd, env=confined.env, timeout=timeout, output=output,
        pass_fds=(*pass_fds, *confined.pass_fds), preexec=confined.preexec)
    try:
        head = output.read_bytes()[:4096].decode("utf-8", "replace") if output.exists() else ""
    except OSError:
        head = ""
    failure = boxed.box.failure(None if timed_out else code, head)
    if failure is not None and not timed_out:
        raise BoxStartFailed(boxed.stage, boxed.redact(failure), backend=boxed.box.backend)
    return code, duration, timed_out


def run_suite(ws: Workspace, suite: str, command: Sequence[str], *, redact: Redact,
              timeout: float, label: str | None = None,
              extra_env: Mapping[str, str] | None = None, boxed: Boxed | None = None,
              expected: Sequence[str] | None = None, required: str = "passed",
              collect_only: bool = False, extra_allowed: bool = False,
              canaries: Derived | None = None,
              canary_out: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Run a test command in the worktree: the data of a ``test.result`` (or baseline) entry.

    A pytest command runs with the harness's reporter (``ledger.sandbox.outcomes``), whose
    records arrive over an inherited pipe; ``evaluators.grading.suite_verdict`` decides from
    them and ``expected`` (the ids fixed before the agent started). Any other command's exit
    code decides (``outcomes: "exit-code"``). ``boxed``: the box (and limits) it runs in
    (default: unconfined). With ``canaries`` (test canaries mixed into the
    session) their records are taken out before anything else sees the report: ``canary_out``
    gets their outcomes, the entry only their counts (``canaries``)."""
    from evaluators.grading import recorded_tests, suite_verdict
    from ledger.sandbox.outcomes import ReportChannel, pytest_args

    boxed = boxed or unconfined(ws)
    argv = python_argv(command)
    env = {**command_env(home=ws.home, scratch=ws.scratch), **(extra_env or {})}
    log = ws.scratch / f"{label or suite}.log"
    if not is_pytest(argv):
        code, duration, timed_out = _run_boxed(boxed, argv, cwd=ws.worktree, env=env,
                                                 timeout=timeout, output=log)
        return {"suite": suite, "command": list(command), "exit_code": code, "passed": code == 0,
                "duration_s": round(duration, 6), "outcomes": "exit-code", "timed_out": timed_out,
                "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0}, "tests": []}
    channel = ReportChannel()
    try:
        argv = [*argv, *pytest_args(), *(["--collect-only", "-q"] if collect_only else [])]
        code, duration, timed_out = _run_boxed(
            boxed, argv, cwd=ws.worktree, env={**env, **channel.env()}, timeout=timeout,
            output=log, pass_fds=channel.pass_fds)
        report = channel.collect()
    except BaseException:
        channel.close()
        raise
    report.tests, seen, canary_counts = split_canaries(report.tests, canaries)
    if canary_out is not None:
        canary_out.update(seen)
    counts, tests = _reported(report, redact)
    summary = report.summary()
    data: dict[str, Any] = {
        "suite": suite,
        "command": list(command),
        "exit_code": code,
        "duration_s": round(duration, 6),
        "outcomes": "reporter",
        "timed_out": timed_out,
        "report": summary,
        "counts": counts,
        "tests": tests,
    }
    if canary_counts is not None:
        data["canaries"] = canary_counts
    if collect_only:
        data["collected"] = list(report.collected)
        data["passed"] = report.ended and code == 0 and bool(report.collected)
        return data
    verdict = suite_verdict(exit_code=code, timed_out=timed_out, report=summary,
                            tests=recorded_tests(tests) if len(report.tests) <= MAX_TESTS else {
                                t: (r["outcome"], r["reported"]) for t, r in report.tests.items()},
                            expected=expected, required=required, extra_allowed=extra_allowed,
                            canaries=canary_counts)
    data["passed"] = verdict.passed
    if extra_allowed:
        data["extra_allowed"] = True
    if expected is not None:
        data["expected"] = len(expected)
    if verdict.anomalies:
        data["anomalies"] = verdict.as_data()
    return data


def run_signal(ws: Workspace, index: int, sig: Signal, *, redact: Redact,
               timeout: float, boxed: Boxed | None = None,
               log_name: str | None = None) -> dict[str, Any]:
    """Evaluate one completion signal: the data of a ``signal.result`` entry.

    A ``python -c`` signal runs under the end-record wrapper (``ledger.sandbox.outcomes``): it
    passes only when its code ran to its end (``outcomes: "end-record"``); other commands by
    their exit code (``"exit-code"``). ``log_name``: the scratch log's name (default
    ``signal-<index>.log``)."""
    from evaluators.grading import signal_verdict
    from ledger.sandbox.outcomes import ReportChannel, python_c_code
    from ledger.sandbox.outcomes import signal_argv as wrapped

    extra: dict[str, Any] = {}
    boxed = boxed or unconfined(ws)
    if sig.kind == "command":
        argv = signal_argv(sig)
        log = ws.scratch / (log_name or f"signal-{index}.log")
        env = command_env(home=ws.home, scratch=ws.scratch)
        if python_c_code(argv) is not None:
            argv, more = wrapped(argv)
            channel = ReportChannel()
            try:
                code, duration, timed_out = _run_boxed(
                    boxed, list(argv), cwd=ws.worktree, env={**env, **more, **channel.env()},
                    timeout=timeout, output=log, pass_fds=channel.pass_fds)
                report = channel.collect()
            except BaseException:
                channel.close()
                raise
            verdict = signal_verdict(exit_code=code, expect_exit=sig.expect_exit,
                                     timed_out=timed_out, ended=report.ended,
                                     exitstatus=report.exitstatus)
            passed = verdict.passed
            extra = {"outcomes": "end-record", "exit_code": code, "timed_out": timed_out,
                     "duration_s": round(duration, 6),
                     "ended": report.ended, "exitstatus": report.exitstatus}
            if verdict.anomalies:
                extra["anomalies"] = verdict.as_data()
        else:
            code, duration, timed_out = _run_boxed(
                boxed, list(argv), cwd=ws.worktree, env=env, timeout=timeout, output=log)
            passed = code == sig.expect_exit and not timed_out
            extra = {"outcomes": "exit-code", "exit_code": code, "timed_out": timed_out,
                     "duration_s": round(duration, 6)}
        detail = f"exit {code}, expected {sig.expect_exit}" + (" (timed out)" if timed_out else "")
        if extra.get("anomalies"):
            detail += "; " + extra["anomalies"][0]["detail"]
        if not passed:
            tail = log.read_bytes()[-2000:].decode("utf-8", "replace").strip().splitlines()
            if tail:
                detail += ": " + first_line(tail[-1], redact)
    else:
        passed, detail = check_file_signal(sig, ws.worktree)
    return {"index": index, "signal": sig.as_dict(), "passed": passed, "detail": detail, **extra}
