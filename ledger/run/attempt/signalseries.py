"""The completion signals and the signal canaries of an attempt as one series: one sandboxed,
traced interpreter that runs them one after the other (``ledger.sandbox.signal_series``), in
place of one interpreter each; each run's ``signal.result`` data is what ``run_signal`` gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger.commandenv import command_env
from ledger.run.attempt.commands import Boxed, _run_boxed, first_line
from ledger.run.attempt.events import Redact
from ledger.run.workspace import Workspace
from ledger.tasks.checks import signal_argv
from ledger.tasks.model import Signal

if TYPE_CHECKING:
    from ledger.sandbox.signal_series import Job

SERIES_BACKENDS = ("bwrap", "none")  # a container box carries one descriptor only (fd 3)


def series_jobs(signals: Sequence[Signal], timeout: float) -> tuple[str, list[Job]] | None:
    """(the interpreter, one job per signal) when every signal is ``python -c`` with the same
    interpreter and there are at least two; None: they run one process each."""
    from ledger.sandbox.outcomes import python_c_code
    from ledger.sandbox.signal_series import Job

    if len(signals) < 2:
        return None
    jobs, pythons = [], set()
    for turn, sig in enumerate(signals):
        argv = signal_argv(sig) if sig.kind == "command" else []
        code = python_c_code(argv)
        if code is None:
            return None
        pythons.add(argv[0])
        jobs.append(Job(turn, code, tuple(argv[3:]), timeout))
    return (pythons.pop(), jobs) if len(pythons) == 1 else None


def run_series(ws: Workspace, runs: Sequence[tuple[int, Signal, Redact]], *, timeout: float,
               boxed: Boxed, python: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Run ``jobs`` (``series_jobs`` of the runs' signals) as one command in ``boxed``; per
    run (its signal index, its signal, the redactor of its detail) the ``signal.result`` data:
    ``outcomes: "end-record"``, passed when its code ran to its end with the expected status and
    its exit code agreed. A run the series never reported (the runner was killed) has no end
    record and the command's exit code."""
    from evaluators.grading import signal_verdict
    from ledger.sandbox.signal_series import SignalSeries

    series = SignalSeries(jobs)
    try:
        env = {**command_env(home=ws.home, scratch=ws.scratch), **series.env()}
        code, _duration, timed_out = _run_boxed(
            boxed, series.argv(python), cwd=ws.worktree, env=env, timeout=series.timeout(),
            output=ws.scratch / "signals.log", pass_fds=series.pass_fds)
        seen = series.collect()
    except BaseException:
        series.close()
        raise
    out = []
    for turn, (index, sig, redact) in enumerate(runs):
        rec = seen.get(turn) or {"exit": code, "timed_out": timed_out, "ended": False,
                                 "exitstatus": None, "s": 0.0, "tail": ""}
        verdict = signal_verdict(exit_code=rec["exit"], expect_exit=sig.expect_exit,
                                 timed_out=rec["timed_out"], ended=rec["ended"],
                                 exitstatus=rec["exitstatus"])
        extra: dict[str, Any] = {"outcomes": "end-record", "exit_code": rec["exit"],
                                 "timed_out": rec["timed_out"], "duration_s": round(rec["s"], 6),
                                 "ended": rec["ended"], "exitstatus": rec["exitstatus"]}
        detail = f"exit {rec['exit']}, expected {sig.expect_exit}" + (
            " (timed out)" if rec["timed_out"] else "")
        if verdict.anomalies:
            extra["anomalies"] = verdict.as_data()
            detail += "; " + extra["anomalies"][0]["detail"]
        if not verdict.passed:
            tail = rec["tail"].strip().splitlines()
            if tail:
                detail += ": " + first_line(tail[-1], redact)
        out.append({"index": index, "signal": sig.as_dict(), "passed": verdict.passed,
                    "detail": detail, **extra})
    return out
