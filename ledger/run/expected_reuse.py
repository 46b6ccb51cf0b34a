"""Hidden test ids this ledger already collected: an attempt reuses them instead of collecting.

The ids of a pytest hidden suite are collected by the harness's reporter in a fresh copy of the
starting tree before the agent starts (``ledger.run.attempt.expected``: ``grading.expected``,
source ``collected`` or ``collected-with-solution``). Nothing the agent does can reach that
collection, and its result is a function of the task's files (the task hash), the grading
environment (the sandbox backend) and the harness's reporter. So the coordinator looks up the
last such entry journaled for the same task hash, by a run of the same harness version in the
same backend, and hands its data to the attempt (``AttemptSettings.known_expected``); the
attempt journals it again with ``reused`` (the seq it came from) and collects nothing. Tasks run
in a container image are always collected (an image can change under the same task hash).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.journal.journal import Journal
from ledger.tasks.model import Task

_SOURCES = ("collected", "collected-with-solution")


def recorded_expected(journal: Journal, task: Task, *, sandbox: str, harness: str,
                      runs: dict[str, bool] | None = None) -> dict[str, Any] | None:
    """The data of the last ``grading.expected`` of ``task`` (same hash, collected) journaled
    by a run of harness ``harness`` with ``task`` in backend ``sandbox``, with ``reused`` set
    to its seq; None when there is none. ``runs``: a cache of which runs match."""
    runs = {} if runs is None else runs
    found: dict[str, Any] | None = None
    for e in journal.entries(task=task.id, kind="grading.expected"):
        d = e.data
        if (d.get("suite") != "hidden" or d.get("source") not in _SOURCES
                or d.get("task_hash") != task.hash or not isinstance(d.get("ids"), list)
                or not d["ids"] or d.get("count") != len(d["ids"]) or e.run is None):
            continue
        if e.run not in runs:
            runs[e.run] = _run_matches(journal, e.run, task.id, sandbox, harness)
        if runs[e.run]:
            found = {k: d[k] for k in ("suite", "source", "task_hash", "count", "ids")}
            found["reused"] = e.seq
    return found


def _run_matches(journal: Journal, run: str, task_id: str, sandbox: str, harness: str) -> bool:
    for e in journal.entries(run=run, kind="run.started"):
        cfg = e.data.get("config")
        if not isinstance(cfg, Mapping) or e.data.get("harness_version") != harness:
            return False
        by_task = cfg.get("sandbox_by_task")
        mode = by_task.get(task_id) if isinstance(by_task, Mapping) else None
        return str(mode or cfg.get("sandbox") or "none") == sandbox
    return False
