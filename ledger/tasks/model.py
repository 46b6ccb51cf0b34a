"""The golden task as the rest of the harness sees it (frozen, fully validated at load time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIERS = ("smoke", "standard", "stretch", "adversarial")


@dataclass(frozen=True)
class Signal:
    """One executable completion check.

    kind is "command" (``command`` list or shell string run in the worktree; passes when the exit
    code equals ``expect_exit``), "path_exists" (``path`` relative to the worktree), or
    "file_contains" (``path`` and regex ``pattern``).
    """

    kind: str
    command: tuple[str, ...] | str | None = None
    expect_exit: int = 0
    path: str | None = None
    pattern: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.command is not None:
            out["command"] = list(self.command) if isinstance(self.command, tuple) else self.command
            out["expect_exit"] = self.expect_exit
        if self.path is not None:
            out["path"] = self.path
        if self.pattern is not None:
            out["pattern"] = self.pattern
        return out


@dataclass(frozen=True)
class Task:
    """A loaded golden task.

    ``root`` is the task folder: ``task.md``, ``repo/`` (starting code), ``tests/`` (hidden,
    FAIL_TO_PASS), ``solution/`` (files that, copied over ``repo/``, make the hidden tests pass).
    ``hidden_test_command`` runs the hidden tests (they are copied into the worktree under
    ``hidden_tests_dir`` after the agent finished); ``regression_command`` is PASS_TO_PASS.
    ``hash`` is the hex SHA-256 over every file of the folder (paths and contents, sorted).
    """

    id: str
    title: str
    tier: str
    prompt: str
    root: Path
    hash: str
    max_duration_s: float = 300.0
    max_cost_usd: float = 1.0
    max_tokens: int = 200_000
    signals: tuple[Signal, ...] = ()
    owned_files: tuple[str, ...] = ()
    expected_files_modified: tuple[str, ...] = ()
    network_allowlist: tuple[str, ...] = ()
    role: str | None = None
    expected_test_outcomes: dict[str, str] = field(default_factory=dict)
    hidden_tests_dir: str = "tests_hidden"
    hidden_test_command: tuple[str, ...] = ("python", "-m", "pytest", "-q", "tests_hidden")
    regression_command: tuple[str, ...] = ("python", "-m", "pytest", "-q", "tests")
    hidden_fields: dict[str, Any] = field(default_factory=dict)
    demo: tuple[dict[str, Any], ...] = ()

    @property
    def repo_dir(self) -> Path:
        return self.root / "repo"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    def budgets(self) -> dict[str, Any]:
        return {
            "max_duration_s": self.max_duration_s,
            "max_cost_usd": self.max_cost_usd,
            "max_tokens": self.max_tokens,
        }
