"""Small golden tasks for the run tests, written into an operator tier of a temporary ledger.

``fix-add`` uses pytest (per-test outcomes, JUnit); ``fix-sub`` and ``fix-mul`` use plain
``python`` check scripts, so most tests stay fast.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

HIDDEN_ADD = '''\
"""Hidden acceptance check: addition of two small integers must yield their arithmetic sum,
including negative operands and one, as the specification of the calculator module demands."""
from calc import add


def test_add_positive_operands_produce_their_sum():
    assert add(2, 3) == 5


def test_add_negative_operand_and_one_behave_arithmetically():
    assert add(-4, 1) == -3
'''


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if not rel.endswith(".py") else text)


def write_fix_add(tier_dir: Path) -> Path:
    root = tier_dir / "fix-add"
    _write(root, {
        "task.md": f"""\
            ---
            id: fix-add
            title: Fix add()
            tier: {tier_dir.name}
            max_duration_s: 60
            expected_files_modified: [calc.py]
            completion_signals:
            - file_contains: {{path: calc.py, pattern: "a \\\\+ b"}}
            - command: [python, -c, "import calc"]
            ---
            `calc.add` subtracts instead of adding. Make it add.
            """,
        "repo/calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
        "repo/tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        "tests/test_add_hidden.py": HIDDEN_ADD,
        "solution/calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
        "demo.yaml": """\
            - read: calc.py
            - replace: calc.py
              old: "return a - b"
              new: "return a + b"
            """,
    })
    return root


def write_script_task(tier_dir: Path, name: str, op: str, wrong: str, right: str) -> Path:
    """A task whose tests are check scripts (no pytest): quick to run."""
    root = tier_dir / name
    _write(root, {
        "task.md": f"""\
            ---
            id: {name}
            title: Fix {op}()
            tier: {tier_dir.name}
            max_duration_s: 60
            regression_command: [python, check_public.py]
            hidden_test_command: [python, tests_hidden/check_{op}_hidden.py]
            ---
            `ops.{op}` is wrong. Fix it.
            """,
        "repo/ops.py": f"def {op}(a, b):\n    return a {wrong} b\n",
        "repo/check_public.py": "import ops\nassert callable(ops." + op + ")\n",
        f"tests/check_{op}_hidden.py": (
            "import sys\nsys.path.insert(0, '.')\nimport ops\n"
            f"# hidden verification of the {op} operation on carefully chosen operand pairs\n"
            f"assert ops.{op}(7, 2) == 7 {right} 2, 'the {op} operation returned a wrong value'\n"
        ),
        "solution/ops.py": f"def {op}(a, b):\n    return a {right} b\n",
        "demo.yaml": f"""\
            - replace: ops.py
              old: "a {wrong} b"
              new: "a {right} b"
            """,
    })
    return root


def make_ledger(tmp: Path, tier: str = "mini", *, tasks: tuple[str, ...] = ("fix-add", "fix-sub")) -> Path:
    """A ledger directory with an operator tier holding the named mini tasks; returns its path."""
    ledger = tmp / ".ledger"
    tier_dir = ledger / "golden" / tier
    for name in tasks:
        if name == "fix-add":
            write_fix_add(tier_dir)
        elif name == "fix-sub":
            write_script_task(tier_dir, "fix-sub", "sub", "+", "-")
        elif name == "fix-mul":
            write_script_task(tier_dir, "fix-mul", "mul", "+", "*")
        else:
            raise ValueError(name)
    return ledger
