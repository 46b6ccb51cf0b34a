"""One attempt, run in this process: event order, isolation, baseline, tests, signals, redaction."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ledger.run.attempt import python_argv, run_attempt, run_signal
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.workspace import create_workspace
from ledger.tasks.loader import load_tasks
from ledger.tasks.model import Signal, Task
from tests.run.minitasks import HIDDEN_ADD, make_ledger

KEY = bytes(range(32))


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    ledger = make_ledger(tmp_path_factory.mktemp("mini"), tasks=("fix-add", "fix-sub"))
    return {t.id: t for t in load_tasks(["mini"], overrides=ledger / "golden")}


def _plan(task: Task, spec: str, *, timeout: float = 30.0, **config: Any) -> AttemptPlan:
    return AttemptPlan(
        run_id="r-test", attempt_id=f"r-test/{task.id}/a/1/1", task_root=str(task.root),
        task_id=task.id, agent_spec=spec, repeat=1, try_no=1, timeout_s=timeout, trace="none",
        config={"tier": task.tier, "task_hash": task.hash, "commitment_key": KEY, **config},
    )


def _run(plan: AttemptPlan) -> list[AttemptEvent]:
    events: list[AttemptEvent] = []
    run_attempt(plan, events.append)
    return events


def _entries(events: list[AttemptEvent]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in events if e.kind != "phase"]


def _one(events: list[AttemptEvent], kind: str, **match: Any) -> dict[str, Any]:
    found = [d for k, d in _entries(events) if k == kind and all(d.get(a) == b for a, b in match.items())]
    assert len(found) == 1, (kind, match, [k for k, _ in _entries(events)])
    return found[0]


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


def test_attempt_records_the_prompt_and_capture_times(tasks: dict[str, Task]) -> None:
    """agent.started holds the prompt as given; every worker entry has its own capture time ``at``."""
    events = _run(_plan(tasks["fix-add"], "oracle"))
    assert _one(events, "agent.started")["prompt"] == tasks["fix-add"].prompt
    times = [d["at"] for _, d in _entries(events)]
    assert all(isinstance(t, int) for t in times) and times == sorted(times)
    first = {k: d["at"] for k, d in reversed(_entries(events))}
    assert first["commitment"] < first["agent.started"] < first["agent.finished"]


def test_oracle_attempt_emits_the_steps_in_order(tasks: dict[str, Task]) -> None:
    """commitment, the canaries' commitment and baseline precede the agent; tests, the canary
    outcomes, the grading trace and diff follow; attempt.finished is last."""
    events = _run(_plan(tasks["fix-add"], "oracle"))
    kinds = [k for k, _ in _entries(events)]
    assert kinds[:5] == ["commitment", "canary.commitment", "test.baseline", "grading.expected",
                         "agent.started"]
    assert kinds[-1] == "attempt.finished"
    after = kinds[kinds.index("agent.finished"):]
    assert after[:3] == ["agent.finished", "signal.result", "signal.result"]
    assert after[3:] == ["test.result", "canary.result", "test.result", "grading.trace", "diff",
                         "attempt.finished"]
    canaries = _one(events, "canary.result")["canaries"]
    assert canaries["passed"] == 0 and {r["outcome"] for r in canaries["canaries"]} == {"failed"}
    assert all(d["attempt"] == "r-test/fix-add/a/1/1" for _, d in _entries(events))
    finished = _one(events, "attempt.finished")
    assert isinstance(finished.pop("at"), int)  # the capture time (VOCABULARY.md conventions)
    assert finished == {"attempt": "r-test/fix-add/a/1/1", "status": "completed", "error": None}
    hidden = _one(events, "test.result", suite="hidden")
    assert hidden["passed"] is True and hidden["counts"] == {"passed": 2, "failed": 0, "error": 0, "skipped": 0}
    assert {t["id"] for t in hidden["tests"]} == {
        "tests_hidden/test_add_hidden.py::test_add_positive_operands_produce_their_sum",
        "tests_hidden/test_add_hidden.py::test_add_negative_operand_and_one_behave_arithmetically"}
    assert hidden["outcomes"] == "reporter" and hidden["expected"] == 2
    expected = _one(events, "grading.expected")
    assert sorted(expected["ids"]) == sorted(t["id"] for t in hidden["tests"])
    assert expected["source"] == "collected" and expected["task_hash"] == tasks["fix-add"].hash
    diff = _one(events, "diff")
    assert [(f["path"], f["status"]) for f in diff["files"]] == [("calc.py", "modified")]
    assert [s["passed"] for k, s in _entries(events) if k == "signal.result"] == [True, True]


def test_noop_fails_hidden_tests_with_per_test_outcomes(tasks: dict[str, Task]) -> None:
    """The no-op agent leaves the bug: hidden tests fail (one outcome per test), regression holds."""
    events = _run(_plan(tasks["fix-add"], "noop"))
    hidden = _one(events, "test.result", suite="hidden")
    assert hidden["passed"] is False and hidden["exit_code"] == 1
    assert hidden["counts"]["failed"] == 2
    assert all(t["outcome"] == "failed" and t["message"] for t in hidden["tests"])
    assert _one(events, "test.result", suite="regression")["passed"] is True
    assert _one(events, "diff")["files"] == []
    assert _one(events, "agent.finished")["crashed"] is False


def test_hidden_tests_and_solution_are_absent_while_the_agent_runs(tasks: dict[str, Task], tmp_path: Path) -> None:
    """A fake agent that looks for ground truth in its worktree finds none (it would exit 3)."""
    spec = _script(tmp_path, "look.py", """
        import os, sys
        names = []
        for d, dirs, files in os.walk("."):
            names += [os.path.join(d, f) for f in files]
        print(sorted(names))
        bad = [n for n in names if "tests_hidden" in n or "hidden" in open(n, errors="ignore").read()]
        sys.exit(3 if bad or os.path.exists("tests_hidden") or os.path.exists("solution") else 0)
    """)
    events = _run(_plan(tasks["fix-add"], spec))
    finished = _one(events, "agent.finished")
    assert finished["exit_code"] == 0, _one(events, "agent.output", stream="stdout")["text"]
    out = _one(events, "agent.output", stream="stdout")["text"]
    assert "calc.py" in out and "test_add_hidden" not in out
    assert _one(events, "test.result", suite="hidden")["counts"]["failed"] == 2  # they did arrive


def test_regression_baseline_runs_before_the_agent_and_catches_breakage(tasks: dict[str, Task], tmp_path: Path) -> None:
    """The baseline passes on the starting repo; an agent that breaks mul() shows as a failing regression run."""
    spec = _script(tmp_path, "breaker.py", """
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return 0\\n")
    """)
    events = _run(_plan(tasks["fix-add"], spec))
    kinds = [k for k, _ in _entries(events)]
    assert kinds.index("test.baseline") < kinds.index("agent.started")
    base = _one(events, "test.baseline")
    assert base["suite"] == "regression" and base["passed"] is True
    assert base["tests"] == [{"id": "tests/test_mul.py::test_mul", "outcome": "passed", "message": ""}]
    after = _one(events, "test.result", suite="regression")
    assert after["passed"] is False and after["tests"][0]["outcome"] == "failed"
    assert _one(events, "test.result", suite="hidden")["passed"] is True


def test_agent_reading_ground_truth_from_outside_is_redacted(tasks: dict[str, Task], tmp_path: Path) -> None:
    """An agent that prints the hidden tests (read by absolute path) has that text redacted in the journal."""
    hidden = tasks["fix-add"].tests_dir / "test_add_hidden.py"
    spec = _script(tmp_path, "peek.py", f"print(open({str(hidden)!r}).read())\n")
    events = _run(_plan(tasks["fix-add"], spec))
    text = _one(events, "agent.output", stream="stdout")["text"]
    assert "[redacted:" in text
    for line in HIDDEN_ADD.splitlines():
        if len(line.split()) >= 8:
            assert line.strip() not in text


def test_timeout_stops_a_hanging_agent_and_the_attempt_completes(tasks: dict[str, Task], tmp_path: Path) -> None:
    """An agent past its budget is stopped; agent.finished says timed_out, not crashed."""
    spec = _script(tmp_path, "sleep.py", "import time\ntime.sleep(60)\n")
    events = _run(_plan(tasks["fix-sub"], spec, timeout=0.5))
    fin = _one(events, "agent.finished")
    assert fin["timed_out"] is True and fin["crashed"] is False and fin["wall_s"] < 10
    assert _one(events, "attempt.finished")["status"] == "completed"


def test_crashing_agent_is_recorded_as_crashed(tasks: dict[str, Task], tmp_path: Path) -> None:
    """A non-zero exit is a crash; the tests still run afterwards."""
    spec = _script(tmp_path, "crash.py", "import sys\nsys.exit(7)\n")
    events = _run(_plan(tasks["fix-sub"], spec))
    fin = _one(events, "agent.finished")
    assert (fin["exit_code"], fin["crashed"], fin["telemetry"]) == (7, True, True)
    assert _one(events, "test.result", suite="hidden")["passed"] is False


def test_changed_task_is_refused(tasks: dict[str, Task]) -> None:
    """A plan whose task hash differs from the task on disk ends in status error, agent never started."""
    plan = _plan(tasks["fix-sub"], "noop")
    plan = AttemptPlan(**{**plan.__dict__, "config": {**plan.config, "task_hash": "0" * 64}})
    events = _run(plan)
    assert [k for k, _ in _entries(events)] == ["attempt.finished"]
    fin = _one(events, "attempt.finished")
    assert fin["status"] == "error" and "changed since the run recorded it" in fin["error"]


def test_missing_commitment_key_is_an_error_before_the_agent(tasks: dict[str, Task]) -> None:
    """Without a commitment key nothing runs: the agent must never start uncommitted."""
    plan = _plan(tasks["fix-sub"], "noop")
    plan = AttemptPlan(**{**plan.__dict__, "config": {k: v for k, v in plan.config.items() if k != "commitment_key"}})
    events = _run(plan)
    assert "agent.started" not in [k for k, _ in _entries(events)]
    assert _one(events, "attempt.finished")["status"] == "error"


def test_a_setting_the_worker_does_not_know_is_an_error_before_anything_runs(tasks: dict[str, Task]) -> None:
    """A misspelled or one-sided setting (``sandbx``) is refused by name: the attempt ends in
    error before its workspace, its commitment or its agent, instead of running unsandboxed."""
    events = _run(_plan(tasks["fix-sub"], "noop", sandbx="bwrap"))
    assert [k for k, _ in _entries(events)] == ["attempt.finished"]
    fin = _one(events, "attempt.finished")
    assert fin["status"] == "error" and "sandbx" in fin["error"]


def test_settings_are_read_once_by_name_and_type() -> None:
    """``AttemptSettings.from_config`` types what the coordinator sends: the key as bytes, a
    timeout as a float, canaries off only by an explicit False, absent keys their defaults."""
    from ledger.errors import TaskError
    from ledger.run.contracts import AttemptSettings

    s = AttemptSettings.from_config({"commitment_key": bytearray(KEY), "test_timeout_s": "5",
                                     "canaries": None, "sandbox_hidden": [Path("/h")],
                                     "agent_config": {"claude": [".claude.json"]}})
    assert s.commitment_key == KEY and isinstance(s.commitment_key, bytes)
    assert s.test_timeout_s == 5.0 and s.canaries is True and s.sandbox == "none"
    assert s.sandbox_hidden == ("/h",) and s.agent_config == {"claude": (".claude.json",)}
    assert AttemptSettings.from_config({"canaries": False}).canaries is False
    assert AttemptSettings.from_config({"commitment_key": "not bytes"}).commitment_key is None
    assert AttemptSettings.from_config({}).test_timeout_s is None
    with pytest.raises(TaskError, match="keep_worktrees"):
        AttemptSettings.from_config({"keep_worktrees": True})


def test_worktree_is_removed_after_the_attempt(tasks: dict[str, Task], tmp_path: Path) -> None:
    """The attempt directory is gone once attempt.finished is emitted."""
    spec = _script(tmp_path, "where.py", "import os\nprint(os.getcwd())\n")
    events = _run(_plan(tasks["fix-sub"], spec))
    cwd = _one(events, "agent.started")["cwd"]
    assert not os.path.exists(cwd)


def test_signals_pass_fail_and_refuse_escapes(tasks: dict[str, Task]) -> None:
    """Each signal kind is evaluated in the worktree; paths leaving the worktree never pass."""
    ws = create_workspace(tasks["fix-sub"])
    try:
        ident = str
        cases = [
            (Signal(kind="path_exists", path="ops.py"), True),
            (Signal(kind="path_exists", path="nope.py"), False),
            (Signal(kind="path_exists", path="../wt/ops.py"), True),
            (Signal(kind="path_exists", path="../../"), False),
            (Signal(kind="file_contains", path="ops.py", pattern=r"def sub\("), True),
            (Signal(kind="file_contains", path="ops.py", pattern=r"a - b"), False),
            (Signal(kind="command", command=("python", "-c", "import ops"), expect_exit=0), True),
            (Signal(kind="command", command="exit 4", expect_exit=4), True),
            (Signal(kind="command", command=("python", "-c", "raise SystemExit(1)"), expect_exit=0), False),
        ]
        for i, (sig, expected) in enumerate(cases):
            res = run_signal(ws, i, sig, redact=ident, timeout=30)
            assert res["passed"] is expected, (sig, res)
            assert res["index"] == i and res["signal"] == sig.as_dict()
    finally:
        ws.cleanup()


def test_python_commands_use_the_harness_interpreter() -> None:
    """'python' and 'python3' become sys.executable; other programs are left alone."""
    assert python_argv(["python", "-m", "pytest"]) == [sys.executable, "-m", "pytest"]
    assert python_argv(["python3", "x.py"])[0] == sys.executable
    assert python_argv(["make", "test"]) == ["make", "test"]


def test_agent_that_destroys_its_worktree_is_still_recorded(tasks: dict[str, Task], tmp_path: Path) -> None:
    """Deleting the worktree (and .git) does not break the attempt: the diff says apply_failed, tests fail."""
    spec = _script(tmp_path, "wreck.py", """
        import os, shutil
        for name in os.listdir("."):
            shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)
    """)
    events = _run(_plan(tasks["fix-sub"], spec))
    assert _one(events, "attempt.finished")["status"] == "completed"
    diff = _one(events, "diff")
    assert diff["apply_failed"] is True
    assert {(f["path"], f["status"]) for f in diff["files"]} == {("ops.py", "deleted"), ("check_public.py", "deleted")}
    assert _one(events, "test.result", suite="hidden")["passed"] is False
    assert _one(events, "test.result", suite="regression")["passed"] is False


def test_streamed_agent_text_is_a_model_turn() -> None:
    """Text the agent's transcript stream gives is journaled with role assistant; other events are untouched."""
    from ledger.run.attempt.agent import streamed as _streamed

    assert _streamed(("agent.output", {"stream": "stdout", "text": "I will fix it."})) == (
        "agent.output", {"stream": "stdout", "text": "I will fix it.", "role": "assistant"})
    assert _streamed(("fs.read", {"path": "a"})) == ("fs.read", {"path": "a"})


def test_a_worker_builds_a_commitment_once_per_task_and_key(tasks: dict[str, Task]) -> None:
    """The commitment is kept per (task hash, folder, key): the same task and key give the very
    same commitment; another key or another task gives its own (never a stale one)."""
    from ledger.run.attempt.prepare import commitment_of as _commitment

    add, sub = tasks["fix-add"], tasks["fix-sub"]
    first = _commitment(add, KEY)
    assert _commitment(add, KEY) is first
    other_key = _commitment(add, bytes(32))
    assert other_key is not first and other_key.key_id != first.key_id
    assert _commitment(sub, KEY).digest != first.digest


def test_an_agent_that_adds_a_passing_test_is_graded_without_anomaly(tasks: dict[str, Task], tmp_path: Path) -> None:
    """Without isolation the regression suite runs in the agent's own tree, so a test the agent
    added is collected beside the baseline's: not an unknown id (it must pass like the rest)."""
    spec = _script(tmp_path, "adds_test.py", """
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return a * b\\n")
        open("tests/test_add_new.py", "w").write("from calc import add\\n\\n\\ndef test_new():\\n    assert add(1, 1) == 2\\n")
        print("added tests/test_add_new.py")
    """)
    events = _run(_plan(tasks["fix-add"], spec))
    reg = _one(events, "test.result", suite="regression")
    assert {t["id"] for t in reg["tests"]} == {"tests/test_mul.py::test_mul",
                                               "tests/test_add_new.py::test_new"}
    assert reg["passed"] is True and reg["extra_allowed"] is True and "anomalies" not in reg
    assert not [d for k, d in _entries(events) if k == "grading.anomaly"]


def test_exit_code_alone_never_passes_a_pytest_suite(tasks: dict[str, Task], tmp_path: Path) -> None:
    """An agent whose code exits 0 under pytest: both suites exit 0 and fail, with a
    grading.anomaly each (without isolation too)."""
    spec = _script(tmp_path, "exit0.py", """
        text = open("calc.py").read()
        open("calc.py", "w").write("import os, sys\\nif 'pytest' in sys.modules:\\n    os._exit(0)\\n" + text)
        print("prepended os._exit(0) under pytest")
    """)
    events = _run(_plan(tasks["fix-add"], spec))
    for suite in ("hidden", "regression"):
        res = _one(events, "test.result", suite=suite)
        assert res["exit_code"] == 0 and res["passed"] is False
        assert [a["reason"] for a in res["anomalies"]] == ["no-end-record"]
    assert sorted(d["suite"] for k, d in _entries(events) if k == "grading.anomaly") == [
        "hidden", "regression"]
