"""The small operator task the run and executor benchmarks share (check-script tests, no pytest)."""

from __future__ import annotations

from pathlib import Path

from ledger.home import LedgerHome

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
