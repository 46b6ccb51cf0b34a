"""Put a task's ground truth into a worktree and read its verdicts: one place for the run,
``ledger tasks validate``, the oracle agent, ``mine`` and the importers.

    apply_solution(task, worktree)      files copied over / patch applied / command run
    install_hidden_tests(task, worktree) tests/ copied in as the hidden folder, or the hidden
                                         test patch applied over restored starting files
    parse_pytest_report(text)           per-test outcomes from pytest's ``-rA`` summary, keyed
                                        by node id (``path/to/test_file.py::test_name``), the
                                        ids SWE-bench reports
    outcomes_verdict(...)               FAIL_TO_PASS / PASS_TO_PASS against those outcomes
    read_reward(folder, name)           a Harbor reward file (reward.txt / reward.json)

Patches are applied with ``git apply`` and never look above the folder they are applied in.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ledger.errors import TaskError
from ledger.tasks.loader import iter_files
from ledger.tasks.model import Task

APPLY_TIMEOUT_S = 60.0
SOLUTION_TIMEOUT_S = 300.0

# Outcome words of pytest's short test summary (``-rA``), normalised.
_REPORT_WORDS = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "SKIPPED": "skipped",
    "XFAIL": "xfail",
    "XPASS": "xpass",
}
_REPORT_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$")
_DIFF_GIT = re.compile(r"^diff --git a/(.+?) b/(.+)$")


@dataclass(frozen=True)
class Applied:
    ok: bool
    detail: str  # one line; never the patch or script text


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    return env


def git_apply(patch: Path, folder: Path, *, reverse: bool = False) -> Applied:
    """Apply ``patch`` inside ``folder`` (a git worktree root or a plain folder)."""
    env = _git_env()
    # A plain folder inside some other repository must not be taken for a subfolder of it.
    env["GIT_CEILING_DIRECTORIES"] = str(Path(folder).resolve().parent)
    argv = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), str(Path(patch).resolve())]
    try:
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, timeout=APPLY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Applied(False, f"git apply could not run: {type(exc).__name__}")
    if proc.returncode != 0:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        # git's message names a file and a line number, not the patch content.
        return Applied(False, f"git apply failed: {first[0][:160] if first else proc.returncode}")
    return Applied(True, "applied")


def patch_paths(text: str) -> list[str]:
    """The files a git patch touches (both sides of a rename), in order."""
    out: list[str] = []
    for line in text.splitlines():
        m = _DIFF_GIT.match(line)
        if m:
            for path in m.groups():
                if path not in out:
                    out.append(path)
    return out


def _inside(folder: Path, rel: str) -> Path:
    posix = PurePosixPath(rel)
    if posix.is_absolute() or ".." in posix.parts:
        raise TaskError(f"patch path leaves the worktree: {rel!r}")
    return folder / rel


def _copy_over(src: Path, dst: Path) -> None:
    for rel, path in iter_files(src):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def solution_env(task: Task, worktree: Path, base: Mapping[str, str] | None = None, *,
                 solution_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(LEDGER_SOLUTION_DIR=str(solution_dir or task.solution_dir), LEDGER_WORKDIR=str(worktree))
    return env


def apply_solution(task: Task, worktree: Path, *, env: Mapping[str, str] | None = None,
                   timeout: float = SOLUTION_TIMEOUT_S) -> Applied:
    """Apply the reference solution to ``worktree`` (its kind decides how)."""
    sol = task.solution
    if sol.kind == "files":
        _copy_over(task.solution_dir, worktree)
        return Applied(True, "solution files copied")
    if sol.kind == "patch":
        assert sol.patch is not None
        return git_apply(task.root / sol.patch, worktree)
    assert sol.command is not None
    from ledger.tasks import runner

    with runner.solution_for_step(task) as solution_dir:
        code, _seconds, timed_out = runner.current().run(
            ["/bin/sh", "-c", sol.command], cwd=worktree, timeout=timeout,
            env=solution_env(task, worktree, env, solution_dir=solution_dir))
    if timed_out:
        return Applied(False, f"solution command timed out after {timeout:g}s")
    return Applied(code == 0, f"solution command exit {code}")


def install_hidden_tests(task: Task, worktree: Path, *, remove: object = None) -> Path:
    """Bring the hidden tests into ``worktree`` after the agent finished.

    Without a patch, ``tests/`` is copied in as ``hidden_tests_dir`` (anything there is replaced;
    ``remove(path)`` deletes a folder, default ``shutil.rmtree``). With ``hidden_tests_patch``, every
    file the patch touches is first reset to its starting content from ``repo/`` (or removed when
    it did not exist), so whatever the agent did to those files the patch applies cleanly; then
    the patch is applied (SWE-bench's order). A patch that does not apply is a TaskError.
    Returns the folder (or the worktree) the hidden tests are in.
    """
    if task.hidden_tests_patch is None:
        target = worktree / task.hidden_tests_dir
        if os.path.lexists(target):
            if target.is_dir() and not target.is_symlink():
                (remove or shutil.rmtree)(target)  # type: ignore[operator]
            else:
                target.unlink()
        target.mkdir(parents=True)
        _copy_over(task.tests_dir, target)
        return target
    patch = task.root / task.hidden_tests_patch
    for rel in patch_paths(patch.read_text(encoding="utf-8", errors="replace")):
        dst = _inside(worktree, rel)
        start = task.repo_dir / rel
        if os.path.lexists(dst) and (dst.is_symlink() or not dst.is_dir()):
            dst.unlink()
        elif dst.is_dir():
            (remove or shutil.rmtree)(dst)  # type: ignore[operator]
        if start.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(start, dst)
    applied = git_apply(patch, worktree)
    if not applied.ok:
        raise TaskError(f"task {task.id}: the hidden test patch does not apply: {applied.detail}")
    return worktree


def hidden_env(task: Task, worktree: Path, verifier_dir: Path) -> dict[str, str]:
    """Extra environment of the hidden command (a grading command reads these)."""
    tests = worktree if task.hidden_tests_patch else worktree / task.hidden_tests_dir
    return {"LEDGER_VERIFIER_DIR": str(verifier_dir), "LEDGER_TESTS_DIR": str(tests),
            "LEDGER_WORKDIR": str(worktree)}


# --------------------------------------------------------------------------- verdicts


def parse_pytest_report(text: str) -> dict[str, str]:
    """Per-test outcomes from pytest's ``-rA`` short summary: {node id: outcome}.

    Lines read ``PASSED tests/test_x.py::test_a`` or ``FAILED tests/test_x.py::test_b - message``;
    a file that failed to collect appears as ``ERROR tests/test_x.py`` (its tests are then absent,
    which counts as not passed). ``SKIPPED [1] path:line: reason`` lines carry no node id and are
    ignored. The last outcome of an id wins (a teardown error after a pass is an error).
    """
    out: dict[str, str] = {}
    for raw in text.splitlines():
        m = _REPORT_LINE.match(raw.rstrip())
        if not m:
            continue
        word, rest = m.groups()
        if rest.startswith("["):
            continue
        test_id = _report_id(word, rest)
        if not test_id:
            continue
        outcome = _REPORT_WORDS[word]
        if out.get(test_id) in ("failed", "error") and outcome == "passed":
            continue
        out[test_id] = outcome
    return out


_PARAM_ID = re.compile(r"^(\S*?\[.*\])(?: - .*)?$")


def _report_id(word: str, rest: str) -> str:
    """The node id of a summary line: all of it for PASSED; else up to " - " (the message),
    except inside a parameter id's brackets, which may hold " - " themselves."""
    if word == "PASSED":
        return rest.strip()
    head = rest.split(" - ", 1)[0]
    if "[" in head and not head.endswith("]"):
        m = _PARAM_ID.match(rest)
        if m:
            return m.group(1)
    return head.strip()


def outcomes_verdict(before: Mapping[str, str], after: Mapping[str, str],
                     fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]) -> list[str]:
    """The problems with a task's required outcomes (empty: all hold). Names test ids only."""
    problems: list[str] = []
    for tid in fail_to_pass:
        if before.get(tid) == "passed":
            problems.append(f"FAIL_TO_PASS {tid} passes before")
        if after.get(tid) != "passed":
            problems.append(f"FAIL_TO_PASS {tid} is {after.get(tid, 'missing')} after")
    for tid in pass_to_pass:
        if before.get(tid) != "passed":
            problems.append(f"PASS_TO_PASS {tid} is {before.get(tid, 'missing')} before")
        if after.get(tid) != "passed":
            problems.append(f"PASS_TO_PASS {tid} is {after.get(tid, 'missing')} after")
    return problems


_REWARD_LIMIT = 64 * 1024


def read_reward(folder: Path, name: str) -> tuple[float | None, str]:
    """(reward, detail) from ``folder/name``; None when missing or unreadable.

    ``reward.txt`` holds one number. ``reward.json`` is a map: its ``reward`` value, or else the
    smallest of its numeric values (every named reward must be met).
    """
    from ledger import safefs

    path = folder / name
    if not os.path.lexists(path):
        return None, f"no {name} written"
    raw = safefs.read_file(path, _REWARD_LIMIT)  # written in the graded code's reach: no link followed
    if raw is None:
        return None, f"{name} unreadable: a link, not a regular file, or over {_REWARD_LIMIT} bytes"
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None, f"{name} unreadable: UnicodeDecodeError"
    value: object
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return None, f"{name} is not JSON"
        if not isinstance(data, dict):
            return None, f"{name} is not a JSON map"
        if "reward" in data:
            value = data["reward"]
        else:
            nums = [v for v in data.values() if isinstance(v, int | float) and not isinstance(v, bool)]
            if not nums:
                return None, f"{name} holds no numeric reward"
            value = min(nums)
    else:
        try:
            value = float(text.split()[0]) if text else None
        except ValueError:
            return None, f"{name} is not a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, f"{name} holds no finite reward"
    return float(value), f"reward {float(value):g}"


def reward_passes(reward: float | None) -> bool:
    return reward is not None and reward >= 1.0
