"""The task fields mined and imported tasks need: loading, one clear error per bad field, and their
grading helpers (patches, pytest -rA reports, reward files, `needs: container`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.errors import TaskError
from ledger.tasks import apply
from ledger.tasks.loader import load_task, task_summary
from ledger.tasks.validate import validate_task
from tests.tasks.helpers import FIXED, START, make_task

# Unified diffs; "|" stands for the single space of an empty context line.
FIX_PATCH = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
|
|
 def neg(a):
""".replace("\n|\n", "\n \n").replace("\n|\n", "\n \n")
TEST_PATCH = """diff --git a/tests/test_neg.py b/tests/test_neg.py
--- a/tests/test_neg.py
+++ b/tests/test_neg.py
@@ -1,5 +1,9 @@
-from calc import neg
+from calc import add, neg
|
|
 def test_neg():
     assert neg(2) == -2
+
+
+def test_add_sums():
+    assert add(2, 3) == 5
""".replace("\n|\n", "\n \n").replace("\n|\n", "\n \n")
PATCHED = {
    "solution": {"patch": "solution/fix.patch"},
    "hidden_tests": {"patch": "tests/hidden.patch"},
    "required_outcomes": {"FAIL_TO_PASS": ["tests/test_neg.py::test_add_sums"],
                          "PASS_TO_PASS": ["tests/test_neg.py::test_neg"]},
    "source": {"repo": "https://example.invalid/calc.git", "commit": "a" * 40, "parent": "b" * 40},
}
PATCH_FILES = {"solution/fix.patch": FIX_PATCH, "tests/hidden.patch": TEST_PATCH, "solution/calc.py": None,
               "tests/test_add_hidden.py": None}


def patched_task(parent: Path, front: dict[str, Any] | None = None, **kw: Any) -> Path:
    """A task whose solution and hidden tests are patches, graded by test ids."""
    folder = make_task(parent, front={**PATCHED, **(front or {})}, drop=("completion_signals",
                       "expected_files_modified"), files={k: v for k, v in PATCH_FILES.items() if v}, **kw)
    for rel, text in PATCH_FILES.items():
        if text is None:
            (folder / rel).unlink()
    return folder


# One bad value per field: (name, frontmatter override, phrase the error must contain).
BAD_FIELDS = [
    ("solution-two-kinds", {"solution": {"patch": "solution/fix.patch", "command": "true"}}, "solution: give exactly one"),
    ("solution-patch-outside", {"solution": {"patch": "repo/calc.py"}}, "solution.patch: must name a file under solution/"),
    ("solution-patch-missing", {"solution": {"patch": "solution/nope.patch"}}, "solution.patch: solution/nope.patch does not exist"),
    ("solution-unknown-key", {"solution": {"diff": "x"}}, "solution: unknown key(s) ['diff']"),
    ("hidden-tests-patch-outside", {"hidden_tests": {"patch": "solution/fix.patch"}}, "hidden_tests.patch: must name a file under tests/"),
    ("required-outcomes-empty", {"required_outcomes": {"FAIL_TO_PASS": []}}, "required_outcomes.FAIL_TO_PASS: at least one"),
    ("required-outcomes-not-ids", {"required_outcomes": {"FAIL_TO_PASS": ["-k add"]}}, "is not a test id"),
    ("required-outcomes-overlap", {"required_outcomes": {"FAIL_TO_PASS": ["t.py::a"], "PASS_TO_PASS": ["t.py::a"]}},
     "in both FAIL_TO_PASS and PASS_TO_PASS"),
    ("required-outcomes-lowercase", {"required_outcomes": {"fail_to_pass": ["t.py::a"]}}, "required_outcomes: unknown key(s)"),
    ("required-outcomes-with-hidden-command", {"hidden_test_command": "pytest"}, "hidden_test_command is derived"),
    ("grading-and-outcomes", {"grading": {"command": "sh t.sh"}}, "grading and required_outcomes exclude"),
    ("source-bad-commit", {"source": {"repo": "r", "commit": "HEAD"}}, "source.commit: expected a git commit id"),
    ("source-no-repo", {"source": {"commit": "a" * 40}}, "source: missing key(s) ['repo']"),
    ("needs-unknown", {"needs": ["gpu"]}, "needs: unknown need(s) ['gpu']"),
]


@pytest.mark.parametrize("name,front,phrase", BAD_FIELDS, ids=[b[0] for b in BAD_FIELDS])
def test_bad_field_is_a_load_error_naming_it(tmp_path: Path, name: str, front: dict[str, Any], phrase: str) -> None:
    """Each malformed new field is refused at load time, and the error names the field."""
    folder = patched_task(tmp_path, front)
    with pytest.raises(TaskError) as err:
        load_task(folder, tier="t")
    assert phrase in str(err.value)
    assert "task.md" in str(err.value)


def test_grading_fields_are_checked(tmp_path: Path) -> None:
    """A grading reward file must be reward.txt or reward.json; test_command needs required_outcomes."""
    folder = make_task(tmp_path, front={"grading": {"command": "sh x.sh", "reward_file": "score.txt"}})
    with pytest.raises(TaskError, match=r"grading.reward_file: must be one of reward.txt, reward.json"):
        load_task(folder, tier="t")
    folder = make_task(tmp_path / "b", front={"test_command": "pytest"})
    with pytest.raises(TaskError, match="test_command is only used with required_outcomes"):
        load_task(folder, tier="t")


def test_patched_task_loads_derives_commands_and_validates(tmp_path: Path) -> None:
    """Patch solution + hidden patch + test ids: the hidden command runs both id lists, no regression suite, fair."""
    task = load_task(patched_task(tmp_path), tier="t")
    assert task.hidden_test_command[-2:] == ("tests/test_neg.py::test_add_sums", "tests/test_neg.py::test_neg")
    assert task.regression_command == ()
    summary = task_summary(task)
    assert "tests/test_neg.py::test_add_sums" not in json.dumps(summary)  # hidden ids are not shown
    assert "source" not in summary  # the fix commit is not pointed at
    result = validate_task(task)
    assert result.ok, result.failed


def test_wrong_required_outcome_fails_validation(tmp_path: Path) -> None:
    """A PASS_TO_PASS id that does not exist, or a FAIL_TO_PASS id that passes before, fails required-outcomes."""
    front = {"required_outcomes": {"FAIL_TO_PASS": ["tests/test_neg.py::test_add_sums", "tests/test_neg.py::test_neg"]}}
    result = validate_task(load_task(patched_task(tmp_path, front), tier="t"))
    check = next(c for c in result.checks if c.name == "required-outcomes")
    assert not check.passed and "FAIL_TO_PASS tests/test_neg.py::test_neg passes before" in check.detail


def test_hidden_patch_resets_files_the_agent_changed(tmp_path: Path) -> None:
    """The agent's edit of a test file the hidden patch touches is undone before the patch applies."""
    task = load_task(patched_task(tmp_path), tier="t")
    work = tmp_path / "work"
    import shutil
    shutil.copytree(task.repo_dir, work)
    (work / "tests" / "test_neg.py").write_text("def test_neg():\n    pass\n")  # the agent weakened it
    apply.install_hidden_tests(task, work)
    text = (work / "tests" / "test_neg.py").read_text()
    assert "assert neg(2) == -2" in text and "def test_add_sums" in text


def test_solution_command_runs_with_the_solution_dir(tmp_path: Path) -> None:
    """A command solution runs in the worktree with LEDGER_SOLUTION_DIR pointing at solution/."""
    folder = make_task(tmp_path, front={"solution": {"command": 'sh "$LEDGER_SOLUTION_DIR/solve.sh"'}},
                       files={"solution/solve.sh": "cp \"$LEDGER_SOLUTION_DIR/calc.py.new\" calc.py\n",
                              "solution/calc.py.new": FIXED}, drop=("expected_files_modified",))
    (folder / "solution" / "calc.py").unlink()
    task = load_task(folder, tier="t")
    work = tmp_path / "w"
    work.mkdir()
    (work / "calc.py").write_text(START)
    assert apply.apply_solution(task, work).ok
    assert (work / "calc.py").read_text() == FIXED
    assert validate_task(task).ok


# pytest -rA report lines -> parsed outcomes (SWE-bench's parse_log_pytest reads the same lines).
REPORTS = [
    ("pass-and-fail", "PASSED tests/a.py::test_x\nFAILED tests/a.py::test_y - assert 1 == 2\n",
     {"tests/a.py::test_x": "passed", "tests/a.py::test_y": "failed"}),
    ("params-with-dashes", "PASSED tests/a.py::test_p[a - b]\nFAILED tests/a.py::test_p[c - d] - assert 0\n",
     {"tests/a.py::test_p[a - b]": "passed", "tests/a.py::test_p[c - d]": "failed"}),
    ("class-method", "PASSED tests/a.py::TestK::test_m\n", {"tests/a.py::TestK::test_m": "passed"}),
    ("collection-error", "ERROR tests/b.py - ImportError: cannot import name 'mul'\n", {"tests/b.py": "error"}),
    ("skip-without-id", "SKIPPED [1] tests/a.py:3: no network\n", {}),
    ("teardown-error-wins", "PASSED tests/a.py::t\nERROR tests/a.py::t - RuntimeError\n", {"tests/a.py::t": "error"}),
    ("noise-ignored", "tests/a.py::t PASSED   [ 50%]\n==== 1 passed ====\n", {}),
]


@pytest.mark.parametrize("name,text,want", REPORTS, ids=[r[0] for r in REPORTS])
def test_pytest_report_parsing(name: str, text: str, want: dict[str, str]) -> None:
    """Per-test outcomes come from the short summary lines only, keyed by node id."""
    assert apply.parse_pytest_report(text) == want


REWARDS = [
    ("txt-one", "reward.txt", "1\n", 1.0),
    ("txt-zero", "reward.txt", "0", 0.0),
    ("txt-garbage", "reward.txt", "yes", None),
    ("json-reward", "reward.json", '{"reward": 0.5, "other": 1}', 0.5),
    ("json-min-of-named", "reward.json", '{"tests": 1, "style": 0.0}', 0.0),
    ("json-list", "reward.json", "[1]", None),
    ("json-nan", "reward.json", '{"reward": NaN}', None),
]


@pytest.mark.parametrize("name,file,text,want", REWARDS, ids=[r[0] for r in REWARDS])
def test_reward_files(tmp_path: Path, name: str, file: str, text: str, want: float | None) -> None:
    """reward.txt is one number; reward.json its `reward` or the least named reward; junk is no reward."""
    (tmp_path / file).write_text(text)
    assert apply.read_reward(tmp_path, file)[0] == want
    assert apply.read_reward(tmp_path / "none", file) == (None, f"no {file} written")


def test_run_refuses_tasks_that_need_a_container(tmp_path: Path) -> None:
    """`ledger run` on needs-container tasks only: exit 3; mixed with runnable ones: exit 2 naming them."""
    home = tmp_path / ".ledger"
    make_task(home / "golden" / "box", "t-box", front={"needs": ["container"]})
    runner = CliRunner()
    only = runner.invoke(cli, ["--ledger", str(home), "run", "--tier", "box", "--agent", "noop", "--trace", "none"])
    assert only.exit_code == 3, only.output
    assert "t-box (needs container)" in only.stderr and "no container executor" in only.stderr
    make_task(home / "golden" / "box", "t-plain")
    mixed = runner.invoke(cli, ["--ledger", str(home), "run", "--tier", "box", "--agent", "noop", "--trace", "none"])
    assert mixed.exit_code == 2 and "1 selected task(s) cannot run on this host" in mixed.stderr
    assert not (home / "journal.db").exists() or "t-box" not in (home / "journal.db").read_bytes().decode("latin-1")
    val = runner.invoke(cli, ["--ledger", str(home), "tasks", "validate", "--tier", "box", "--task", "t-box", "--json"])
    assert val.exit_code == 1
    assert json.loads(val.stdout)["tasks"][0]["checks"][0]["name"] == "host"


def test_every_frontmatter_key_is_documented() -> None:
    """docs/TASKS.md's key table names every key the loader accepts (and no key it refuses)."""
    import re

    from ledger.tasks.loader import _KEYS
    doc = (Path(__file__).resolve().parents[2] / "docs" / "TASKS.md").read_text()
    table = set(re.findall(r"^\| `([a-z_]+)` \|", doc, re.MULTILINE))
    assert set(_KEYS) <= table, sorted(set(_KEYS) - table)


def test_tasks_commands_have_help_and_docs() -> None:
    """`ledger tasks mine` and both importers have help text and a line in docs/CLI.md."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text()
    for args, usage in ((["tasks", "mine"], "ledger tasks mine REPO"),
                        (["tasks", "import", "swebench"], "ledger tasks import swebench FILE.jsonl"),
                        (["tasks", "import", "harbor"], "ledger tasks import harbor DIR")):
        result = CliRunner().invoke(cli, [*args, "--help"])
        assert result.exit_code == 0 and "--json" in result.output
        assert usage in doc
