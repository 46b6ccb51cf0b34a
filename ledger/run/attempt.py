"""One attempt, worker side: a picklable ``AttemptPlan`` in, ``AttemptEvent``s streamed out.

    load task (hash must match the plan)   resolve agent
    workspace: fresh worktree, fresh git history          (ground truth stays outside)
    commitment      ---> emitted BEFORE the agent starts
    canary.commitment    (the attempt's canaries, committed by item; attest/canary.py)
    test.baseline   ---> the regression command, before the agent
    agent.started, activity..., agent.finished
    hidden tests copied in as tests_hidden/ (only now)
    canaries written over the hidden tests (test canaries mixed into their files)
    signal.result*, (signal canaries), test.result (hidden, real tests only), canary.result,
    test.result (regression)
    diff            (taken right after the agent, before the hidden tests entered)
    attempt.finished

Every text captured from the agent or the tests passes the attempt's redactor (built from the
ground-truth commitment) before it is emitted, so no hidden test or solution text reaches the
journal. ``agent.started`` reports the folders the attempt used (worktree, home, scratch), what
the agent may read besides system paths (interpreter, harness, its own program files) and its
model API endpoints, resolved on this node just before the agent starts (``resolve_endpoints``:
every host at once, 2 s in all; a failure or a timeout is recorded, never waited out). The
coordinator's attestation scan takes its scope from there: it allows exactly those folders, names
and addresses. Commands that the task calls ``python`` run with ``sys.executable``. The
coordinator stops an attempt by raising ``AttemptStopped`` in this process (see executors/contract.py);
clean-up then kills whatever the attempt started and the attempt still reports
``attempt.finished``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import socket
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError, TaskError
from ledger.run.background import Background
from ledger.run.contracts import (
    AttemptContext,
    AttemptEvent,
    AttemptPlan,
    CaptureFilter,
    no_filter,
)
from ledger.run.executors.contract import AttemptStopped
from ledger.run.process import bound_text
from ledger.run.workspace import (
    Workspace,
    create_grading_tree,
    create_workspace,
    install_hidden_tests,
    remove_tree,
    take_diff,
)
from ledger.tasks.checks import (  # the one runner and signal check (tasks validate uses them)
    SIGNAL_TIMEOUT_S,
    check_file_signal,
    python_argv,
    run_command,
    signal_argv,
)
from ledger.tasks.model import Signal, Task

if TYPE_CHECKING:
    from attest.canary import Derived
    from attest.redact import Redactor

TEXT_LIMIT = 64 * 1024  # bytes of captured text per entry
MESSAGE_LIMIT = 500  # bytes of a test failure message
MAX_TESTS = 2000  # per-test outcomes listed per suite (counts are always complete)
DEFAULT_TEST_TIMEOUT_S = SIGNAL_TIMEOUT_S  # the limit tasks validate uses too (ledger.tasks.checks)
DEMO_STEPS_NAME = ".ledger-demo-steps.json"  # in the attempt's private home
RESOLVE_TIMEOUT_S = 2.0  # for all of an agent's endpoints together
MAX_ADDRESSES = 32  # per endpoint host

Emit = Callable[[AttemptEvent], None]
Redact = CaptureFilter  # text -> text, applied to every captured text before it is emitted
Resolver = Callable[[str, int], Sequence[str]]  # (host, port) -> addresses; raises on failure


class _Out:
    """Adds the attempt id to every event and sends it to the coordinator."""

    def __init__(self, plan: AttemptPlan, emit: Emit) -> None:
        self.plan = plan
        self._emit = emit

    def entry(self, kind: str, data: Mapping[str, Any]) -> None:
        # ``at``: when the worker captured the event (unix ns); the envelope ``ts`` is append time.
        self._emit(AttemptEvent(self.plan.attempt_id, self.plan.task_id, kind,
                                {"attempt": self.plan.attempt_id, "at": time.time_ns(), **data}))

    def phase(self, name: str, **extra: Any) -> None:
        self._emit(AttemptEvent(self.plan.attempt_id, self.plan.task_id, "phase",
                                {"phase": name, **extra}))


# --------------------------------------------------------------------------- commands


def tool_env(ws: Workspace) -> dict[str, str]:
    """The environment for tests and signals: the harness's Python first, a private HOME, and
    none of the user's secrets."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    return {
        "PATH": path,
        "HOME": str(ws.home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(ws.scratch),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        # Task tests are plain pytest: the harness's own plugins (hypothesis, ...) are not loaded.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def _is_pytest(argv: Sequence[str]) -> bool:
    return any(os.path.basename(a) in ("pytest", "py.test") for a in argv)


def _first_line(text: str | None, redact: Redact) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return bound_text(redact(line), MESSAGE_LIMIT)[0]


def parse_junit(path: Path, redact: Redact) -> tuple[dict[str, int], list[dict[str, str]]] | None:
    """Per-test outcomes from a pytest JUnit XML report; None when there is no usable report.
    (The bench's checks read one; grading never does: a report file is forgeable.)"""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    tests: list[dict[str, str]] = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        test_id = f"{classname}::{name}" if classname else name
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = child.get("message") or (child.text or "")
                if outcome in ("failed", "error"):
                    break
        counts[outcome] += 1
        if len(tests) < MAX_TESTS:
            tests.append({"id": test_id, "outcome": outcome, "message": _first_line(message, redact)})
    return counts, tests


Wrap = Callable[[list[str]], list[str]]  # argv -> the argv that runs it in a sandbox


def _no_wrap(argv: list[str]) -> list[str]:
    return argv


def _reported(report: Any, redact: Redact) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Counts and the per-test list of a reporter's records (bounded, messages redacted)."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    tests: list[dict[str, str]] = []
    for tid, rec in report.tests.items():
        counts[rec["outcome"]] += 1
        if len(tests) < MAX_TESTS:
            item = {"id": tid, "outcome": rec["outcome"],
                    "message": _first_line(rec["message"], redact)}
            if rec["reported"] != rec["outcome"]:
                item["reported"] = rec["reported"]
            tests.append(item)
    return counts, tests


class SandboxStartFailed(LedgerError):
    """The grading sandbox never ran its command (bwrap's message): the harness's failure."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"the {stage} sandbox did not start: {message}")
        self.stage = stage
        self.message = message


class SandboxWrap:
    """A ``Wrap`` into ``policy``'s sandbox that tells a sandbox that never started from a
    command that failed (``ledger.sandbox.bwrap.StartStatus``): ``run_command`` gets its
    ``pass_fds``, then ``check`` raises ``SandboxStartFailed`` with bwrap's message."""

    def __init__(self, policy: Any, stage: str, redact: Redact, limits: Any = None) -> None:
        self.policy, self.stage, self.redact = policy, stage, redact
        self._status: Any = None
        self.limits = limits  # an ``Enforcement``: its init script and preexec (the limits)
        self.preexec = limits.preexec if limits is not None else None

    def __call__(self, argv: list[str]) -> list[str]:
        from ledger.sandbox.bwrap import StartStatus, bwrap_command

        if self._status is not None:
            self._status.close()
        self._status = StartStatus()
        init = self.limits.init_script() if self.limits is not None else ()
        return bwrap_command(self.policy, argv, extra=self._status.args(), init=init)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self._status.pass_fds if self._status is not None else ()

    def close(self) -> None:
        if self._status is not None:
            self._status.close()
            self._status = None

    def check(self, code: int, timed_out: bool, log: Path) -> None:
        status, self._status = self._status, None
        if status is None:
            return
        try:
            head = log.read_bytes()[:4096].decode("utf-8", "replace") if log.exists() else ""
        except OSError:
            head = ""
        failure = None if timed_out else status.failure(code, head)
        status.close()
        if failure is not None:
            raise SandboxStartFailed(self.stage, self.redact(failure))


def _run_wrapped(wrap: Wrap, argv: list[str], *, cwd: Path, env: Mapping[str, str],
                 timeout: float, output: Path,
                 pass_fds: Sequence[int] = ()) -> tuple[int, float, bool]:
    """``run_command`` of ``wrap(argv)``; a ``SandboxWrap`` checks that its sandbox started."""
    wrapped = wrap(argv)
    result = run_command(wrapped, cwd=cwd, env=env, timeout=timeout, output=output,
                         pass_fds=(*pass_fds, *getattr(wrap, "pass_fds", ())),
                         preexec=getattr(wrap, "preexec", None))
    if isinstance(wrap, SandboxWrap):
        wrap.check(result[0], result[2], output)
    return result


def run_suite(ws: Workspace, suite: str, command: Sequence[str], *, redact: Redact,
              timeout: float, label: str | None = None,
              extra_env: Mapping[str, str] | None = None, wrap: Wrap = _no_wrap,
              expected: Sequence[str] | None = None, required: str = "passed",
              collect_only: bool = False, extra_allowed: bool = False,
              canaries: Derived | None = None,
              canary_out: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Run a test command in the worktree: the data of a ``test.result`` (or baseline) entry.

    A pytest command runs with the harness's reporter (``ledger.sandbox.outcomes``), whose
    records arrive over an inherited pipe; ``evaluators.grading.suite_verdict`` decides from
    them and ``expected`` (the ids fixed before the agent started). Any other command's exit
    code decides (``outcomes: "exit-code"``). ``wrap`` turns the command line into one that
    runs in the grading sandbox. With ``canaries`` (test canaries mixed into the
    session) their records are taken out before anything else sees the report: ``canary_out``
    gets their outcomes, the entry only their counts (``canaries``)."""
    from evaluators.grading import recorded_tests, suite_verdict
    from ledger.sandbox.outcomes import ReportChannel, pytest_args

    argv = python_argv(command)
    env = {**tool_env(ws), **(extra_env or {})}
    log = ws.scratch / f"{label or suite}.log"
    if not _is_pytest(argv):
        code, duration, timed_out = _run_wrapped(wrap, argv, cwd=ws.worktree, env=env,
                                                 timeout=timeout, output=log)
        return {"suite": suite, "command": list(command), "exit_code": code, "passed": code == 0,
                "duration_s": round(duration, 6), "outcomes": "exit-code", "timed_out": timed_out,
                "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0}, "tests": []}
    channel = ReportChannel()
    try:
        argv = [*argv, *pytest_args(), *(["--collect-only", "-q"] if collect_only else [])]
        code, duration, timed_out = _run_wrapped(
            wrap, argv, cwd=ws.worktree, env={**env, **channel.env()}, timeout=timeout,
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
               timeout: float, wrap: Wrap = _no_wrap) -> dict[str, Any]:
    """Evaluate one completion signal: the data of a ``signal.result`` entry.

    A ``python -c`` signal runs under the end-record wrapper (``ledger.sandbox.outcomes``): it
    passes only when its code ran to its end (``outcomes: "end-record"``); other commands by
    their exit code (``"exit-code"``)."""
    from evaluators.grading import signal_verdict
    from ledger.sandbox.outcomes import ReportChannel, python_c_code
    from ledger.sandbox.outcomes import signal_argv as wrapped

    extra: dict[str, Any] = {}
    if sig.kind == "command":
        argv = signal_argv(sig)
        log = ws.scratch / f"signal-{index}.log"
        env = tool_env(ws)
        if python_c_code(argv) is not None:
            argv, more = wrapped(argv)
            channel = ReportChannel()
            try:
                code, duration, timed_out = _run_wrapped(
                    wrap, list(argv), cwd=ws.worktree, env={**env, **more, **channel.env()},
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
            code, duration, timed_out = _run_wrapped(
                wrap, list(argv), cwd=ws.worktree, env=env, timeout=timeout, output=log)
            passed = code == sig.expect_exit and not timed_out
            extra = {"outcomes": "exit-code", "exit_code": code, "timed_out": timed_out,
                     "duration_s": round(duration, 6)}
        detail = f"exit {code}, expected {sig.expect_exit}" + (" (timed out)" if timed_out else "")
        if extra.get("anomalies"):
            detail += "; " + extra["anomalies"][0]["detail"]
        if not passed:
            tail = log.read_bytes()[-2000:].decode("utf-8", "replace").strip().splitlines()
            if tail:
                detail += ": " + _first_line(tail[-1], redact)
    else:
        passed, detail = check_file_signal(sig, ws.worktree)
    return {"index": index, "signal": sig.as_dict(), "passed": passed, "detail": detail, **extra}


# --------------------------------------------------------------------------- the attempt


def load_plan_task(plan: AttemptPlan) -> Task:
    """The task the plan names; its hash must be the one the journal recorded."""
    from ledger.tasks.loader import load_task

    task = load_task(Path(plan.task_root), tier=plan.config.get("tier"))
    expected = plan.config.get("task_hash")
    if expected and task.hash != expected:
        raise TaskError(
            f"task {task.id} changed since the run recorded it (hash {task.hash[:12]}..., "
            f"journal says {str(expected)[:12]}...)"
        )
    return task


def run_attempt(plan: AttemptPlan, emit: Emit, *, stop_guard: Any = None) -> None:
    """Run one attempt and stream its events; always ends with ``attempt.finished``.

    ``stop_guard`` (the worker's signal handler state) is disarmed before clean-up, so a late
    stop request cannot cut the clean-up short.
    """
    out = _Out(plan, emit)
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


def _run(plan: AttemptPlan, out: _Out) -> Workspace:
    from ledger.tasks.loader import load_repo_history

    cfg = plan.config
    task = load_plan_task(plan)
    agent = _resolve(plan)
    isolated = _isolated(cfg)
    out.phase("workspace")
    ws = create_workspace(task, history=load_repo_history(task), shadow_git=isolated)
    _CURRENT[plan.attempt_id] = ws

    commitment, redact = _commit(task, cfg)
    out.entry("commitment", {"commitment": commitment})
    canaries = _canaries(task, cfg)
    if canaries is not None:  # committed before the agent starts; their text never journaled
        from attest.canary import commit

        out.entry("canary.commitment", {"canaries": commit(canaries)})

    test_timeout = float(cfg.get("test_timeout_s", DEFAULT_TEST_TIMEOUT_S))
    # Sandboxed, the agent's sandbox and the grading tree (the starting repo, under the
    # attempt's folder that the agent's sandbox does not show) are worked out while the public
    # tests run; those run, as the grading does, with a home and temp folder of their own (the
    # agent's config is being copied into its home meanwhile).
    job = (Background(_prepare_isolated, plan, task, agent, ws)
           if isolated and task.regression_command else None)
    # The hidden test ids are collected (when this worker has not yet for the task) while the
    # public tests run: two pytest processes, two cores.
    collect = Background(_expected_hidden, plan, task, ws, isolated, test_timeout)
    baseline = None
    try:
        if task.regression_command:  # tasks graded by test ids or a reward file have none
            out.phase("baseline")
            baseline = run_suite(
                _baseline_tree(ws) if isolated else ws, "regression", task.regression_command,
                redact=redact, timeout=test_timeout, label="baseline")
            out.entry("test.baseline", baseline)
        prep, grading = (job.result() if job is not None
                         else (_prepare_agent(plan, task, agent, ws, isolated=isolated), None))
        ws.ready()
    except BaseException:
        if job is not None:
            _discard(job)
        collect.wait()  # its tree is under the attempt's folder, removed next
        raise

    expected = collect.result()
    if expected is not None:  # fixed, and journaled, before the agent starts
        out.entry("grading.expected", expected)
    baseline_ids = _baseline_ids(baseline)
    out.phase("agent")
    if not _run_agent(plan, task, agent, ws, out, redact, prep):
        return ws  # the sandbox never ran the agent: nothing to grade (sandbox.failed says why)

    # From here on the agent process group is gone: ground truth may enter.
    if isolated:
        diff = take_diff(ws, task.repo_dir, redact=redact)
        out.phase("tests")
        grade, policy = grading if grading is not None else _prepare_grading(plan, task, ws)
        _grade_isolated(plan, task, ws, diff, out, redact, test_timeout, grade, policy,
                        expected=expected, baseline_ids=baseline_ids, canaries=canaries)
        out.entry("diff", diff)
        return ws
    diff = take_diff(ws, task.repo_dir, redact=redact)
    out.phase("tests")
    with _limited(plan, task, out, None, redact) as wrap:
        _grade_hidden(ws, task, out, redact, test_timeout, canaries, wrap=wrap,
                      expected=_ids_of(expected))
        if task.regression_command:
            # the agent's own tree: tests it added are collected too (isolated grading drops them)
            _result(out, "test.result", run_suite(ws, "regression", task.regression_command,
                                                  redact=redact, timeout=test_timeout, wrap=wrap,
                                                  expected=baseline_ids, required="reported",
                                                  extra_allowed=True))
    out.entry("diff", diff)
    return ws


def attempt_limits(plan: AttemptPlan, task: Task) -> Any:
    """The attempt's ``Limits``: the defaults, ``ledger.toml``'s ``[limits]``, the task's."""
    from ledger.sandbox.limits import resolve_limits

    return resolve_limits(plan.config.get("limits"), getattr(task, "limits", None))


def _limit_hits(out: _Out, phase: str, hits: Sequence[Mapping[str, Any]]) -> None:
    for hit in hits:
        out.entry("limit.hit", {"phase": phase, **hit})


@contextlib.contextmanager
def _limited(plan: AttemptPlan, task: Task, out: _Out, policy: Any, redact: Redact) -> Any:
    """The grading commands' wrap under the attempt's limits (one cgroup for all of them):
    a ``SandboxWrap`` into ``policy``, or (no sandbox) the command as it is; ``limit.hit``
    entries (phase ``grading``) for what they ran into."""
    from ledger.sandbox.limits import Enforcement

    enf = Enforcement(attempt_limits(plan, task), sandboxed=policy is not None, label="grading")
    wrap: Any
    if policy is not None:
        wrap = SandboxWrap(policy, "grading", redact, limits=enf)
    else:
        def wrap(argv: list[str]) -> list[str]:
            return argv

        wrap.preexec = enf.preexec
    try:
        yield wrap
        hits = enf.hits()
    finally:
        if isinstance(wrap, SandboxWrap):
            wrap.close()
        enf.close()
    _limit_hits(out, "grading", hits)


def _baseline_tree(ws: Workspace) -> Workspace:
    """The attempt's worktree with a home and a temp folder for the public tests alone."""
    root = ws.root / "baseline"
    home, scratch = root / "home", root / "scratch"
    for folder in (root, home, scratch):
        folder.mkdir(mode=0o700, exist_ok=True)
    return dataclasses.replace(ws, home=home, scratch=scratch, pending_git=None)


def _result(out: _Out, kind: str, data: Mapping[str, Any]) -> None:
    """A ``test.result`` or ``signal.result``, then one ``grading.anomaly`` per anomaly it found."""
    out.entry(kind, data)
    for anomaly in data.get("anomalies") or ():
        where = {"suite": data["suite"]} if kind == "test.result" else {"signal": data["index"]}
        out.entry("grading.anomaly", {**where, "reason": anomaly["reason"],
                                      "detail": anomaly["detail"]})


def _ids_of(expected: Mapping[str, Any] | None) -> list[str] | None:
    return list(expected["ids"]) if expected is not None else None


def _baseline_ids(baseline: Mapping[str, Any] | None) -> list[str] | None:
    """The regression suite's expected ids: every test the baseline (the starting tree, before
    the agent) reported, when it ran under the reporter to its end with every id listed."""
    if (baseline is None or baseline.get("outcomes") != "reporter"
            or not (baseline.get("report") or {}).get("ended")
            or sum(baseline["counts"].values()) != len(baseline["tests"])):
        return None
    return [t["id"] for t in baseline["tests"]]


_EXPECTED: dict[tuple[str, str, bool], dict[str, Any]] = {}  # a worker's collected ids
_EXPECTED_MAX = 64


def _expected_hidden(plan: AttemptPlan, task: Task, ws: Workspace, isolated: bool,
                     timeout: float) -> dict[str, Any] | None:
    """The ``grading.expected`` entry: the hidden test ids fixed before the agent starts.

    A task graded by test ids lists them (FAIL_TO_PASS + PASS_TO_PASS); a pytest hidden suite
    is collected by the harness's reporter in a fresh copy of the starting tree with the hidden
    tests installed (in the grading sandbox when the attempt is sandboxed), or, when a module
    fails to collect there (the tests import what the agent is to write), with the reference
    solution applied. Kept per worker by task hash. None: the task's own runner decides."""
    if not _is_pytest(python_argv(task.hidden_test_command)):
        return None
    if task.graded_by_ids:
        ids = [*task.fail_to_pass, *task.pass_to_pass]
        return {"suite": "hidden", "source": "task", "task_hash": task.hash,
                "count": len(ids), "ids": ids}
    key = (task.hash, str(Path(task.root).resolve()), isolated)
    cached = _EXPECTED.get(key)
    if cached is None:
        cached = _collect_hidden(plan, task, ws, isolated, timeout)
        if len(_EXPECTED) >= _EXPECTED_MAX:
            _EXPECTED.clear()
        _EXPECTED[key] = cached
    return dict(cached)


def _collect_hidden(plan: AttemptPlan, task: Task, ws: Workspace, isolated: bool,
                    timeout: float) -> dict[str, Any]:
    from ledger.tasks.apply import apply_solution, hidden_env

    result: dict[str, Any] = {}
    for source in ("collected", "collected-with-solution"):
        tree = create_grading_tree(task, parent=ws.root)
        try:
            if source == "collected-with-solution":
                apply_solution(task, tree.worktree, env=tool_env(tree))
            install_hidden_tests(tree, task)
            wrap = _no_wrap
            if isolated:
                from ledger.sandbox.setup import grading_policy

                policy = grading_policy(worktree=tree.worktree, home=tree.home,
                                        scratch=tree.scratch, hidden=_hidden(task, plan.config),
                                        path_env=tool_env(tree).get("PATH", ""),
                                        programs=_task_programs(task))
                wrap = SandboxWrap(policy, "grading", _commit(task, plan.config)[1])
            verifier = tree.scratch / "verifier"
            verifier.mkdir(mode=0o700)
            result = run_suite(tree, "hidden", task.hidden_test_command, redact=lambda t: t,
                               timeout=timeout, extra_env=hidden_env(task, tree.worktree, verifier),
                               wrap=wrap, label="collect", collect_only=True)
        finally:
            remove_tree(tree.root)
        if result["report"]["ended"] and not result["report"]["collect_errors"]:
            break
    report = result["report"]
    if not report["ended"] or report["collect_errors"] or not result["collected"]:
        raise TaskError(f"task {task.id}: the hidden tests cannot be collected in the starting "
                        f"tree ({report['collect_errors']} collection error(s), "
                        f"{len(result['collected'])} collected, exit {result['exit_code']}); "
                        "nothing was graded")
    return {"suite": "hidden", "source": source, "task_hash": task.hash,
            "count": len(result["collected"]), "ids": list(result["collected"])}


def _hidden_suite(ws: Workspace, task: Task, redact: Redact, timeout: float,
                  wrap: Wrap = _no_wrap, expected: Sequence[str] | None = None,
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


# --------------------------------------------------------------------------- canaries


CANARY_SIGNAL_INDEX = 1000  # signal canaries' scratch logs: signal-1000.log, ... (never journaled)


def _canaries(task: Task, cfg: Mapping[str, Any]) -> Derived | None:
    """The attempt's canaries (``attest.canary``), chosen under its commitment key; None when
    the run turned them off (``canaries: false``, the benchmark's baseline)."""
    if cfg.get("canaries", True) is False:
        return None
    from ledger.tasks.canaries import derive_for

    key = bytes(cfg["commitment_key"])
    cache_key = (task.hash, str(Path(task.root).resolve()), key)
    derived = _CANARIES.get(cache_key)
    if derived is None:  # a function of the task's files (hash checked) and the key
        derived = derive_for(task, key)
        if len(_CANARIES) >= _COMMITMENTS_MAX:
            _CANARIES.clear()
        _CANARIES[cache_key] = derived
    return derived


_CANARIES: dict[tuple[str, str, bytes], Derived] = {}  # a worker's canaries, by task and key


def _grade_hidden(ws: Workspace, task: Task, out: _Out, redact: Redact, timeout: float,
                  canaries: Derived | None, wrap: Wrap = _no_wrap,
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
        _result(out, "signal.result", res)
        claims[index] = _signal_claim(res, sig)
    seen: dict[str, tuple[str, str]] = {}
    for k, c in enumerate(canaries.signals if canaries is not None else ()):
        sig = tc.signal_of(c, task)
        res = run_signal(ws, CANARY_SIGNAL_INDEX + k, sig, redact=no_filter, timeout=timeout,
                         wrap=wrap)
        seen[c.key] = (_signal_claim(res, sig), claims.get(int(c.name.split(":")[1]), "missing"))
    hidden = _hidden_suite(ws, task, redact, timeout, wrap=wrap, expected=expected,
                           canaries=canaries, canary_out=seen)
    _result(out, "test.result", hidden)
    if canaries is None:
        return
    from attest.canary import result

    out.entry("canary.result", {"canaries": result(
        canaries, seen, exit_code=hidden.get("exit_code"),
        session=str(hidden.get("outcomes") or "reporter"))})


def _signal_claim(res: Mapping[str, Any], sig: Signal) -> str:
    """What a command signal's run claims: its exit code is its claim, so reaching the expected
    one is ``passed`` whether or not its code ran to its end (an early exit is a cheat)."""
    return "passed" if res.get("passed") or res.get("exit_code") == sig.expect_exit else "failed"


def split_canaries(tests: dict[str, Any], canaries: Derived | None
                   ) -> tuple[dict[str, Any], dict[str, tuple[str, str]], dict[str, Any] | None]:
    """(the reporter's real test records, per test canary (``Canary.key``) its outcome and its
    original's, the suite's ``canaries`` counts) of one hidden session. A case counts as passed
    when the test passed or pytest reported it passed (``attest.canary.claimed``); a canary or
    an original passes when every case of it does. ``all_failed``: every canary reported, every
    case of it failed. None counts: no test canaries."""
    from attest.canary import claimed, outcome_of

    if canaries is None or not canaries.tests:
        return tests, {}, None
    real: dict[str, Any] = {}
    own: dict[str, list[str]] = {c.key: [] for c in canaries.tests}
    for tid, rec in tests.items():
        mine = [c for c in canaries.tests if c.matches(tid)]
        if mine:
            own[mine[0].key].append(claimed(rec["outcome"], rec["reported"]))
        else:
            real[tid] = rec
    seen: dict[str, tuple[str, str]] = {}
    for c in canaries.tests:
        originals = [claimed(r["outcome"], r["reported"]) for t, r in real.items() if c.copies(t)]
        mine = own[c.key]
        if mine:
            seen[c.key] = (_all_or_any(mine, outcome_of), _all_or_any(originals, outcome_of))
    failed = sum(1 for outs in own.values() for o in outs if o in ("failed", "error"))
    cases = sum(len(outs) for outs in own.values())
    counts = {"tests": len(canaries.tests), "failed": failed,
              "all_failed": len(seen) == len(canaries.tests) and failed == cases}
    return real, seen, counts


def _all_or_any(outcomes: Sequence[str], pick: Callable[[Sequence[str]], str]) -> str:
    """``passed`` when every case passed; otherwise the worst outcome of the cases."""
    if outcomes and all(o == "passed" for o in outcomes):
        return "passed"
    return pick([o for o in outcomes if o != "passed"]) if outcomes else "missing"


# --------------------------------------------------------------------------- isolation


def _isolated(cfg: Mapping[str, Any]) -> bool:
    """Whether this attempt runs sandboxed: the coordinator resolved ``--sandbox`` to ``bwrap``
    (this node must then have a working bubblewrap: exit 3 otherwise) or to ``none``."""
    mode = cfg.get("sandbox", "none")
    if mode == "none":
        return False
    from ledger.sandbox import sandbox_status

    return sandbox_status("bwrap" if mode == "bwrap" else str(mode)).mode == "bwrap"


def _hidden(task: Task, cfg: Mapping[str, Any]) -> list[str]:
    from ledger.sandbox.setup import hidden_paths

    return hidden_paths(task.root, cfg.get("sandbox_hidden") or ())


def _task_programs(task: Task) -> list[str]:
    """Test programs a task names by absolute path outside the system folders (an imported
    task's virtualenv interpreter): the grading sandbox must be able to read their tree."""
    commands = (task.test_command if task.graded_by_ids else task.hidden_test_command, task.regression_command)
    return [c[0] for c in commands
            if c and c[0].startswith("/") and not c[0].startswith(("/usr/", "/bin/", "/sbin/", "/lib"))]


def _prepare_grading(plan: AttemptPlan, task: Task, ws: Workspace) -> tuple[Workspace, Any]:
    """The grading tree (a fresh copy of the task's starting repo, inside the attempt's folder:
    removed with it, after the attempt has reported; no agent's sandbox shows it) and the
    grading sandbox's policy. Nothing of the agent's, nothing hidden: it may be made early."""
    from ledger.sandbox.setup import grading_policy

    grade = create_grading_tree(task, parent=ws.root)
    policy = grading_policy(worktree=grade.worktree, home=grade.home, scratch=grade.scratch,
                            hidden=_hidden(task, plan.config),
                            path_env=tool_env(grade).get("PATH", ""),
                            programs=_task_programs(task))
    return grade, policy


def _prepare_isolated(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace,
                      ) -> tuple[_Prepared, tuple[Workspace, Any]]:
    """The agent's sandboxed run and the grading tree, both worked out ahead."""
    prep = _prepare_agent(plan, task, agent, ws, isolated=True)
    try:
        return prep, _prepare_grading(plan, task, ws)
    except BaseException:
        prep.discard()
        raise


def _grade_isolated(plan: AttemptPlan, task: Task, ws: Workspace, diff: Mapping[str, Any],
                    out: _Out, redact: Redact, test_timeout: float, grade: Workspace,
                    policy: Any, *, expected: Mapping[str, Any] | None = None,
                    baseline_ids: Sequence[str] | None = None,
                    canaries: Derived | None = None) -> None:
    """Grade in ``grade`` under ``policy`` (``_prepare_grading``), a new sandbox: the agent's
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
    with _limited(plan, task, out, policy, redact) as wrap:
        _grade_hidden(grade, task, out, redact, test_timeout, canaries, wrap=wrap,
                      expected=_ids_of(expected))
        if task.regression_command:
            _result(out, "test.result", run_suite(grade, "regression", task.regression_command,
                                                  redact=redact, timeout=test_timeout, wrap=wrap,
                                                  expected=baseline_ids, required="reported"))


def _agent_sandbox(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace,
                   invocation: Any, endpoints: Sequence[Mapping[str, Any]]
                   ) -> tuple[Any, Any, Any]:
    """(policy, invocation run in it, proxy or None) for a sandboxed agent.

    With a network allowlist (the task's, the agent's declared endpoints) the harness's proxy
    serves the attempt on a unix socket bound into the sandbox, and the agent runs behind the
    in-sandbox forwarder (``ledger.sandbox.net``); without one the sandbox has no network."""
    from ledger.run.scope import endpoint_allowlist
    from ledger.sandbox.setup import agent_policy, copy_config, sandbox_env

    wanted = (plan.config.get("agent_config") or {}).get(getattr(agent, "name", ""), [])
    copied = copy_config(list(wanted), home=ws.home)
    builtin = getattr(agent, "builtin", None) if getattr(agent, "kind", None) == "builtin" else None
    extra: list[str] = []
    hidden = _hidden(task, plan.config)
    if builtin == "oracle":  # the oracle reads the solution: DIRTY by design, and shown to it
        root = _resolved(task.root)
        extra.append(root)
        hidden = [h for h in hidden if not _under(root, h) and not _under(h, root)]
    env = sandbox_env(invocation.env, home=ws.home, scratch=ws.scratch)
    argv = list(invocation.argv)
    allowlist = [*task.network_allowlist, *endpoint_allowlist(list(endpoints))]
    proxy, network, sockets = None, "none", []
    if allowlist:
        from ledger.sandbox import net

        sock = ws.root / "net" / "proxy.sock"
        proxy = net.Proxy(sock, allowlist)
        argv, port = net.forwarder_command(sys.executable, sock, net.loopback_ports(endpoints),
                                           argv)
        env.update(net.proxy_env(port))
        network, sockets = "proxy", [str(sock)]
        extra.append(argv[3])  # the forwarder script, and nothing else of the harness
    try:
        policy = agent_policy(
            worktree=ws.worktree, home=ws.home, scratch=ws.scratch, argv=invocation.argv,
            path_env=env.get("PATH", os.defpath),
            harness_code=builtin is not None or getattr(agent, "kind", None) == "http",
            hidden=hidden, extra_readable=extra, copied_config=copied, network=network,
            sockets=sockets)
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    return policy, dataclasses.replace(invocation, argv=tuple(argv), env=env), proxy


# --------------------------------------------------------------------------- integration points


def _resolve(plan: AttemptPlan) -> Any:
    from ledger.run.agents import resolve_agent

    return resolve_agent(plan.agent_spec, config=plan.config.get("named_agents") or {})


_COMMITMENTS: dict[tuple[str, str, bytes], Any] = {}  # a worker's commitments, by task and key
_COMMITMENTS_MAX = 64


def _commitment(task: Task, key: bytes) -> Any:
    """``commitment_for_task``, kept per worker: it is a function of the task's files (their
    hash, checked against the run's by ``load_plan_task``), its folder and the key."""
    from attest.material import commitment_for_task

    cache_key = (task.hash, str(Path(task.root).resolve()), key)
    commitment = _COMMITMENTS.get(cache_key)
    if commitment is None:
        commitment = commitment_for_task(task, key=key)
        if len(_COMMITMENTS) >= _COMMITMENTS_MAX:
            _COMMITMENTS.clear()
        _COMMITMENTS[cache_key] = commitment
    return commitment


def _commit(task: Task, cfg: Mapping[str, Any]) -> tuple[dict[str, Any], Redactor]:
    """The ground-truth commitment (emitted before the agent) and the redactor built from it."""
    from attest.redact import Redactor

    key = cfg.get("commitment_key")
    if not isinstance(key, bytes | bytearray) or len(key) != 32:
        raise TaskError("the attempt plan carries no commitment key; nothing was run")
    from attest.redact import SecretPattern

    commitment = _commitment(task, bytes(key))
    secrets = [SecretPattern.from_data(p) for p in cfg.get("secret_patterns") or ()]
    return commitment.as_data(), Redactor(commitment, bytes(key), secrets=secrets)


def _agent_extra(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace) -> dict[str, Any]:
    """What a built-in agent needs besides the context (never given to other agents)."""
    extra: dict[str, Any] = dict(plan.config.get("agent_extra") or {})
    if getattr(agent, "kind", None) == "http":  # the HTTP agent stops at the token and cost budgets
        from ledger.run.costs import builtin_pricing, find_price

        extra["max_tokens"] = int(task.max_tokens)
        extra["max_cost_usd"] = float(task.max_cost_usd)
        found = find_price(getattr(agent, "model", None), plan.config.get("pricing") or builtin_pricing())
        if found is not None:
            extra["price_per_mtok"] = [found[1].input_per_mtok, found[1].output_per_mtok]
    builtin = getattr(agent, "builtin", None) if getattr(agent, "kind", None) == "builtin" else None
    if builtin == "oracle":
        extra["task_root"] = str(task.root)  # the oracle reads the solution: DIRTY by design
    elif builtin == "demo":
        # The steps are public demonstration material, handed to the demo agent as its own
        # config: in its private home (readable by the scan policy, never content-captured),
        # not in scratch, where a traced read would journal them as inflow resembling the fix.
        steps = ws.home / DEMO_STEPS_NAME
        steps.write_text(json.dumps(list(task.demo)), encoding="utf-8")
        extra["demo_steps"] = list(task.demo)
        extra["demo_steps_file"] = str(steps)
    return extra


def _resolved(path: Path | str) -> str:
    return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def harness_readable() -> list[str]:
    """Folders every agent on this node may read: the interpreter installation and the harness
    package (what a regular install keeps under the interpreter prefix anyway)."""
    import ledger

    out: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        out += [p, _resolved(p)]
    out.append(_resolved(Path(ledger.__file__).parent))
    return [p for p in dict.fromkeys(out) if p.startswith("/") and p != "/"]


def agent_readable(argv: Sequence[str], ws: Workspace, task: Task) -> list[str]:
    """The agent's own program: files its command line names (outside the worktree and the task
    folder), and the folder of each unless that folder is an ancestor of the worktree; for a
    program in a virtualenv's ``bin/`` (aider, mini-swe-agent), that whole virtualenv."""
    worktree, task_root = _resolved(ws.worktree), _resolved(task.root)
    out: list[str] = []
    for arg in argv:
        if not arg.startswith("/") or "\0" in arg:
            continue
        try:
            if not os.path.isfile(arg):
                continue
        except (OSError, ValueError):
            continue
        real = _resolved(arg)
        if _under(real, worktree) or _under(real, task_root):
            continue
        out.append(real)
        folder = os.path.dirname(real)
        if folder not in ("", "/") and not _under(worktree, folder):
            out.append(folder)
        venv = os.path.dirname(folder)  # a program in a virtualenv's bin/: that virtualenv
        if os.path.basename(folder) == "bin" and os.path.isfile(os.path.join(venv, "pyvenv.cfg")) \
                and venv not in ("", "/") and not _under(worktree, venv) \
                and not _under(task_root, venv):
            out.append(venv)
    return list(dict.fromkeys(out))


def _observed_invocation(invocation: Any, agent: Any, ws: Workspace) -> Any:
    """The invocation with the attempt's own temporary folder (scratch, writable by the scan
    policy). The built-in agents and the HTTP agent (harness code) also get what the harness gives the task's
    commands: the private home, the harness's Python first on PATH (``python`` in a demo step is
    the one ``python`` in the task means), and no bytecode written outside the worktree."""
    env = dict(invocation.env)
    for name in ("TMPDIR", "TMP", "TEMP"):
        env[name] = str(ws.scratch)
    if getattr(agent, "kind", None) in ("builtin", "http"):
        env["HOME"] = str(ws.home)
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                       env.get("PATH", os.defpath)])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return dataclasses.replace(invocation, env=env)


# --------------------------------------------------------------------------- endpoints


def system_resolver(host: str, port: int) -> list[str]:
    """The node's resolver (``getaddrinfo``, TCP): every address, IPv4 and IPv6."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def static_resolver(table: Mapping[str, Sequence[str]], host: str, port: int) -> list[str]:
    """A fixed host table (``functools.partial(static_resolver, {...})``: tests, pinned nodes);
    a host it lacks fails like an unknown name."""
    if host not in table:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return list(table[host])


def _address(text: Any) -> str | None:
    """An address in the form strace prints it (no IPv6 zone); None when it is none."""
    try:
        addr = ipaddress.ip_address(str(text).split("%", 1)[0])
    except ValueError:
        return None
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return None if addr.is_unspecified else addr.compressed


def resolve_endpoints(declared: Sequence[str], *, resolver: Resolver | None = None,
                      timeout: float = RESOLVE_TIMEOUT_S) -> list[dict[str, Any]]:
    """``[{host, port, addresses, error}]`` for the declared endpoints, resolved all at once.

    Each host is looked up in a daemon thread; whatever has not answered ``timeout`` seconds after
    the start is recorded as timed out and left behind, so a dead resolver costs ``timeout`` at
    most. A wildcard (``*.domain``) names no single host: it is recorded unresolved.
    """
    from ledger.run.agents.presets import parse_endpoint

    resolve = resolver or system_resolver
    wanted = list(dict.fromkeys(parse_endpoint(e) for e in declared))
    results: dict[int, tuple[list[str], str | None]] = {}
    lock = threading.Lock()

    def work(i: int, host: str, port: int) -> None:
        try:
            found = [a for a in (_address(x) for x in resolve(host, port)) if a]
            outcome = (list(dict.fromkeys(found))[:MAX_ADDRESSES],
                       None if found else "no address")
        except Exception as exc:  # gaierror, OSError, a resolver's own failure
            outcome = ([], f"{type(exc).__name__}: {exc}"[:200])
        with lock:
            results[i] = outcome

    threads = []
    for i, (host, port) in enumerate(wanted):
        if host.startswith("*."):
            results[i] = ([], "a wildcard is matched by name only; not resolved")
            continue
        thread = threading.Thread(target=work, args=(i, host, port), daemon=True,
                                  name=f"resolve-{host}")
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return [
            {"host": host, "port": port,
             "addresses": results.get(i, ([], None))[0],
             "error": results[i][1] if i in results else f"timed out after {timeout:g} s"}
            for i, (host, port) in enumerate(wanted)
        ]


def agent_endpoints(agent: Any) -> tuple[str, ...]:
    """What the agent declares (``Agent.endpoints()``; agents without the method: none)."""
    endpoints = getattr(agent, "endpoints", None)
    return tuple(endpoints()) if callable(endpoints) else ()


def _streamed(event: tuple[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """A streamed event; text the agent's transcript stream gave is a model turn (role assistant)."""
    kind, data = event
    if kind == "agent.output":
        return kind, {**data, "role": "assistant"}
    return kind, data


def _prompt_fields(prompt: str, redact: Redact) -> dict[str, Any]:
    """The prompt as given to the agent (public task text; redacted and bounded like any text)."""
    text, truncated, total = bound_text(redact(prompt), TEXT_LIMIT)
    out: dict[str, Any] = {"prompt": text}
    if truncated:
        out.update(prompt_truncated=True, prompt_bytes=total)
    return out


@dataclasses.dataclass
class _Prepared:
    """The agent's run, worked out before it starts (``_prepare_agent``)."""

    ctx: AttemptContext
    invocation: Any
    mode: str
    observed: str
    reason: str
    readable: list[str]
    endpoints: list[dict[str, Any]]
    isolation: dict[str, Any]
    policy: Any
    proxy: Any

    def discard(self) -> None:
        """Close the proxy of a run that will not happen."""
        if self.proxy is not None:
            with contextlib.suppress(Exception):
                self.proxy.close()


def _prepare_agent(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace, *,
                   isolated: bool) -> _Prepared:
    """The agent's context, command line, trace mode, scope and (isolated) sandbox and proxy."""
    from ledger.run.process import resolve_trace

    prompt_file = ws.scratch / "prompt.md"
    prompt_file.write_text(task.prompt, encoding="utf-8")
    ctx = AttemptContext(
        attempt_id=plan.attempt_id, task_id=task.id, worktree=ws.worktree,
        prompt_file=prompt_file, prompt=task.prompt, home=ws.home, timeout_s=plan.timeout_s,
        extra=_agent_extra(plan, task, agent, ws),
    )
    invocation = _observed_invocation(agent.invocation(ctx), agent, ws)
    mode, reason = resolve_trace(plan.trace)
    observed = mode if mode == "strace" else (
        "transcript" if invocation.parser_factory is not None else "none")
    readable = harness_readable() + agent_readable(invocation.argv, ws, task)
    endpoints = resolve_endpoints(
        agent_endpoints(agent), resolver=plan.config.get("resolver"),
        timeout=float(plan.config.get("resolve_timeout_s", RESOLVE_TIMEOUT_S)))
    policy = proxy = None
    isolation: dict[str, Any] = {"isolation": "none", "sandbox": None}
    if isolated:
        from ledger.sandbox import probe_bwrap

        policy, invocation, proxy = _agent_sandbox(plan, task, agent, ws, invocation, endpoints)
        # With isolation, what the sandbox shows may be read: that is the scope.
        readable = [p for p in policy.readable if p not in policy.masked]
        isolation = {"isolation": "sandbox",
                     "sandbox": {**policy.as_data(), "bwrap": probe_bwrap()[2]}}
    return _Prepared(ctx, invocation, mode, observed, reason, readable, endpoints, isolation,
                     policy, proxy)


def _discard(job: Background) -> None:
    """Wait for a preparation the attempt will not run, and close the proxy it started."""
    try:
        prep, _grading = job.result()
    except BaseException:  # the attempt is failing already: its own error is the one reported
        return
    prep.discard()


def _run_agent(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace, out: _Out,
               redact: Redactor, prep: _Prepared) -> bool:
    """Run the agent; False when its sandbox never started it."""
    try:
        ran = _agent_started_and_run(plan, task, agent, ws, out, redact, prep)
    finally:
        records = prep.proxy.close() if prep.proxy is not None else []
    for rec in records:  # every request the proxy saw: allowed or denied, bytes each way
        out.entry("net.connect", rec)
    return ran


def sandbox_failed_data(stage: str, message: str) -> dict[str, Any]:
    """The data of a ``sandbox.failed`` entry: the harness's sandbox did not start (an infra
    failure, never the agent's). ``message`` is bwrap's, bounded and redacted by the caller."""
    return {"stage": stage, "backend": "bwrap", "message": message}


def _agent_started_and_run(plan: AttemptPlan, task: Task, agent: Any, ws: Workspace, out: _Out,
                           redact: Redactor, prep: _Prepared) -> bool:
    from ledger.run.agent_errors import ReachWatch, classify
    from ledger.run.costs import estimate_cost
    from ledger.run.process import output_events, redact_secrets, run_agent_process
    from ledger.run.trace import strace_filter
    from ledger.sandbox.limits import Enforcement

    invocation = prep.invocation
    enforcement = Enforcement(attempt_limits(plan, task), sandboxed=prep.policy is not None,
                              label="agent")
    out.entry("agent.started", {
        "argv": [redact(redact_secrets(a, invocation.secrets)) for a in invocation.argv],
        "cwd": _resolved(ws.worktree),
        "home": _resolved(ws.home),
        "scratch": _resolved(ws.scratch),
        "readable": [redact_secrets(p, invocation.secrets) for p in dict.fromkeys(prep.readable)],
        "endpoints": prep.endpoints,
        "trace": prep.observed,
        "trace_reason": prep.reason,
        **({"trace_filter": strace_filter()} if prep.mode == "strace" else {}),
        **_prompt_fields(task.prompt, redact),
        "version": agent.version(),
        **prep.isolation,
        "limits": enforcement.as_data(),
    })
    try:
        outcome = run_agent_process(
            invocation, prep.ctx, trace=prep.mode, capture_filter=redact, evidence=redact.evidence,
            path_hit=lambda path: bool(redact.path_digests([path])),
            on_event=lambda ev: out.entry(*_streamed(ev)), sandbox=prep.policy,
            watch=ReachWatch() if getattr(agent, "kind", None) == "cli" else None,
            limits=enforcement,
        )
    finally:
        enforcement.close()
    failed = outcome.sandbox_failed
    if failed is not None:  # bwrap could not start the agent: the harness's failure
        failed = redact(failed)
        out.entry("sandbox.failed", sandbox_failed_data("agent", failed))
    for kind, data in output_events(outcome) if failed is None else []:
        if not (invocation.stdout_is_transcript and data.get("stream") == "stdout"):
            out.entry(kind, data)
    _limit_hits(out, "agent", outcome.limit_hits)
    cost, source = estimate_cost(outcome.usage, getattr(agent, "model", None) or agent.name,
                                 pricing=plan.config.get("pricing"))
    out.entry("agent.finished", {
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "wall_s": round(outcome.wall_s, 6),
        "timed_out": outcome.timed_out,
        "crashed": failed is None and not outcome.timed_out and (
            outcome.signal is not None or outcome.exit_code not in (0, None)),
        "tokens_in": outcome.usage.tokens_in,
        "tokens_out": outcome.usage.tokens_out,
        "cost_usd": cost,
        "cost_source": source,
        "orphans": outcome.orphans,
        "telemetry": outcome.exit_code is not None or outcome.signal is not None,
        "model_calls": outcome.usage.model_calls,
        "agent_error": ({"kind": "sandbox_failed", "detail": f"the sandbox did not start: {failed}"}
                        if failed is not None else classify(getattr(agent, "kind", ""), outcome)),
        "trace_partial": outcome.trace_partial,
        "limits_hit": sorted({str(h["which"]) for h in outcome.limit_hits}),
    })
    return failed is None


__all__ = ["run_attempt", "run_suite", "run_signal", "parse_junit", "python_argv", "no_filter",
           "resolve_endpoints", "system_resolver", "static_resolver", "agent_endpoints"]
