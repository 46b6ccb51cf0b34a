"""The Sandbox port's seams, checked on the source: ``ledger/tasks/`` imports no sandbox and no run
(its callers pass a runner in), and ``ledger/sandbox/`` imports none of the floors above it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Known arrows, each to go: the proxy's fallback matcher, for callers that build ``net.Proxy``
# without the port (the attempt's agent step, until it adopts the port); the grading capture's
# use of the agents' strace capture (``ledger.agents.trace``, the Agent port's since it left
# ``ledger/run``; to go when the capture is a port of its own).
KNOWN: set[tuple[str, str]] = set()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _offenders(folder: str, banned: tuple[str, ...]) -> list[str]:
    out = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if "golden" in path.parts:
            continue
        rel = str(path.relative_to(ROOT))
        for name in sorted(_imports(path)):
            hit = any(name == b or name.startswith(b + ".") for b in banned)
            if hit and (rel, name) not in KNOWN:
                out.append(f"{rel} imports {name}")
    return out


def test_tasks_import_no_sandbox_and_no_run() -> None:
    """Nothing in ledger/tasks/ imports ledger.sandbox, ledger.run or ledger.agents (lazy
    imports inside functions included)."""
    assert _offenders("ledger/tasks", ("ledger.sandbox", "ledger.run", "ledger.agents")) == []


def test_sandbox_imports_no_upper_floor() -> None:
    """Nothing in ledger/sandbox/ imports ledger.run, ledger.tasks, ledger.agents or attest
    (but the one known fallback, listed in KNOWN)."""
    banned = ("ledger.run", "ledger.tasks", "ledger.agents", "ledger.bench", "attest", "cli")
    assert _offenders("ledger/sandbox", banned) == []
