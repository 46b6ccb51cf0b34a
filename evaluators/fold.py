"""The one pass over a run's entries: ``fold(state, entry) -> state``.

Every view (score, taxonomy, per-tier and per-agent tables, judge facts, replay) is computed from
the :class:`FoldState` this module builds. The fold reads only the fields listed in
``docs/VOCABULARY.md``; a field of the wrong type makes its entry *malformed* (ignored and
counted), an unknown kind is ignored and counted, and nothing here raises on journal content.

For speed the fold updates ``state`` in place and returns it; a state belongs to one fold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from evaluators.fold_state import (  # re-exported: the fold's state is imported from here
    AttemptState,
    FoldState,
    RecordedView,
    TaskInfo,
    TestRun,
    _bool,
    _int,
    _Malformed,
    _opt_int,
    _opt_num,
    _opt_str,
    _str,
    _str_list,
    new_state,
)
from evaluators.grading import signal_verdict, suite_verdict
from evaluators.structure import Finding, placed_stream, trusted
from ledger.journal.codec import Entry

# Every kind docs/VOCABULARY.md lists. Kinds outside this set are "unknown" (ignored, counted).
KNOWN_KINDS = frozenset({
    "run.started", "run.resumed", "run.finished", "view.recorded",
    "attempt.started", "commitment", "test.baseline", "agent.started", "fs.read",
    "fs.read.summary", "fs.write", "proc.exec", "net.connect", "tool.call", "tool.result",
    "agent.output", "agent.finished",
    "signal.result", "test.result", "diff", "judge.verdict", "attestation", "attempt.finished",
    "grading", "grading.expected", "grading.anomaly", "sandbox.failed", "canary.commitment",
    "canary.result", "limit.hit",
})
# Kinds the harness writes that the golden fold does not read (the HTTP agent's model turns,
# the proxy's responses, the grading capture that the attestation judges). The view counts them
# among ``entries.unknown`` as it always has, so views recorded before stay replayable; readers
# name them as the harness's own, never unknown.
UNSCORED_HARNESS_KINDS = frozenset({"model.request", "model.response", "net.response",
                                    "grading.trace",  # the attestation reads it, the score not
                                    "environment.ready", "environment.failed"})  # verify reads them
JUDGE_DIMENSIONS = ("completeness", "accuracy", "actionability", "no_hallucinations")
VERDICTS = ("CLEAN", "DIRTY", "UNOBSERVED")
TEST_OUTCOMES = frozenset({"passed", "failed", "error", "skipped"})


# ---------------------------------------------------------------------------- attempt ids

def parse_attempt_id(attempt: str) -> tuple[str, str, str, int, int] | None:
    """Split ``<run>/<task>/<agent>/<repeat>/<try>``; None when it does not have that shape."""
    parts = attempt.rsplit("/", 4)
    if len(parts) != 5 or not all(parts[:3]):
        return None
    try:
        repeat, try_no = int(parts[3]), int(parts[4])
    except ValueError:
        return None
    return parts[0], parts[1], parts[2], repeat, try_no


def _attempt(state: FoldState, entry: Entry) -> AttemptState:
    attempt_id = entry.data.get("attempt")
    last = state.last_attempt
    if last is not None and last.attempt == attempt_id:
        return last
    if not isinstance(attempt_id, str):
        raise _Malformed("attempt")
    a = state.attempts.get(attempt_id)
    if a is None:
        a = AttemptState(attempt=attempt_id, first_seq=entry.seq)
        parsed = parse_attempt_id(attempt_id)
        if parsed is not None:
            _, a.task, a.agent, a.repeat, a.try_no = parsed
        if entry.task is not None:
            a.task = entry.task
        state.attempts[attempt_id] = a
    state.last_attempt = a
    return a


# ---------------------------------------------------------------------------- handlers

def _on_run_started(state: FoldState, entry: Entry) -> None:
    d = entry.data
    config = d.get("config", {})
    tasks = d.get("tasks", [])
    agents = d.get("agents", [])
    if not isinstance(config, dict) or not isinstance(tasks, list) or not isinstance(agents, list):
        raise _Malformed("run.started")
    parsed: dict[str, TaskInfo] = {}
    for t in tasks:
        if not isinstance(t, dict):
            raise _Malformed("tasks")
        info = TaskInfo(
            id=_str(t, "id"), title=_opt_str(t, "title"), tier=_opt_str(t, "tier"),
            hash=_opt_str(t, "hash"), max_duration_s=_opt_num(t, "max_duration_s"),
            max_cost_usd=_opt_num(t, "max_cost_usd"), owned_files=_str_list(t, "owned_files"),
            expected_files=_str_list(t, "expected_files_modified"), cluster=_cluster_of(t))
        parsed[info.id] = info
    named: dict[str, dict[str, Any]] = {}
    for ag in agents:
        if not isinstance(ag, dict):
            raise _Malformed("agents")
        name = _str(ag, "name")
        named[name] = {"name": name, "spec": _opt_str(ag, "spec"), "kind": _opt_str(ag, "kind"),
                       "version": _opt_str(ag, "version")}
    state.started = True
    state.harness_version = _opt_str(d, "harness_version")
    state.config = config
    state.tasks = parsed
    state.agents = named


def _cluster_of(task: dict[str, Any]) -> str:
    """A task's cluster for the statistics: its recorded source repository, else its suite
    (source format), else its tier, else the task itself (docs/SCORING.md, "Statistics")."""
    source = task.get("source")
    if isinstance(source, dict):
        repo, fmt = source.get("repo"), source.get("format")
        if isinstance(repo, str) and repo:
            return "repo:" + repo
        if isinstance(fmt, str) and fmt:
            return "suite:" + fmt
    tier = task.get("tier")
    if isinstance(tier, str) and tier:
        return "tier:" + tier
    return "task:" + str(task.get("id"))


def _on_run_resumed(state: FoldState, entry: Entry) -> None:
    state.resumed += 1
    if state.finished is not None:
        state.resumed_after_finish = True


def _on_run_finished(state: FoldState, entry: Entry) -> None:
    status = _str(entry.data, "status")
    state.finished = {"status": status, "attempts": _opt_int(entry.data, "attempts"),
                      "completed": _opt_int(entry.data, "completed")}
    state.resumed_after_finish = False


def _on_view_recorded(state: FoldState, entry: Entry) -> None:
    evaluator = _str(entry.data, "evaluator")
    version = _str(entry.data, "version")
    recorded = entry.data.get("view")
    computed = None
    if state.view_fn is not None and evaluator == state.view_name:
        computed = state.view_fn(state)
    elif f"{evaluator}@{version}" in state.other_views:  # an older version's own view
        computed = state.other_views[f"{evaluator}@{version}"](state)
    elif evaluator in state.other_views:
        computed = state.other_views[evaluator](state)
    state.recorded_views.append(RecordedView(entry.seq, evaluator, version, recorded, computed))


def _on_attempt_started(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = _attempt(state, entry)
    agent, repeat = _str(d, "agent"), _int(d, "repeat")
    try_no, tier = _int(d, "try"), _opt_str(d, "tier")
    a.agent, a.repeat, a.try_no, a.tier, a.started = agent, repeat, try_no, tier, True


def _on_agent_started(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    a.trace = _opt_str(entry.data, "trace")
    if entry.data.get("limits") is not None:
        state.limits_rule = True


def _on_fs_read(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = state.last_attempt  # _attempt's first check without the call (the most common kind)
    if a is None or a.attempt != d.get("attempt"):
        a = _attempt(state, entry)
    path = d.get("path")
    resolved = d.get("resolved")
    if type(path) is not str or (resolved is not None and type(resolved) is not str):
        raise _Malformed("path")
    a.reads.add(resolved or path)
    a.read_names.add(path)
    if resolved:
        a.read_names.add(resolved)
    a.activity += 1


def _on_fs_read_summary(state: FoldState, entry: Entry) -> None:
    files = entry.data.get("files")
    if type(files) is not list or not all(
            type(f) is list and f and type(f[0]) is str for f in files):
        raise _Malformed("files")
    a = _attempt(state, entry)
    for f in files:
        a.reads.add(f[0])
        a.read_names.add(f[0])
    a.counted_reads += _counted(entry.data.get("folders"), entry.data.get("worktree"))
    a.activity += 1


def _counted(folders: Any, worktree: Any) -> int:
    """Distinct files a summary counts without naming them (``folders``, ``worktree``)."""
    n = 0
    if type(folders) is list:
        n += sum(f[1] for f in folders if type(f) is list and len(f) > 1 and type(f[1]) is int)
    if type(worktree) is dict and type(worktree.get("files")) is int:
        n += worktree["files"]
    return n


def _on_fs_write(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = _attempt(state, entry)
    path = _str(d, "path")
    resolved = _opt_str(d, "resolved")
    in_worktree = _bool(d, "in_worktree", True)
    a.writes.add(path)
    if resolved:
        a.writes.add(resolved)
    if not in_worktree:
        a.writes_outside.add(resolved or path)
    a.activity += 1


def _on_activity(state: FoldState, entry: Entry) -> None:
    _attempt(state, entry).activity += 1


def _on_agent_finished(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = _attempt(state, entry)
    values = (_opt_int(d, "exit_code"), _opt_int(d, "signal"), _opt_num(d, "wall_s"),
              _bool(d, "timed_out", False), _bool(d, "crashed", False), _int(d, "orphans", 0),
              _bool(d, "telemetry", False), _opt_num(d, "cost_usd"), _opt_int(d, "tokens_in"),
              _opt_int(d, "tokens_out"))
    if values[2] is not None and values[2] < 0:
        raise _Malformed("wall_s")
    (a.exit_code, a.signal, a.wall_s, a.timed_out, a.crashed, a.orphans, a.telemetry,
     a.cost_usd, a.tokens_in, a.tokens_out) = values
    a.agent_finished = True
    err = d.get("agent_error")
    a.agent_error = err.get("kind") if isinstance(err, dict) and isinstance(
        err.get("kind"), str) else None


def _on_sandbox_failed(state: FoldState, entry: Entry) -> None:
    """``sandbox.failed {stage, backend, message}``: the attempt's sandbox did not start."""
    d = entry.data
    a = _attempt(state, entry)
    a.sandbox_failed = (f"{_opt_str(d, 'backend') or 'sandbox'} failed at "
                        f"{_opt_str(d, 'stage') or '?'}: {_opt_str(d, 'message') or ''}")


def _on_limit_hit(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    state.limits_rule = True
    which, phase = entry.data.get("which"), entry.data.get("phase", "agent")
    if not isinstance(which, str) or not isinstance(phase, str):
        raise _Malformed("which")
    name = which if phase == "agent" else f"{phase}:{which}"
    if name not in a.limits_hit:
        a.limits_hit = (*a.limits_hit, name)


def _on_signal_result(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    d = entry.data
    index, passed = _int(d, "index"), _bool(d, "passed")
    if d.get("outcomes") is not None:
        state.outcome_rule = True
    if d.get("outcomes") == "end-record":  # re-derived: the recorded verdict must follow
        sig = d.get("signal")
        if not isinstance(sig, dict):
            raise _Malformed("signal")
        v = signal_verdict(exit_code=_opt_int(d, "exit_code"),
                           expect_exit=_int(sig, "expect_exit", 0),
                           timed_out=_bool(d, "timed_out", False), ended=_bool(d, "ended"),
                           exitstatus=_opt_int(d, "exitstatus"))
        reasons = [r for r, _ in v.anomalies]
        if v.passed != passed:
            reasons.append("record-disagrees")
        a.grading_anomalies.extend(reasons)
        passed = passed and v.passed and not reasons
    a.signals[index] = passed


def _on_grading_expected(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    a.expected[_str(entry.data, "suite")] = _str_list(entry.data, "ids")
    state.outcome_rule = True


def _on_grading_anomaly(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    a.grading_anomalies.append(_str(entry.data, "reason"))
    state.outcome_rule = True


def _rederive(run: TestRun, d: dict[str, Any], expected: tuple[str, ...] | None,
              required: str) -> TestRun:
    """A reporter-graded run, its verdict worked out again from what the entry recorded."""
    report = d.get("report")
    if not isinstance(report, dict):
        raise _Malformed("report")
    tests = d.get("tests", [])
    pairs = {t["id"]: (t["outcome"], t.get("reported", t["outcome"])) for t in tests}
    if not all(isinstance(o, str) and isinstance(r, str) for o, r in pairs.values()):
        raise _Malformed("tests")
    whole = sum(run.counts.values()) == len(pairs)
    canaries = d.get("canaries")
    if canaries is not None and not isinstance(canaries, dict):
        raise _Malformed("canaries")
    v = suite_verdict(exit_code=run.exit_code, timed_out=_bool(d, "timed_out", False),
                      report=report, tests=pairs, expected=expected if whole else None,
                      required=required, extra_allowed=_bool(d, "extra_allowed", False),
                      canaries=canaries)
    recorded = d.get("anomalies", [])
    if not isinstance(recorded, list) or not all(
            isinstance(x, dict) and isinstance(x.get("reason"), str) for x in recorded):
        raise _Malformed("anomalies")
    reasons = [x["reason"] for x in recorded]
    reasons += [r for r, _ in v.anomalies if r not in reasons]
    if v.passed != run.passed:
        reasons.append("record-disagrees")
    ids = tuple(pairs) if whole and report.get("ended") else None
    return TestRun(passed=run.passed and v.passed and not reasons, exit_code=run.exit_code,
                   counts=run.counts, outcomes=run.outcomes, messages=run.messages,
                   source="reporter", anomalies=tuple(reasons), reported_ids=ids)


def _test_run(d: dict[str, Any]) -> TestRun:
    counts_in = d.get("counts", {})
    if not isinstance(counts_in, dict):
        raise _Malformed("counts")
    counts = {k: _int(counts_in, k, 0) for k in ("passed", "failed", "error", "skipped")}
    tests = d.get("tests", [])
    if not isinstance(tests, list):
        raise _Malformed("tests")
    outcomes: dict[str, str] = {}
    messages: list[str] = []
    for t in tests:
        if type(t) is not dict:
            raise _Malformed("tests")
        tid, outcome = t.get("id"), t.get("outcome")
        if type(tid) is not str or type(outcome) is not str or outcome not in TEST_OUTCOMES:
            raise _Malformed("tests")
        outcomes[tid] = outcome
        if outcome == "failed" or outcome == "error":
            message = t.get("message")
            if message is not None and type(message) is not str:
                raise _Malformed("message")
            if message:
                messages.append(message)
    return TestRun(passed=_bool(d, "passed"), exit_code=_opt_int(d, "exit_code"), counts=counts,
                   outcomes=outcomes, messages=tuple(messages))


def _graded(a: AttemptState, d: dict[str, Any], suite: str, baseline: bool = False) -> TestRun:
    run = _test_run(d)
    source = d.get("outcomes")
    if source == "reporter":
        if baseline:
            return _rederive(run, d, None, "reported")
        if suite == "hidden":
            return _rederive(run, d, a.expected.get("hidden"), "passed")
        ids = a.baseline.reported_ids if a.baseline is not None else None
        return _rederive(run, d, ids, "reported")
    if source is not None and not isinstance(source, str):
        raise _Malformed("outcomes")
    return TestRun(passed=run.passed, exit_code=run.exit_code, counts=run.counts,
                   outcomes=run.outcomes, messages=run.messages, source=source)


def _on_test_result(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    suite = _str(entry.data, "suite")
    run = _graded(a, entry.data, suite)
    if run.source is not None:
        state.outcome_rule = True
    a.grading_anomalies.extend(r for r in run.anomalies if r not in a.grading_anomalies)
    if suite == "hidden":
        a.hidden = run
    elif suite == "regression":
        a.regression = run
    else:
        raise _Malformed("suite")


def _on_test_baseline(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    a.baseline = _graded(a, entry.data, "regression", baseline=True)
    if a.baseline.source is not None:
        state.outcome_rule = True


def _on_diff(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = _attempt(state, entry)
    files = d.get("files", [])
    if not isinstance(files, list):
        raise _Malformed("files")
    parsed: list[tuple[str, str, int, int]] = []
    for f in files:
        if not isinstance(f, dict):
            raise _Malformed("files")
        parsed.append((_str(f, "path"), _str(f, "status"), _int(f, "added", 0),
                       _int(f, "removed", 0)))
    patch = d.get("patch", "")
    if not isinstance(patch, str):
        raise _Malformed("patch")
    flags = (_bool(d, "truncated", False), _bool(d, "conflict_markers", False),
             _bool(d, "apply_failed", False))
    a.diff_files = tuple(parsed)
    a.patch = patch
    a.patch_truncated, a.conflict_markers, a.apply_failed = flags
    a.diff_recorded = True


def _on_judge_verdict(state: FoldState, entry: Entry) -> None:
    d = entry.data
    a = _attempt(state, entry)
    scores = d.get("scores")
    if not isinstance(scores, dict):
        raise _Malformed("scores")
    clean: dict[str, int] = {}
    for dim in JUDGE_DIMENSIONS:
        value = _int(scores, dim)
        if not 0 <= value <= 5:
            raise _Malformed(dim)
        clean[dim] = value
    a.judge = {"judge": _str(d, "judge"), "version": _str(d, "version"), "scores": clean}


def _on_attestation(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    att = entry.data.get("attestation")
    if not isinstance(att, dict):
        raise _Malformed("attestation")
    verdict = _str(att, "verdict")
    if verdict not in VERDICTS:
        raise _Malformed("verdict")
    a.attestation = verdict
    iso = att.get("isolation", "none")
    a.isolation = iso if iso in ("sandbox", "none") else "none"


def _on_canary(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    data = entry.data.get("canaries")
    if not isinstance(data, dict):
        raise _Malformed("canaries")
    if entry.kind == "canary.commitment":
        a.canary_commitment = data
    else:
        a.canary_result = data


def _on_attempt_finished(state: FoldState, entry: Entry) -> None:
    a = _attempt(state, entry)
    status, error = _str(entry.data, "status"), _opt_str(entry.data, "error")
    a.status, a.error = status, error


def _on_attempt_known(state: FoldState, entry: Entry) -> None:
    _attempt(state, entry)


_HANDLERS: dict[str, Callable[[FoldState, Entry], None]] = {
    "run.started": _on_run_started,
    "run.resumed": _on_run_resumed,
    "run.finished": _on_run_finished,
    "view.recorded": _on_view_recorded,
    "attempt.started": _on_attempt_started,
    "agent.started": _on_agent_started,
    "commitment": _on_attempt_known,
    "fs.read": _on_fs_read,
    "fs.read.summary": _on_fs_read_summary,
    "fs.write": _on_fs_write,
    "proc.exec": _on_activity,
    "net.connect": _on_activity,
    "tool.call": _on_activity,
    "tool.result": _on_activity,
    "agent.output": _on_attempt_known,
    "agent.finished": _on_agent_finished,
    "sandbox.failed": _on_sandbox_failed,
    "limit.hit": _on_limit_hit,
    "signal.result": _on_signal_result,
    "grading.expected": _on_grading_expected,
    "grading.anomaly": _on_grading_anomaly,
    "test.result": _on_test_result,
    "test.baseline": _on_test_baseline,
    "diff": _on_diff,
    "judge.verdict": _on_judge_verdict,
    "attestation": _on_attestation,
    "attempt.finished": _on_attempt_finished,
    "canary.commitment": _on_canary,
    "canary.result": _on_canary,
}


def fold(state: FoldState, entry: Entry) -> FoldState:
    """Add one entry to ``state`` (in place) and return it."""
    run = entry.run
    if run != state.run_id:
        if state.run_id is None and run is not None:
            state.run_id = run
        else:
            state.foreign += 1
            return state
    kind = entry.kind
    handler = _HANDLERS.get(kind)
    if handler is None:
        state.unknown[kind] = state.unknown.get(kind, 0) + 1
    else:
        try:
            handler(state, entry)
        except _Malformed:
            state.malformed[kind] = state.malformed.get(kind, 0) + 1
    state.entries += 1
    state.by_kind[kind] = state.by_kind.get(kind, 0) + 1
    return state


def fold_all(entries: Iterable[Entry], state: FoldState | None = None, *,
             structure: Sequence[Entry] | None = None) -> FoldState:
    """Fold every entry of the run that the run's structure places (evaluators/structure.py) into
    ``state`` (a new one when None); the others go to ``state.injected``, never into a view.
    ``structure``: the run's entries of ``STRUCTURE_KINDS``, read apart; ``entries`` (of the run
    ``state`` names) then stream through once and are never held (``placed_stream``)."""
    st = new_state() if state is None else state
    findings: list[Finding] = []
    kept: Iterable[Entry]
    if structure is None:
        placed = trusted(entries, st.run_id)
        st.injected.extend(placed.findings)
        kept = placed.entries
    else:
        kept = placed_stream(entries, str(st.run_id), structure, findings)
    # ``fold`` inlined for the entries of the run (all but a few): one call less per entry;
    # ``st.entries`` is counted in a local and stored before each view.recorded (the only
    # handler that reads it, through the views) and at the end
    handlers, by_kind, run_id, n = _HANDLERS, st.by_kind, st.run_id, st.entries
    for entry in kept:
        if entry.run != run_id:
            st.entries = n
            fold(st, entry)  # another run's entry, or the first to name the run
            n, run_id = st.entries, st.run_id
            continue
        kind = entry.kind
        handler = handlers.get(kind)
        if handler is None:
            st.unknown[kind] = st.unknown.get(kind, 0) + 1
        else:
            if kind == "view.recorded":
                st.entries = n
            try:
                handler(st, entry)
            except _Malformed:
                st.malformed[kind] = st.malformed.get(kind, 0) + 1
        n += 1
        by_kind[kind] = by_kind.get(kind, 0) + 1
    st.entries = n
    st.injected.extend(findings)  # a stream's, known once it ended (no view reads them)
    return st


__all__ = ["JUDGE_DIMENSIONS", "KNOWN_KINDS", "TEST_OUTCOMES", "UNSCORED_HARNESS_KINDS", "VERDICTS",
           "AttemptState", "FoldState", "RecordedView", "TaskInfo", "TestRun", "fold", "fold_all",
           "new_state", "parse_attempt_id"]
