"""The hidden test ids fixed before the agent starts (the ``grading.expected`` entry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.commandenv import command_env
from ledger.errors import TaskError
from ledger.run.attempt.commands import Boxed, is_pytest, python_argv, run_suite
from ledger.run.attempt.prepare import Attempt, commit_ground_truth, grading_box
from ledger.run.workspace import create_grading_tree, install_hidden_tests, remove_tree

_EXPECTED: dict[tuple[str, str, str], dict[str, Any]] = {}  # a worker's collected ids
_EXPECTED_MAX = 64


def expected_hidden(att: Attempt) -> dict[str, Any] | None:
    """The ``grading.expected`` entry: the hidden test ids fixed before the agent starts.

    A task graded by test ids lists them (FAIL_TO_PASS + PASS_TO_PASS); a pytest hidden suite
    is collected by the harness's reporter in a fresh copy of the starting tree with the hidden
    tests installed (in the grading sandbox when the attempt is sandboxed), or, when a module
    fails to collect there (the tests import what the agent is to write), with the reference
    solution applied. Kept per worker by task hash; ids this ledger already collected for the
    task hash (``AttemptSettings.known_expected``, ``ledger.run.expected_reuse``) are taken as
    they are, ``reused`` naming the entry. None: the task's own runner decides."""
    task = att.task
    if not is_pytest(python_argv(task.hidden_test_command)):
        return None
    if task.graded_by_ids:
        ids = [*task.fail_to_pass, *task.pass_to_pass]
        return {"suite": "hidden", "source": "task", "task_hash": task.hash,
                "count": len(ids), "ids": ids}
    known = att.settings.known_expected
    if known is not None and known.get("task_hash") == task.hash and known.get("suite") == "hidden":
        return dict(known)  # collected by an earlier attempt of this ledger (expected_reuse)
    key = (task.hash, str(Path(task.root).resolve()), att.sandbox.name)
    cached = _EXPECTED.get(key)
    if cached is None:
        cached = _collect_hidden(att)
        if len(_EXPECTED) >= _EXPECTED_MAX:
            _EXPECTED.clear()
        _EXPECTED[key] = cached
    return dict(cached)


def _collect_hidden(att: Attempt) -> dict[str, Any]:
    from ledger.tasks.apply import apply_solution, hidden_env

    task, ws, timeout = att.task, att.ws, att.test_timeout

    result: dict[str, Any] = {}
    for source in ("collected", "collected-with-solution"):
        tree = create_grading_tree(task, parent=ws.root)
        try:
            if source == "collected-with-solution":
                apply_solution(task, tree.worktree, env=command_env(home=tree.home, scratch=tree.scratch))
            install_hidden_tests(tree, task)
            # in the backend's grading box (the redactor is this thread's own)
            boxed = Boxed(grading_box(att, tree),
                          redact=commit_ground_truth(task, att.settings)[1])
            verifier = tree.scratch / "verifier"
            verifier.mkdir(mode=0o700)
            try:
                result = run_suite(tree, "hidden", task.hidden_test_command, redact=lambda t: t,
                                   timeout=timeout, boxed=boxed, label="collect",
                                   extra_env=hidden_env(task, tree.worktree, verifier),
                                   collect_only=True)
            finally:
                boxed.box.close()
        finally:
            remove_tree(tree.root)
        if result["report"]["ended"] and not result["report"]["collect_errors"]:
            break
    report = result["report"]
    if not report["ended"] or report["collect_errors"] or not result["collected"]:
        raise TaskError(f"task {task.id}: the hidden tests cannot be collected in the starting "
                        f"tree ({report['collect_errors']} collection error(s), "
                        f"{len(result['collected'])} collected, exit {result['exit_code']}); "
                        "nothing was graded")
    return {"suite": "hidden", "source": source, "task_hash": task.hash,
            "count": len(result["collected"]), "ids": list(result["collected"])}
