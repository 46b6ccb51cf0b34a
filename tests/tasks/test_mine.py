"""`ledger tasks mine`: fix commits of a real (generated) git repository become fair golden tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.tasks.loader import load_task
from ledger.tasks.mine import MineOptions, is_test_path, mine
from ledger.tasks.validate import validate_task
from tests.tasks.gitrepos import commit, fixture_repo, git, init

# label of a fixture commit -> (accepted?, a phrase its reason must contain)
EXPECTED = {
    "root": (False, "root commit"),
    "fix": (True, "1 FAIL_TO_PASS, 1 PASS_TO_PASS"),
    "passing": (False, "no test fails before and passes after"),
    "flaky": (False, "flaky over 3 runs: tests/test_mul.py::test_mul"),
    "refactor": (False, "no test changes"),
    "testsonly": (False, "only test changes"),
}


def ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fixture repository mined once through the CLI (--json); shared by the tests below."""
    tmp = tmp_path_factory.mktemp("mine")
    ids = fixture_repo(tmp / "repo")
    home = tmp / ".ledger"
    result = ledger(home, "tasks", "mine", str(tmp / "repo"), "--json")
    assert result.exit_code == 0, result.output
    return {"ids": ids, "home": home, "report": json.loads(result.stdout), "stderr": result.stderr,
            "repo": tmp / "repo"}


def test_mine_accepts_and_rejects_exactly_the_right_commits(mined: dict[str, Any]) -> None:
    """Only the fix commit whose new test fails before and passes after becomes a task; every other one says why not."""
    by_commit = {r["commit"]: r for r in mined["report"]["results"]}
    for label, (accepted, phrase) in EXPECTED.items():
        got = by_commit[mined["ids"][label]]
        assert got["accepted"] is accepted, (label, got)
        assert phrase in got["reason"], (label, got["reason"])
    assert mined["report"]["accepted"] == 1 and mined["report"]["rejected"] == 5
    assert "flaky over 3 runs" in mined["stderr"]  # progress goes to stderr


def test_mined_task_is_fair_and_records_where_it_came_from(mined: dict[str, Any]) -> None:
    """The written folder loads, validates (every check), holds patches, ids and source; the prompt is the message."""
    folder = Path(next(r["folder"] for r in mined["report"]["results"] if r["accepted"]))
    task = load_task(folder)
    fix = mined["ids"]["fix"]
    assert task.source == {"repo": str(mined["repo"].resolve()), "commit": fix, "parent": mined["ids"]["root"]}
    assert task.fail_to_pass == ("tests/test_calc.py::test_add",)
    assert task.pass_to_pass == ("tests/test_calc.py::test_neg",)
    assert task.solution.kind == "patch" and task.hidden_tests_patch == "tests/hidden.patch"
    assert task.prompt.startswith("Fix add() returning the difference")
    assert "return a + b" not in task.prompt and "test_add" not in task.prompt  # never the diff
    assert "a + b" not in (task.repo_dir / "calc.py").read_text()  # the starting repo is the parent
    result = validate_task(task)
    assert result.ok, result.failed
    assert {c.name for c in result.checks} >= {"required-outcomes", "hidden-fails-before", "solution-applies"}


def test_mined_task_oracle_passes_and_noop_fails_in_a_run(mined: dict[str, Any]) -> None:
    """`ledger run` grades the mined task by its test ids: the oracle's patch passes, doing nothing fails."""
    result = ledger(mined["home"], "run", "--tier", "mined", "--agent", "oracle", "--agent", "noop",
                    "--trace", "none", "--json")
    assert result.exit_code == 0, result.output
    got = {a["agent"]: a["outcome"] for a in json.loads(result.stdout)["attempts"]}
    assert got == {"oracle": "passed", "noop": "failed"}


def test_mine_selected_commit_with_statement_and_custom_test_command(tmp_path: Path) -> None:
    """--commit picks one commit, --statement text leads the prompt, --test-cmd is stored and used."""
    ids = fixture_repo(tmp_path / "repo")
    issue = tmp_path / "issue.md"
    issue.write_text("Users report that add(2, 3) gives -1.\n")
    report = mine(MineOptions(repo=tmp_path / "repo", commits=(ids["fix"][:10],), out=tmp_path / "out",
                              statement=issue.read_text(), test_command=("python", "-m", "pytest", "-q")))
    assert [r.commit for r in report.results] == [ids["fix"]] and report.accepted
    task = load_task(Path(report.accepted[0].folder))
    assert task.prompt.startswith("Users report that add(2, 3) gives -1.")
    assert task.test_command == ("python", "-m", "pytest", "-q", "-rA")
    assert validate_task(task).ok


def test_mine_max_and_since_limit_the_history(tmp_path: Path) -> None:
    """--since skips older commits; --max stops after N accepted tasks."""
    repo = init(tmp_path / "repo")
    from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_ADD, TEST_NEG
    commit(repo, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG}, date="2020-01-01T00:00:00")
    commit(repo, "fix add", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD}, date="2020-01-02T00:00:00")
    commit(repo, "docs", {"README.md": "x\n"}, date="2024-01-01T00:00:00")
    recent = mine(MineOptions(repo=repo, since="2023-01-01", out=tmp_path / "a", validate=False))
    assert [r.reason for r in recent.results] == ["no test changes: nothing shows the fix"]
    capped = mine(MineOptions(repo=repo, max_tasks=1, out=tmp_path / "b", validate=False))
    # the fix is examined first (it says it fixes something), so the other two never are
    assert len(capped.accepted) == 1 and [r.subject for r in capped.results] == ["fix add"]


def test_mine_rejects_what_it_cannot_package(tmp_path: Path) -> None:
    """A symlink in the starting tree and a change to test helpers only are rejected with the reason."""
    repo = init(tmp_path / "repo")
    from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_ADD, TEST_NEG
    commit(repo, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})
    (repo / "link").symlink_to("calc.py")
    commit(repo, "link", {})
    fix = commit(repo, "fix", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD})
    helper = commit(repo, "helper", {"calc.py": CALC_FIXED + "\n", "tests/conftest.py": "X = 1\n"})
    report = mine(MineOptions(repo=repo, commits=(fix, helper), out=tmp_path / "out"))
    assert [r.reason for r in report.results] == [
        "the starting tree holds symlinks (task folders are self-contained)",
        "no test module added or changed (only helpers or conftest)"]


def test_mine_cli_errors_and_exit_codes(tmp_path: Path) -> None:
    """Not a repository: exit 2, one line; nothing accepted: exit 1."""
    plain = tmp_path / "plain"
    plain.mkdir()
    bad = ledger(tmp_path / ".ledger", "tasks", "mine", str(plain))
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    repo = init(tmp_path / "repo")
    commit(repo, "only", {"a.py": "x = 1\n"})
    none = ledger(tmp_path / ".ledger", "tasks", "mine", str(repo))
    assert none.exit_code == 1 and "0 accepted, 1 rejected" in none.stdout
    assert git(repo, "status", "--porcelain") == ""  # mining never touches the repository


@pytest.mark.parametrize("path,is_test", [
    ("tests/test_a.py", True), ("pkg/tests/helpers.py", True), ("test_a.py", True), ("a_test.py", True),
    ("conftest.py", True), ("pkg/a.py", False), ("pkg/testing_utils.py", False), ("docs/tests.md", False),
])
def test_test_paths_are_classified(path: str, is_test: bool) -> None:
    """Test files are split from the solution by folder and name, as SWE-bench's test_patch is."""
    assert is_test_path(path) is is_test


def test_mined_tests_run_sandboxed_and_cannot_write_outside(tmp_path: Path) -> None:
    """With bubblewrap, a mined commit's tests run isolated: a write outside their folder fails and lands nowhere."""
    from ledger.run.task_runner import task_confinement
    from ledger.sandbox import resolve
    if resolve("auto").mode == "none":
        pytest.skip("no sandbox backend is usable on this host")
    from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_NEG
    escape = tmp_path / "outside" / "escaped.txt"
    escape.parent.mkdir()
    repo = init(tmp_path / "repo")
    commit(repo, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})
    sneaky = (f"from pathlib import Path\n\nfrom calc import add\n\n\ndef test_add():\n"
              f"    Path({str(escape)!r}).write_text('x')\n    assert add(2, 3) == 5\n")
    fix = commit(repo, "fix", {"calc.py": CALC_FIXED, "tests/test_sneaky.py": sneaky})
    # allow_thin: the statement "fix" names nothing, and the sneaky test must still run
    report = mine(MineOptions(repo=repo, commits=(fix,), out=tmp_path / "out", allow_thin=True),
                  confinement=task_confinement("auto"))
    assert report.sandboxed
    assert report.results[0].reason.startswith("no test fails before and passes after")
    assert not escape.exists()


def test_mine_report_says_whether_tests_were_sandboxed(mined: dict[str, Any]) -> None:
    """--json tells whether the test runs were isolated (bubblewrap present) or ordinary processes."""
    from ledger.sandbox import resolve
    assert mined["report"]["sandboxed"] is (resolve("auto").mode != "none")
