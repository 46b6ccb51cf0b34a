"""The collect step, right after the agent: what it changed (the ``diff``, taken before the
hidden tests enter) and where grading runs (``Graded``).

Sandboxed, the agent's graded changes (``ledger.sandbox.grading``: its owned files, nothing
under the hidden tests' folder) are carried into the grading tree, a fresh copy of the task's
starting repo that no agent's sandbox showed; unsandboxed, grading runs in the agent's own tree."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ledger.run.attempt.prepare import Attempt, grading_box, prepare_grading
from ledger.run.workspace import Workspace, take_diff

if TYPE_CHECKING:
    from ledger.sandbox.port import Box


@dataclasses.dataclass(frozen=True)
class Graded:
    """Where the attempt is graded."""

    tree: Workspace  # the grading tree, or the agent's own workspace
    box: Box  # the grading box over it (``ledger.sandbox.port``)
    own_tree: bool  # the agent's own tree: tests it added are collected too
    record: dict[str, Any] | None  # the ``grading`` entry (graded and dropped files, sandbox)


def collect(att: Attempt, grading: tuple[Workspace, Box] | None
            ) -> tuple[dict[str, Any], Graded]:
    """``(diff, where to grade)``; ``grading``: the grading tree and box made ahead, if any."""
    diff = take_diff(att.ws, att.task.repo_dir, redact=att.redact)
    if not att.sandbox.isolated:
        return diff, Graded(att.ws, grading_box(att, att.ws), own_tree=True, record=None)
    from ledger.sandbox.grading import apply_changes, graded_changes

    task, ws, redact = att.task, att.ws, att.redact
    tree, box = grading if grading is not None else prepare_grading(att)
    graded, dropped = graded_changes(
        diff.get("files") or [], owned=task.owned_files, hidden_dir=task.hidden_tests_dir,
        repo_dir=task.repo_dir, worktree=ws.worktree)
    dropped += apply_changes(graded, source=ws.worktree, target=tree.worktree)
    lost = {d["path"] for d in dropped}
    record = {
        "isolation": "sandbox",
        "graded": [f["path"] for f in graded if f["path"] not in lost],
        "dropped": [{"path": redact(d["path"]), "reason": d["reason"]} for d in dropped],
        "sandbox": box.as_data(),
    }
    return diff, Graded(tree, box, own_tree=False, record=record)
