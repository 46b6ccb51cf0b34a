"""The collect step, right after the agent: what it changed (the ``diff``, taken before the
hidden tests enter) and where grading runs (``Graded``).

Sandboxed, the agent's graded changes (``ledger.sandbox.grading``: its owned files, nothing
under the hidden tests' folder) are carried into the grading tree, a fresh copy of the task's
starting repo that no agent's sandbox showed; unsandboxed, grading runs in the agent's own tree."""

from __future__ import annotations

import dataclasses
from typing import Any

from ledger.run.attempt.prepare import Attempt, prepare_grading
from ledger.run.workspace import Workspace, take_diff


@dataclasses.dataclass(frozen=True)
class Graded:
    """Where the attempt is graded."""

    tree: Workspace  # the grading tree, or the agent's own workspace
    policy: Any  # the grading sandbox's policy; None: no sandbox
    own_tree: bool  # the agent's own tree: tests it added are collected too
    record: dict[str, Any] | None  # the ``grading`` entry (graded and dropped files, sandbox)


def collect(att: Attempt, grading: tuple[Workspace, Any] | None
            ) -> tuple[dict[str, Any], Graded]:
    """``(diff, where to grade)``; ``grading``: the grading tree and policy made ahead, if any."""
    diff = take_diff(att.ws, att.task.repo_dir, redact=att.redact)
    if not att.isolated:
        return diff, Graded(att.ws, None, own_tree=True, record=None)
    from ledger.sandbox.grading import apply_changes, graded_changes

    task, ws, redact = att.task, att.ws, att.redact
    tree, policy = grading if grading is not None else prepare_grading(att.settings, task, ws)
    graded, dropped = graded_changes(
        diff.get("files") or [], owned=task.owned_files, hidden_dir=task.hidden_tests_dir,
        repo_dir=task.repo_dir, worktree=ws.worktree)
    dropped += apply_changes(graded, source=ws.worktree, target=tree.worktree)
    lost = {d["path"] for d in dropped}
    record = {
        "isolation": "sandbox",
        "graded": [f["path"] for f in graded if f["path"] not in lost],
        "dropped": [{"path": redact(d["path"]), "reason": d["reason"]} for d in dropped],
        "sandbox": policy.as_data(),
    }
    return diff, Graded(tree, policy, own_tree=False, record=record)
