"""Ground truth read from the packaged golden tasks (ledger.tasks.material), end to end with redaction."""

from __future__ import annotations

import functools

import pytest

from attest import digests as dg
from attest.commitment import Commitment
from attest.redact import Redactor
from ledger.errors import UsageError
from ledger.journal.codec import encode_entry
from ledger.tasks.loader import available_tiers, load_repo_history, load_tier
from ledger.tasks.material import commitment_for_task, ground_truth_material, public_material
from ledger.tasks.model import Task

KEY = bytes(range(100, 132))


@functools.cache
def _tasks() -> tuple[Task, ...]:
    return tuple(t for tier in available_tiers() for t in load_tier(tier))


@functools.cache
def _commitment(task_id: str) -> Commitment:
    task = next(t for t in _tasks() if t.id == task_id)
    return commitment_for_task(task, key=KEY)


def _task(task_id: str) -> Task:
    return next(t for t in _tasks() if t.id == task_id)


TASK_IDS = [t.id for t in _tasks()]


def _distinctive_lines(task: Task) -> list[str]:
    """Lines of the hidden tests with some substance that the public material does not hold."""
    public = "\n".join(data.decode("utf-8", "replace") for _, data in public_material(task))
    lines = []
    for label, data in ground_truth_material(task):
        if label.startswith("tests/"):
            for line in data.decode().splitlines():
                s = line.strip()
                if len(dg.tokens(s)) >= 3 and s not in public:
                    lines.append(s)
    return lines


def test_material_is_derived_from_the_task() -> None:
    """Hidden tests, solution files and hidden fields are all sources; extra material is added."""
    task = _task("add-clamp")
    labels = [label for label, _ in ground_truth_material(task, [("notes", b"x")])]
    assert "tests/test_clamp_accept.py" in labels
    assert "solution/mathx/ops.py" in labels
    assert labels[-1] == "extra/notes"
    assert all(not label.startswith("repo/") for label in labels)


def test_extra_material_must_be_bytes() -> None:
    """Operator material is (name, bytes); anything else is a usage error."""
    with pytest.raises(UsageError):
        ground_truth_material(_task("add-clamp"), [("notes", "text")])  # type: ignore[list-item]


def test_public_material_is_the_repo_and_the_prompt() -> None:
    """The agent's view: repo files by path, prompt and title as @ texts, never ground truth."""
    task = _task("add-clamp")
    labels = dict(public_material(task))
    assert "mathx/ops.py" in labels and "@prompt" in labels and "@title" in labels
    assert not any(label.startswith(("tests/test_clamp_accept", "solution/")) for label in labels)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_no_hidden_test_line_survives_printing(task_id: str) -> None:
    """An agent that prints a packaged hidden test (plain, numbered, grepped) leaks no line."""
    task = _task(task_id)
    red = Redactor(_commitment(task_id), KEY)
    lines = _distinctive_lines(task)
    assert lines, "every packaged hidden test has distinctive lines"
    entries: list[bytes] = []
    for label, data in ground_truth_material(task):
        if not label.startswith("tests/"):
            continue
        text = data.decode()
        views = [text, "$ cat it\n" + text + "\n$ exit\n",
                 "\n".join(f"{i:6}\t{ln}" for i, ln in enumerate(text.splitlines(), 1)),
                 "\n".join(f"{i:6}\u2192{ln}" for i, ln in enumerate(text.splitlines(), 1)),
                 "\n".join(f"{label}:{i}:{ln}" for i, ln in enumerate(text.splitlines(), 1))]
        for view in views:
            entries.append(encode_entry(seq=len(entries), ts=0, kind="agent.output",
                                        data={"attempt": "a", "text": red(view)}).raw)
    blob = b"".join(entries)
    for line in lines:
        assert line.encode() not in blob, line


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_commitment_of_packaged_task_has_no_plaintext(task_id: str) -> None:
    """The commitment entry of every packaged task holds none of its hidden test lines."""
    raw = encode_entry(seq=0, ts=0, kind="commitment",
                       data={"commitment": _commitment(task_id).as_data()}).raw
    for line in _distinctive_lines(_task(task_id)):
        assert line.encode() not in raw


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reading_the_repo_matches_nothing(task_id: str) -> None:
    """The starting repo, prompt and summary pass redaction unchanged (no false positives)."""
    task = _task(task_id)
    red = Redactor(_commitment(task_id), KEY)
    for label, data in public_material(task):
        text = data.decode("utf-8", "replace")
        assert red.scan_text(text) == [], label
        assert red(text) == text


def test_fix_planted_in_history_is_ground_truth() -> None:
    """Adversarial tier: the history's fix commit matches the commitment (git show is caught)."""
    task = _task("median-even-unsorted")
    red = Redactor(_commitment(task.id), KEY)
    history = load_repo_history(task)
    fix = [c for c in history if c.message.startswith("Fix")]
    assert fix
    shown = "\n".join(content for c in fix for content in c.files.values() if content)
    assert red.scan_text(shown)
