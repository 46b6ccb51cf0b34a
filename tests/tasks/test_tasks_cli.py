"""`ledger tasks list|show|validate`: output, exit codes, and nothing hidden on screen."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.main import cli
from ledger.tasks.loader import load_tasks
from tests.tasks.helpers import START, make_task


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--ledger", str(tmp_path / ".ledger"), "tasks", *args])
    return result.exit_code, result.stdout, result.stderr


def test_list_json_counts_every_tier(tmp_path: Path) -> None:
    """`tasks list --json` lists every packaged task with its tier, hash and budgets."""
    code, out, _ = _run(tmp_path, "list", "--json")
    assert code == 0
    data = json.loads(out)
    tiers = [t["tier"] for t in data["tasks"]]
    assert tiers.count("smoke") >= 5 and tiers.count("standard") >= 10
    assert tiers.count("stretch") >= 5 and tiers.count("adversarial") >= 5
    assert all(len(t["hash"]) == 64 for t in data["tasks"])
    assert {"max_duration_s", "max_cost_usd", "max_tokens", "signals"} <= set(data["tasks"][0])


def test_list_table_filters_by_tier(tmp_path: Path) -> None:
    """`tasks list --tier smoke` prints only smoke tasks and a count line."""
    code, out, _ = _run(tmp_path, "list", "--tier", "smoke")
    assert code == 0
    assert "add-clamp" in out and "retry-backoff" not in out
    assert "5 task(s)" in out


def test_unknown_task_is_exit_2_with_suggestion(tmp_path: Path) -> None:
    """An unknown id is one error line on stderr with the closest ids, exit 2."""
    code, out, err = _run(tmp_path, "show", "add-clmp")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "add-clamp" in err and "Traceback" not in err


def test_show_prints_prompt_but_no_ground_truth(tmp_path: Path) -> None:
    """`tasks show` prints the prompt and metadata, never hidden fields, hidden tests or the solution."""
    (task,) = load_tasks(ids=["median-even-unsorted"])
    code, out, _ = _run(tmp_path, "show", task.id)
    assert code == 0
    assert task.prompt.splitlines()[0] in out and task.hash in out
    assert "hidden fields" in out and "(not shown)" in out
    for value in task.hidden_fields.values():
        assert str(value) not in out
    assert "ordered[mid - 1]" not in out and "test_even_count" not in out
    code, out, _ = _run(tmp_path, "show", "--task", task.id, "--json")
    (shown,) = json.loads(out)
    assert shown["prompt"] == task.prompt and "hidden" not in shown and shown["hidden_field_count"] == 2


def test_operator_override_is_listed(tmp_path: Path) -> None:
    """Tasks under <ledger>/golden/<tier>/ replace the packaged tier in the listing."""
    make_task(tmp_path / ".ledger" / "golden" / "smoke", "op-add")
    code, out, _ = _run(tmp_path, "list", "--tier", "smoke", "--json")
    assert code == 0
    data = json.loads(out)
    assert [t["id"] for t in data["tasks"]] == ["op-add"]
    assert data["sources"]["smoke"] == str(tmp_path / ".ledger" / "golden" / "smoke")


def test_broken_operator_task_is_exit_2(tmp_path: Path) -> None:
    """A malformed operator task is reported (file and signal named) with exit 2."""
    make_task(tmp_path / ".ledger" / "golden" / "smoke", "op-bad", front={"completion_signals": ["looks right"]})
    code, _, err = _run(tmp_path, "list")
    assert code == 2 and "looks right" in err and "task.md" in err


def test_validate_ok_and_failing(tmp_path: Path) -> None:
    """`tasks validate` exits 0 when every task is fair and 1 (naming the task and check) when one is not."""
    golden = tmp_path / ".ledger" / "golden" / "smoke"
    make_task(golden, "op-good")
    code, out, _ = _run(tmp_path, "validate", "--tier", "smoke")
    assert code == 0 and "op-good" in out and "1 of 1 task(s) valid" in out
    make_task(golden, "op-unsolved", files={"solution/calc.py": START})
    code, out, err = _run(tmp_path, "validate", "--tier", "smoke")
    assert code == 1
    assert "hidden-passes-after" in out and "1 of 2 task(s) valid" in out
    assert "op-unsolved" in err and err.startswith("error: task-validation")
    code, out, _ = _run(tmp_path, "validate", "--task", "op-unsolved", "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    failed = {c["name"] for c in data["tasks"][0]["checks"] if not c["passed"]}
    assert "hidden-passes-after" in failed


def test_every_command_has_help(tmp_path: Path) -> None:
    """list, show and validate each have help text."""
    for name in ("list", "show", "validate"):
        code, out, _ = _run(tmp_path, name, "--help")
        assert code == 0 and "--json" in out and "--tier" in out
