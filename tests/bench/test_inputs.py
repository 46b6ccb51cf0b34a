"""Task inputs: hash, snapshot, files, diff, the packaged corpus and its executable checks."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from evaluators.responses import code_files
from ledger.bench import inputs
from ledger.bench.checks import corpus_check
from ledger.errors import NotFound, UsageError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_task_hash_is_sha256_of_the_text() -> None:
    """task_hash is the hex SHA-256 of the task text (not of the framed prompt)."""
    task = inputs.task_from_prompt("Write add(a, b)")
    assert task.task_hash == hashlib.sha256(b"Write add(a, b)").hexdigest()
    assert task.agent_prompt().startswith("Write add(a, b)")
    assert "SELF_EVAL_SUMMARY: N/20" in task.agent_prompt()


def test_snapshot_is_bounded_and_optional() -> None:
    """The snapshot keeps the first 30,000 characters; --no-snapshot stores none."""
    task = inputs.task_from_prompt("x" * 40_000)
    assert task.snapshot() == "x" * 30_000
    assert task.snapshot(enabled=False) is None


@pytest.mark.parametrize("text", ["", "   \n", "y" * 100_001])
def test_empty_or_huge_prompt_is_refused(text: str) -> None:
    """An empty prompt, or one too long for an argument, is a usage error."""
    with pytest.raises(UsageError):
        inputs.task_from_prompt(text)


def test_files_become_the_task(tmp_path: Path) -> None:
    """--files concatenates each file under its name, with a fence longer than its content's."""
    (tmp_path / "a.md").write_text("Implement it.\n```py\nx\n```\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def f():\n    pass\n", encoding="utf-8")
    task = inputs.task_from_files(["a.md,b.py"], cwd=tmp_path)
    assert task.source == "files" and task.detail == {"files": ["a.md", "b.py"]}
    assert "## File: a.md\n\n````\nImplement it." in task.text
    assert "## File: b.py" in task.text
    with pytest.raises(NotFound):
        inputs.task_from_files(["missing.py"], cwd=tmp_path)


def test_diff_becomes_the_task(tmp_path: Path) -> None:
    """--diff REF takes `git diff REF`; an empty diff and a non-repository are usage errors."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    with pytest.raises(UsageError, match="git diff failed"):
        inputs.task_from_diff("HEAD~1", cwd=tmp_path)
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "one")
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    git("add", "m.py")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "two")
    task = inputs.task_from_diff("HEAD~1", cwd=tmp_path)
    assert task.source == "diff" and "+x = 1" in task.text and task.detail == {"ref": "HEAD~1"}
    with pytest.raises(UsageError, match="empty"):
        inputs.task_from_diff("HEAD", cwd=tmp_path)
    with pytest.raises(UsageError):
        inputs.task_from_diff("--output=/tmp/x", cwd=tmp_path)


def test_corpus_is_fixed_and_machine_checkable() -> None:
    """The packaged corpus has two or more tasks, one prompt, and a checks file per task."""
    corpus = inputs.load_corpus()
    assert len(corpus.tasks) >= 2
    assert corpus.files == ("order_service.py", "search_products.py")
    assert all(p.is_file() for p in corpus.check_paths())
    t1, t2 = inputs.corpus_task(), inputs.corpus_task()
    assert t1.task_hash == t2.task_hash and t1.mode == "corpus"
    assert "# FILE: order_service.py" in t1.agent_prompt()
    assert t1.agent_prompt() == t1.text  # the corpus prompt carries its own answer format


def test_incomplete_corpus_is_refused(tmp_path: Path) -> None:
    """A corpus folder without its checks is an error, not an empty benchmark."""
    (tmp_path / "corpus.json").write_text('{"version": "1", "code_prompt": "a", "tests_prompt": "a", "tasks": []}')
    (tmp_path / "a").write_text("x")
    with pytest.raises(UsageError):
        inputs.load_corpus(tmp_path)


def _answer(order: str) -> str:
    search = (FIXTURES / "ref_search_products.py").read_text(encoding="utf-8")
    return (f"```python\n# FILE: order_service.py\n{order}```\n"
            f"```python\n# FILE: search_products.py\n{search}```\n")


def test_corpus_checks_pass_the_reference_and_catch_a_bug() -> None:
    """The hidden checks pass on a correct answer and fail on one with a state-machine bug."""
    order = (FIXTURES / "ref_order_service.py").read_text(encoding="utf-8")
    corpus = inputs.load_corpus()
    good = corpus_check(code_files(_answer(order)), corpus, timeout=120)
    assert good["passed"] and good["counts"]["failed"] == 0 and good["counts"]["passed"] >= 30
    buggy = order.replace("ok = _NEXT.get(current) == new_status",
                          "ok = STATUSES.index(new_status) > STATUSES.index(current)")
    bad = corpus_check(code_files(_answer(buggy)), corpus, timeout=120)
    assert not bad["passed"] and bad["counts"]["failed"] >= 1
    missing = corpus_check({"order_service.py": order}, corpus, timeout=120)
    assert missing["missing_files"] == ["search_products.py"] and not missing["passed"]


def test_tests_and_review_prompts_carry_the_code() -> None:
    """The tests round embeds the agent's own files; the review prompt hides the self-eval."""
    task = inputs.corpus_task()
    answer = _answer("x = 1\n") + "\nSELF_EVAL_SUMMARY: 20/20\n"
    tests_prompt = task.tests_prompt(answer)
    assert "{{ROUND_1_CODE}}" not in tests_prompt and "# FILE: order_service.py\nx = 1" in tests_prompt
    review = task.review_prompt(answer, "code")
    assert review.startswith("You are reviewing another agent") and "20/20" not in review
    revise = task.revise_prompt(answer, ["bug one"], "code")
    assert "--- critique 1 ---\nbug one" in revise
