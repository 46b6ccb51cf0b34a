"""Build small golden task folders on disk for the loader and validation tests."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

START = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
REGRESSION = "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"
HIDDEN = "from calc import add\n\n\ndef test_add_sums_two_numbers():\n    assert add(2, 3) == 5\n"


def make_task(
    parent: Path,
    task_id: str = "t-add",
    *,
    front: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    prompt: str = "Fix `add` in calc.py so that it returns the sum of its arguments.",
    raw_frontmatter: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """A valid task folder ``parent/task_id`` (``front`` overrides keys; ``drop`` removes keys)."""
    folder = parent / task_id
    meta: dict[str, Any] = {
        "id": task_id,
        "title": "Fix add",
        "max_duration_s": 60,
        "completion_signals": [
            {"command": ["python", "-c", "from calc import add; assert add(1, 1) == 2"], "expect_exit": 0},
            {"file_contains": {"path": "calc.py", "pattern": r"a \+ b"}},
        ],
        "expected_files_modified": ["calc.py"],
    }
    meta.update(front or {})
    for key in drop:
        meta.pop(key, None)
    head = raw_frontmatter if raw_frontmatter is not None else yaml.safe_dump(meta, sort_keys=False)
    content = {
        "task.md": f"---\n{head}---\n\n{prompt}\n",
        "repo/calc.py": START,
        "repo/tests/test_neg.py": REGRESSION,
        "tests/test_add_hidden.py": HIDDEN,
        "solution/calc.py": FIXED,
    }
    content.update(files or {})
    for rel, text in content.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return folder
