"""Grading in a fresh tree: which of the agent's changes are graded, and the tree they go into.

The hidden tests, the completion signals and the regression suite never run in the tree the
agent had. ``graded_changes`` splits the journaled diff's files into the ones grading applies and
the ones it drops (with the reason): a task with ``owned_files`` grades only files matching them;
otherwise every file that is not a test. Test configuration and import hooks are always dropped,
because they run code at grading time or change what the tests mean:

    conftest.py  pytest.ini  tox.ini  setup.cfg  sitecustomize.py  usercustomize.py  *.pth
    ledger_grading_reporter*  at the top of the tree (it would shadow the harness's reporter)
    pyproject.toml when its [tool.pytest...] tables changed
    test files: test_*.py, *_test.py, anything under a tests/ or test/ folder or the hidden
    tests folder

``apply_changes`` copies the graded files from the agent's worktree into a fresh copy of the
starting repo (symbolic links as links, never followed; a path whose parent folder is a link is
dropped: it could point anywhere).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ledger import safefs

HOOK_NAMES = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "sitecustomize.py",
                        "usercustomize.py"})
TEST_DIRS = frozenset({"tests", "test"})
_TEXT_LIMIT = 1024 * 1024  # bytes of a pyproject.toml read to compare its pytest tables
REPORTER_NAME = "ledger_grading_reporter"  # ledger.sandbox.outcomes.PLUGIN_NAME: never graded


def _pytest_tables(text: str | None) -> Any:
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):  # nested too deep is unparsable too
        return "<unparsable>"
    tool = data.get("tool")
    return tool.get("pytest") if isinstance(tool, dict) else None


def drop_reason(rel: str, *, owned: Sequence[str], hidden_dir: str,
                pyproject_before: str | None = None,
                pyproject_after: str | None = None) -> str | None:
    """Why grading drops the change to ``rel`` (a worktree-relative POSIX path); None: graded."""
    parts = PurePosixPath(rel).parts
    name = parts[-1] if parts else rel
    if name in HOOK_NAMES:
        return "test configuration or import hook"
    if parts and parts[0].split(".")[0] == REPORTER_NAME:
        return "shadows the harness's test reporter"
    if name.endswith(".pth"):
        return "import hook (.pth)"
    if name == "pyproject.toml" and (
            _pytest_tables(pyproject_before) != _pytest_tables(pyproject_after)):
        return "pyproject.toml [tool.pytest] changed"
    hidden = PurePosixPath(hidden_dir).parts
    if hidden and tuple(parts[:len(hidden)]) == hidden:
        return "hidden tests folder"
    if owned:
        if not any(fnmatch.fnmatch(rel, pat) for pat in owned):
            return "outside owned_files"
        return None
    if any(p in TEST_DIRS for p in parts[:-1]) or (
            name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))):
        return "test file"
    return None


def _read_text(root: Path, rel: str) -> str | None:
    """A regular file's text under ``root`` (no link followed, no FIFO opened, bounded)."""
    data = safefs.read_under(root, rel, _TEXT_LIMIT)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def graded_changes(files: Iterable[Mapping[str, Any]], *, owned: Sequence[str], hidden_dir: str,
                   repo_dir: Path, worktree: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(graded files, dropped ``{path, reason}``) of a ``diff`` entry's file list."""
    graded: list[dict[str, Any]] = []
    dropped: list[dict[str, str]] = []
    for f in files:
        rel = str(f.get("path", ""))
        if not rel or rel.startswith("/") or ".." in PurePosixPath(rel).parts:
            dropped.append({"path": rel, "reason": "path leaves the worktree"})
            continue
        before = after = None
        if PurePosixPath(rel).name == "pyproject.toml":
            before, after = _read_text(repo_dir, rel), _read_text(worktree, rel)
        reason = drop_reason(rel, owned=owned, hidden_dir=hidden_dir,
                             pyproject_before=before, pyproject_after=after)
        if reason is None:
            graded.append(dict(f))
        else:
            dropped.append({"path": rel, "reason": reason})
    return graded, dropped


def _parent_is_link(root: Path, rel: str) -> bool:
    cur = root
    for part in PurePosixPath(rel).parts[:-1]:
        cur = cur / part
        if cur.is_symlink():
            return True
    return False


def apply_changes(graded: Iterable[Mapping[str, Any]], *, source: Path,
                  target: Path) -> list[dict[str, str]]:
    """Copy the graded files from ``source`` (the agent's worktree) over ``target`` (a fresh
    copy of the starting repo); returns the files it had to drop after all, with the reason."""
    dropped: list[dict[str, str]] = []
    for f in graded:
        rel = str(f["path"])
        if _parent_is_link(source, rel) or _parent_is_link(target, rel):
            dropped.append({"path": rel, "reason": "a parent folder is a symbolic link"})
            continue
        src, dst = source / rel, target / rel
        if os.path.lexists(dst) and (dst.is_symlink() or not dst.is_dir()):
            dst.unlink()
        elif dst.is_dir():
            shutil.rmtree(dst)
        if f.get("status") == "deleted" or not os.path.lexists(src):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        st = src.lstat()
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(src, dst, follow_symlinks=False)
            os.chmod(dst, 0o755 if st.st_mode & 0o111 else 0o644)
        else:
            dropped.append({"path": rel, "reason": "not a regular file or link"})
    return dropped
