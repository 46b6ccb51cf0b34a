"""Mining a repository that merges pull requests (issue 24): the fix on a merged branch is found
(a first-parent walk skipped it), a feature whose statement names nothing its tests call is
rejected as too thin, and a pull-request description from --statement-from makes it fair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.tasks.mine import symbols_under_test, thin_statement
from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_ADD, TEST_NEG, commit, git, init

CALC_POWERSET = CALC_FIXED + (
    "\n\ndef powerset_of_sets(items):\n    out = [[]]\n    for x in items:\n"
    "        out += [s + [x] for s in out]\n    return out\n")
TEST_POWERSET = TEST_ADD.replace("from calc import add, neg", "from calc import add, neg, powerset_of_sets") + (
    "\n\ndef test_powerset():\n    assert len(powerset_of_sets([1, 2, 3])) == 8\n")


def merged_repo(root: Path) -> dict[str, str]:
    """main: start -> merge of branch `fix-add` (its commit fixes add with a test) -> a feature
    commit "Issue 820: new helper (#828)" adding powerset_of_sets and its test."""
    repo = init(root)
    ids = {"root": commit(repo, "Start calc", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})}
    git(repo, "checkout", "-q", "-b", "fix-add")
    ids["fix"] = commit(repo, "Fix add() returning the difference (#12)\n\nadd(a, b) must return the sum.",
                        {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD})
    git(repo, "checkout", "-q", "main")
    commit(repo, "Docs", {"README.md": "calc\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #12 from fix-add", "fix-add")
    ids["merge"] = git(repo, "rev-parse", "HEAD")
    ids["feature"] = commit(repo, "Issue 820: new helper (#828)",
                            {"calc.py": CALC_POWERSET, "tests/test_calc.py": TEST_POWERSET})
    return ids


def mine(home: Path, repo: Path, *extra: str) -> dict[str, Any]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), "tasks", "mine", str(repo), "--json", *extra])
    assert res.exit_code in (0, 1), res.output
    return {r["commit"]: r for r in json.loads(res.stdout)["results"]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("merges")
    return tmp / "repo", merged_repo(tmp / "repo")


def test_the_fix_on_a_merged_branch_is_found(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The default walk examines the branch's fix commit and accepts it; --first-parent never
    sees it (what mining did before)."""
    path, ids = repo
    results = mine(tmp_path / "a", path)
    assert results[ids["fix"]]["accepted"] is True, results[ids["fix"]]
    old = mine(tmp_path / "b", path, "--first-parent")
    assert ids["fix"] not in old


def test_a_statement_that_names_nothing_the_tests_call_is_too_thin(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """"Issue 820: new helper (#828)" never names powerset_of_sets: rejected as too thin."""
    path, ids = repo
    got = mine(tmp_path / "c", path, "--commit", ids["feature"])[ids["feature"]]
    assert got["accepted"] is False and "statement too thin" in got["reason"]
    assert "powerset_of_sets" in got["reason"]


def test_a_pull_request_description_makes_it_a_fair_task(repo: tuple[Path, dict[str, str]],
                                                        tmp_path: Path) -> None:
    """--statement-from DIR with pr-828.md naming the function: accepted, and the description is
    the start of the task's statement."""
    path, ids = repo
    prs = tmp_path / "prs"
    prs.mkdir()
    (prs / "pr-828.md").write_text("Add powerset_of_sets(items): every subset, as lists.\n")
    got = mine(tmp_path / "d", path, "--commit", ids["feature"], "--statement-from", str(prs))
    assert got[ids["feature"]]["accepted"] is True, got[ids["feature"]]
    task_md = Path(got[ids["feature"]]["folder"]) / "task.md"
    body = task_md.read_text().split("---", 2)[2]
    assert body.strip().startswith("Add powerset_of_sets(items)")


def test_fix_commits_are_examined_first(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Commits that say they fix something or name an issue come before the rest."""
    path, ids = repo
    order = list(mine(tmp_path / "e", path, "--allow-thin"))
    assert order.index(ids["fix"]) < order.index(ids["root"])


@pytest.mark.parametrize("statement,thin", [
    ("Issue 820: new helper (#828)", True),
    ("Add powerset_of_sets", False),
])
def test_thin_statement_rule(statement: str, thin: bool) -> None:
    """The rule on the patches themselves: the symbols are what the fix defines and the tests use."""
    fix = "@@ -1 +1,3 @@\n+def powerset_of_sets(items):\n+    return []\n def add(a, b):\n"
    tests = "+from calc import powerset_of_sets\n+def test_p():\n+    assert powerset_of_sets([]) == []\n"
    assert symbols_under_test(fix, tests) == {"powerset_of_sets"}
    assert thin_statement(statement, symbols_under_test(fix, tests)) is thin
