"""attest/ stays pure, every module of it (reading task files is ledger/tasks/material.py's)."""

from __future__ import annotations

import ast
from pathlib import Path

import attest

FORBIDDEN = {"os", "sys", "io", "pathlib", "subprocess", "socket", "sqlite3", "sqlite_utils",
             "time", "datetime", "random", "secrets", "shutil", "tempfile", "urllib", "http",
             "requests", "logging", "structlog", "ledger.journal.store", "ledger.journal.journal",
             "ledger.journal.keys", "ledger.tasks", "ledger.run"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_pure_modules_import_no_io() -> None:
    """No clock, randomness, environment, files, sockets or database in the pure modules."""
    root = Path(attest.__file__).parent
    checked = 0
    for path in sorted(root.glob("*.py")):
        checked += 1
        for name in _imports(path):
            bad = {f for f in FORBIDDEN if name == f or name.startswith(f + ".")}
            assert not bad, f"{path.name} imports {name}"
    assert checked >= 5


def test_pure_modules_do_not_import_the_impure_ones() -> None:
    """The pure modules never reach material (and through it, the disk) nor the CLI."""
    root = Path(attest.__file__).parent
    for path in root.glob("*.py"):
        assert not {"ledger.tasks.material", "ledger.verify"} & _imports(path), path.name
