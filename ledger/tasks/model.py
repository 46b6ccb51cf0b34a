"""The golden task as the rest of the harness sees it (frozen, fully validated at load time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIERS = ("smoke", "standard", "stretch", "adversarial")
NEEDS = ("container",)  # what a task may need beyond this host: a container engine


@dataclass(frozen=True)
class Solution:
    """How the reference solution is applied to the starting repo (ground truth).

    kind "files" copies ``solution/`` over the worktree (same relative paths); "patch" applies
    ``patch`` (a path inside the task folder, normally ``solution/*.patch``) with ``git apply``;
    "command" runs ``command`` (a /bin/sh string) in the worktree with ``LEDGER_SOLUTION_DIR``
    set to the task's ``solution/`` folder.
    """

    kind: str = "files"
    patch: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class Environment:
    """The container a task runs in (docs/ENVIRONMENTS.md): an image, or a build.

    ``image`` names an image by tag (``localhost/x:1``) or by digest (``name@sha256:...``);
    ``dockerfile`` is a path inside the task folder and ``context`` the build context folder
    (default: the Dockerfile's folder), both relative to the task folder. ``workdir`` is the task's
    own working folder in its image (the Dockerfile's last ``WORKDIR``, else ``/app``): the container
    backend mounts the worktree there as well as at its host path (docs/ENVIRONMENTS.md).
    """

    image: str | None = None
    dockerfile: str | None = None
    context: str | None = None
    workdir: str = "/app"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"image": self.image} if self.image else {
            "dockerfile": self.dockerfile, "context": self.context}
        return {**out, "workdir": self.workdir}


@dataclass(frozen=True)
class Grading:
    """A grading command that writes a reward file (Harbor's verifier contract).

    ``command`` (a /bin/sh string) runs in the worktree after the hidden tests were installed,
    with ``LEDGER_VERIFIER_DIR`` (a fresh, empty folder), ``LEDGER_TESTS_DIR`` (the installed
    hidden tests) and ``LEDGER_WORKDIR`` (the worktree) set. The attempt passes when the file
    ``reward_file`` (``reward.txt``: one number; ``reward.json``: a map whose ``reward`` value,
    or else every numeric value, counts) written into ``LEDGER_VERIFIER_DIR`` holds a reward
    >= 1. Without ``reward_file`` the command's exit code decides (0 passes).
    """

    command: str
    reward_file: str | None = None
    timeout_s: float | None = None


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
    ``hidden_tests_dir`` after the agent finished, or applied as ``hidden_tests_patch``);
    ``regression_command`` is PASS_TO_PASS (empty: no separate regression suite, as for tasks
    graded by ``fail_to_pass``/``pass_to_pass`` test ids, whose hidden command runs both lists).
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
    limits: dict[str, int] = field(default_factory=dict)  # resource limit overrides (docs/agents.md)
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
    solution: Solution = Solution()
    hidden_tests_patch: str | None = None  # tests/*.patch applied over the worktree, SWE-bench style
    grading: Grading | None = None
    test_command: tuple[str, ...] = ()  # with required outcomes: the runner the test ids are given to
    fail_to_pass: tuple[str, ...] = ()  # test ids that must fail before and pass after
    pass_to_pass: tuple[str, ...] = ()  # test ids that must pass before and after
    source: dict[str, str] = field(default_factory=dict)  # {repo, commit, parent} of a mined task
    needs: tuple[str, ...] = ()  # e.g. ("container",): the task runs only in a container
    environment: Environment | None = None  # the task's container image or build (needs container)

    @property
    def graded_by_ids(self) -> bool:
        """Whether the hidden suite is graded by required per-test outcomes (SWE-bench style)."""
        return bool(self.fail_to_pass)

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
            **({"limits": dict(self.limits)} if self.limits else {}),
        }
