"""What the run, executor and sandbox benchmarks share: the small operator task (check-script tests,
no pytest) and the per-attempt times read back from a run's journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.home import LedgerHome
from ledger.journal.journal import Journal

TASK_MD = """---
id: bench-task
title: Bench task
tier: bench
max_duration_s: 60
regression_command: [python, check_public.py]
hidden_test_command: [python, tests_hidden/check_hidden.py]
---
`ops.sub` adds instead of subtracting. Fix it.
"""
HIDDEN = ("import sys\nsys.path.insert(0, '.')\nimport ops\n"
          "# hidden verification of subtraction on carefully chosen operand pairs for the bench\n"
          "assert ops.sub(7, 2) == 5, 'the subtraction returned a wrong value for the bench'\n")


def make_home(base: Path) -> LedgerHome:
    """A ledger at ``base/.ledger`` whose operator tier ``bench`` holds the one bench task."""
    root = base / ".ledger" / "golden" / "bench" / "bench-task"
    for rel, text in {
        "task.md": TASK_MD,
        "repo/ops.py": "def sub(a, b):\n    return a + b\n",
        "repo/check_public.py": "import ops\nassert callable(ops.sub)\n",
        "tests/check_hidden.py": HIDDEN,
        "solution/ops.py": "def sub(a, b):\n    return a - b\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return LedgerHome(base / ".ledger")


HEAVY_FILES = 20_000
HEAVY_TESTS = """from ops import sub


def test_sub_is_callable():
    assert callable(sub)


def test_sub_of_equal_numbers():
    assert sub(3, 3) in (0, 6)
"""


def make_heavy_task(home: LedgerHome, files: int = HEAVY_FILES) -> None:
    """The operator tier ``heavy``: the bench task with ``files`` more small files in its
    repository (``data/dNN/fNNNNN.txt``) and a public pytest suite (``tests/test_ops.py``)."""
    root = home.path / "golden" / "heavy" / "heavy-task"
    for rel, text in {
        "task.md": TASK_MD.replace("id: bench-task", "id: heavy-task")
                          .replace("tier: bench", "tier: heavy"),
        "repo/ops.py": "def sub(a, b):\n    return a + b\n",
        "repo/check_public.py": "import ops\nassert callable(ops.sub)\n",
        "repo/tests/test_ops.py": HEAVY_TESTS,
        "tests/check_hidden.py": HIDDEN,
        "solution/ops.py": "def sub(a, b):\n    return a - b\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for i in range(files):
        folder = root / "repo" / "data" / f"d{i // 500:02d}"
        if i % 500 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.txt").write_text(f"record {i}: an ordinary line of repository data\n")


def attempt_times(home: LedgerHome, run_id: str, *, require_completed: bool = False,
                  ) -> tuple[list[Any], dict[str, dict[str, float]]]:
    """The run's entries and, per attempt, its start/end (s), agent wall and test time (s).

    ``require_completed`` stops the benchmark at an attempt that did not complete, with its error.
    """
    with Journal.open(home.journal_path) as j:
        items = list(j.entries(run=run_id))
    per: dict[str, dict[str, float]] = {}
    for e in items:
        aid = e.data.get("attempt")
        if not isinstance(aid, str):
            continue
        p = per.setdefault(aid, {"agent": 0.0, "tests": 0.0})
        if e.kind == "attempt.started":
            p["start"] = e.ts / 1e9
        elif e.kind == "attempt.finished":
            p["end"] = e.ts / 1e9
            if require_completed and e.data.get("status") != "completed":
                raise SystemExit(f"attempt {aid} ended {e.data.get('status')}: {e.data.get('error')}")
        elif e.kind == "agent.finished":
            p["agent"] = float(e.data["wall_s"])
        elif e.kind in ("test.baseline", "test.result"):
            p["tests"] += float(e.data["duration_s"])
    return items, per
