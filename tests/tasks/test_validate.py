"""Task validation: each fairness check fails for the defect it exists to catch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.tasks.loader import load_task
from ledger.tasks.model import Signal
from ledger.tasks.validate import (
    apply_demo,
    check_signal,
    resolve_argv,
    run_command,
    validate_task,
    validate_tasks,
)
from tests.tasks.helpers import FIXED, HIDDEN, START, make_task


def _checks(folder: Path) -> dict[str, tuple[bool, str]]:
    result = validate_task(load_task(folder))
    return {c.name: (c.passed, c.detail) for c in result.checks}


def test_fair_task_passes_every_check(tmp_path: Path) -> None:
    """A correct task passes every check, and the result names each one."""
    result = validate_task(load_task(make_task(tmp_path / "smoke")))
    assert result.ok, result.failed
    names = [c.name for c in result.checks]
    for name in ("regression-before", "hidden-fails-before", "noop-agent-fails", "hidden-passes-after",
                 "regression-after", "signals-pass-after", "signals-executable", "solution-scope", "prompt-clean"):
        assert name in names
    assert result.as_dict()["ok"] is True


def test_hidden_tests_that_already_pass(tmp_path: Path) -> None:
    """Hidden tests passing on the starting repo (nothing to do) fail hidden-fails-before."""
    folder = make_task(tmp_path / "smoke", files={"repo/calc.py": FIXED})
    checks = _checks(folder)
    assert checks["hidden-fails-before"][0] is False
    assert checks["noop-agent-fails"][0] is False


def test_solution_that_does_not_solve(tmp_path: Path) -> None:
    """A reference solution that leaves the bug fails hidden-passes-after and signals-pass-after."""
    folder = make_task(tmp_path / "smoke", files={"solution/calc.py": START})
    checks = _checks(folder)
    assert checks["hidden-passes-after"][0] is False
    assert checks["signals-pass-after"][0] is False
    assert checks["hidden-fails-before"][0] is True


def test_regression_broken_before_or_after(tmp_path: Path) -> None:
    """A failing regression suite on the start, or one the solution breaks, is caught."""
    broken_start = make_task(tmp_path / "a" / "smoke", files={"repo/calc.py": START.replace("return -a", "return a")})
    assert _checks(broken_start)["regression-before"][0] is False
    breaking_fix = make_task(tmp_path / "b" / "smoke", files={"solution/calc.py": FIXED.replace("return -a", "return a")})
    checks = _checks(breaking_fix)
    assert checks["regression-before"][0] is True and checks["regression-after"][0] is False


def test_unexecutable_signal(tmp_path: Path) -> None:
    """A signal whose program does not exist fails signals-executable (and never passes)."""
    signals = [{"command": ["no-such-program-xyz", "--flag"], "expect_exit": 0}]
    checks = _checks(make_task(tmp_path / "smoke", front={"completion_signals": signals}))
    assert checks["signals-executable"][0] is False
    assert "no-such-program-xyz" in checks["signals-executable"][1]
    assert checks["signals-pass-after"][0] is False


def test_solution_outside_scope(tmp_path: Path) -> None:
    """A solution touching the regression tests, or other files than declared, fails solution-scope."""
    folder = make_task(tmp_path / "smoke", files={"solution/tests/test_neg.py": "def test_x():\n    pass\n"})
    passed, detail = _checks(folder)["solution-scope"]
    assert passed is False and "tests/test_neg.py" in detail


def test_prompt_that_leaks_the_hidden_test(tmp_path: Path) -> None:
    """A prompt quoting a hidden test line fails prompt-clean, and the detail does not repeat the line."""
    folder = make_task(tmp_path / "smoke", prompt="Make this pass:\n\n    assert add(2, 3) == 5\n")
    passed, detail = _checks(folder)["prompt-clean"]
    assert passed is False and "assert add" not in detail


def test_details_never_contain_test_source(tmp_path: Path) -> None:
    """Check details carry exit codes and pytest summaries, never hidden test or solution text."""
    result = validate_task(load_task(make_task(tmp_path / "smoke", files={"solution/calc.py": START})))
    text = " ".join(c.detail for c in result.checks)
    assert "assert add(2, 3) == 5" not in text and "a + b" not in text
    assert "failed" in text


def test_demo_that_does_not_solve_a_smoke_task(tmp_path: Path) -> None:
    """A smoke demo must solve the task; one that edits the wrong thing fails the demo check."""
    demo = "- read: calc.py\n- replace: calc.py\n  old: return -a\n  new: return 0 - a\n"
    passed, detail = _checks(make_task(tmp_path / "smoke", files={"demo.yaml": demo}))["demo"]
    assert passed is False and "does not solve" in detail
    good = "- read: calc.py\n- replace: calc.py\n  old: return a - b\n  new: return a + b\n"
    assert _checks(make_task(tmp_path / "ok" / "smoke", files={"demo.yaml": good}))["demo"][0] is True


def test_demo_replace_of_missing_text(tmp_path: Path) -> None:
    """apply_demo reports a replace whose old text is absent and a read of a missing file."""
    (tmp_path / "f.py").write_text("x = 1\n")
    problems = apply_demo([{"read": "nope.py"}, {"replace": "f.py", "old": "y = 2", "new": "z"}], tmp_path)
    assert len(problems) == 2
    assert apply_demo([{"write": "new/g.py", "content": "ok\n"}], tmp_path) == []
    assert (tmp_path / "new" / "g.py").read_text() == "ok\n"


def test_history_that_does_not_replay_to_repo(tmp_path: Path) -> None:
    """A repo_history.yaml whose final tree differs from repo/ fails the history check."""
    import yaml

    history = [{"message": "start", "files": {"calc.py": START}}]
    passed, detail = _checks(make_task(tmp_path / "smoke", files={"repo_history.yaml": yaml.safe_dump(history)}))["history"]
    assert passed is False and "tests/test_neg.py" in detail


def test_adversarial_task_must_declare_its_bait(tmp_path: Path) -> None:
    """An adversarial task without hidden.temptation fails temptation-declared."""
    assert _checks(make_task(tmp_path / "adversarial"))["temptation-declared"][0] is False
    ok = make_task(tmp_path / "b" / "adversarial", front={"hidden": {"temptation": "planted-instruction"}})
    assert _checks(ok)["temptation-declared"] == (True, "planted-instruction")


def test_check_signal_kinds(tmp_path: Path) -> None:
    """Each signal kind evaluates against the worktree: command exit codes, existence, regex content."""
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    assert check_signal(Signal(kind="path_exists", path="a.txt"), tmp_path)[0] is True
    assert check_signal(Signal(kind="path_exists", path="b.txt"), tmp_path)[0] is False
    assert check_signal(Signal(kind="file_contains", path="a.txt", pattern="^world$"), tmp_path)[0] is True
    assert check_signal(Signal(kind="file_contains", path="a.txt", pattern="^orld"), tmp_path)[0] is False
    assert check_signal(Signal(kind="command", command="exit 3", expect_exit=3), tmp_path)[0] is True
    assert check_signal(Signal(kind="command", command=("python", "-c", "raise SystemExit(1)")), tmp_path)[0] is False
    assert check_signal(Signal(kind="command", command="no-such-cmd-xyz"), tmp_path)[2] is False


def test_python_runs_with_this_interpreter(tmp_path: Path) -> None:
    """`python` in a task command is this interpreter, so the venv's pytest is used."""
    import sys

    assert resolve_argv(["python", "-m", "pytest"])[0] == sys.executable
    assert resolve_argv(["pytest"]) == ["pytest"]
    res = run_command("python -c 'import sys; print(sys.executable)'", tmp_path)
    assert res.exit_code == 0 and Path(res.summary).parent == Path(sys.executable).parent


def test_validate_tasks_keeps_order_and_reports_progress(tmp_path: Path) -> None:
    """validate_tasks returns results in input order and calls progress once per task."""
    tasks = [load_task(make_task(tmp_path / "smoke", name)) for name in ("t-b", "t-a")]
    seen: list[str] = []
    results = validate_tasks(tasks, parallel=2, progress=lambda r: seen.append(r.task_id))
    assert [r.task_id for r in results] == ["t-b", "t-a"]
    assert sorted(seen) == ["t-a", "t-b"]
    assert all(r.ok for r in results)


def test_hidden_test_file_text_is_what_fails(tmp_path: Path) -> None:
    """Sanity: the helper's hidden test really targets the bug (guards the fixtures above)."""
    assert "add(2, 3) == 5" in HIDDEN and "a - b" in START and "a + b" in FIXED


@pytest.mark.parametrize("parallel", [0, -1])
def test_bad_parallel(parallel: int) -> None:
    """parallel below 1 is a usage error."""
    from ledger.errors import UsageError

    with pytest.raises(UsageError):
        validate_tasks([], parallel=parallel)


def test_canary_sites_are_proved_sound(tmp_path: Path) -> None:
    """The canaries check runs one mutant per site on the solved tree: all fail, real tests pass."""
    passed, detail = _checks(make_task(tmp_path / "smoke"))["canaries"]
    assert passed, detail
    assert detail == "canaries: 1 test and 1 signal site(s), all sound"


def test_canary_that_does_not_fail_is_reported(tmp_path: Path) -> None:
    """A test whose copy cannot fail (xfail-marked) makes an unsound canary: the check fails."""
    hidden = ("import pytest\nfrom calc import add\n\n\n@pytest.mark.xfail(strict=False)\n"
              "def test_add_sums_two_numbers():\n    assert add(2, 3) == 5\n")
    passed, detail = _checks(make_task(tmp_path / "smoke", files={
        "tests/test_add_hidden.py": hidden}))["canaries"]
    assert not passed
    assert "does not fail with the solution (xfail)" in detail


def test_task_without_canary_sites_says_why(tmp_path: Path) -> None:
    """No assert to mutate and no `python -c` signal: `canaries: 0` with the reason, not a failure."""
    hidden = ("from calc import add\n\n\ndef test_add_sums_two_numbers():\n"
              "    if add(2, 3) != 5:\n        raise AssertionError('sum')\n")
    passed, detail = _checks(make_task(tmp_path / "smoke", files={
        "tests/test_add_hidden.py": hidden}, front={"completion_signals": [
            {"file_contains": {"path": "calc.py", "pattern": r"a \+ b"}}]}))["canaries"]
    assert passed
    assert detail.startswith("canaries: 0 (no test function has an assert")
