"""The attempt workspace: fresh worktree, fixed git history, hidden tests only on request, diff."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ledger.run.workspace import (
    BASE_MESSAGE,
    create_workspace,
    git_env,
    install_hidden_tests,
    remove_tree,
    take_diff,
)
from ledger.tasks.loader import HistoryCommit, load_task
from ledger.textbound import bound_text


def _task(tmp_path: Path, name: str = "tiny") -> Path:
    root = tmp_path / "golden" / "smoke" / name
    (root / "repo" / "pkg").mkdir(parents=True)
    (root / "repo" / "pkg" / "__init__.py").write_text("")
    (root / "repo" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (root / "repo" / "gone.txt").write_text("bye\n")
    (root / "repo" / "__pycache__").mkdir()
    (root / "repo" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (root / "tests").mkdir()
    (root / "tests" / "test_secret.py").write_text("def test_f():\n    assert True\n")
    (root / "solution" / "pkg").mkdir(parents=True)
    (root / "solution" / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
    (root / "task.md").write_text(f"---\nid: {name}\ntitle: Tiny\ntier: smoke\n---\nMake f return 2.\n")
    return root


def _git(wt: Path, home: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=wt, env=git_env(home), check=True,
                          capture_output=True, text=True).stdout


def _ident(s: str) -> str:
    return s


def test_worktree_is_a_fresh_copy_with_one_deterministic_commit(tmp_path: Path) -> None:
    """The worktree holds repo/ (no caches, no tests/, no solution/) at one fixed 'starting state' commit."""
    task = load_task(_task(tmp_path))
    a, b = create_workspace(task), create_workspace(task)
    try:
        files = sorted(p.relative_to(a.worktree).as_posix() for p in a.worktree.rglob("*")
                       if p.is_file() and ".git" not in p.parts)
        assert files == ["gone.txt", "pkg/__init__.py", "pkg/mod.py"]
        assert _git(a.worktree, a.home, "log", "--format=%s").splitlines() == [BASE_MESSAGE]
        assert a.base == b.base  # fixed author, committer and date: same commit id
        assert stat.S_IMODE(os.stat(a.root).st_mode) == 0o700
        assert not (a.worktree / "tests_hidden").exists()
    finally:
        a.cleanup()
        b.cleanup()
    assert not a.root.exists() and not b.root.exists()


def test_history_is_replayed_and_the_tree_still_equals_repo(tmp_path: Path) -> None:
    """repo_history commits come first; the last commit is 'starting state' with repo/ exactly."""
    task = load_task(_task(tmp_path))
    history = [HistoryCommit("add fix", {"pkg/mod.py": "def f():\n    return 2\n", "old.txt": "x"}),
               HistoryCommit("revert fix", {"pkg/mod.py": "def f():\n    return 1\n", "old.txt": None})]
    ws = create_workspace(task, history=history)
    try:
        log = _git(ws.worktree, ws.home, "log", "--format=%s").splitlines()
        assert log == [BASE_MESSAGE, "revert fix", "add fix"]
        assert "return 2" in _git(ws.worktree, ws.home, "show", "HEAD~2:pkg/mod.py")
        assert (ws.worktree / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"
        assert (ws.worktree / "gone.txt").exists() and not (ws.worktree / "old.txt").exists()
        assert take_diff(ws, task.repo_dir, redact=_ident)["files"] == []
    finally:
        ws.cleanup()


def test_diff_lists_added_modified_deleted_and_keeps_contents_for_replay(tmp_path: Path) -> None:
    """The diff entry data has per-file status and line counts, a patch, and final file contents."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        (ws.worktree / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
        (ws.worktree / "new.py").write_text("X = 1\n")
        (ws.worktree / "gone.txt").unlink()
        (ws.worktree / "pkg" / "__pycache__").mkdir()
        (ws.worktree / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0\1")
        d = take_diff(ws, task.repo_dir, redact=lambda s: s.replace("X = 1", "[GT]"))
        by = {f["path"]: f for f in d["files"]}
        assert set(by) == {"gone.txt", "new.py", "pkg/mod.py"}
        assert (by["pkg/mod.py"]["status"], by["pkg/mod.py"]["added"], by["pkg/mod.py"]["removed"]) == ("modified", 1, 1)
        assert by["new.py"]["status"] == "added" and by["new.py"]["content"] == "[GT]\n"
        assert by["gone.txt"]["status"] == "deleted" and by["gone.txt"]["content"] is None
        assert "+    return 2" in d["patch"] and "X = 1" not in d["patch"]
        assert (d["truncated"], d["conflict_markers"], d["apply_failed"]) == (False, False, False)
    finally:
        ws.cleanup()


def test_diff_bounds_the_patch_and_flags_conflict_markers(tmp_path: Path) -> None:
    """A huge change is truncated at the bound; added conflict markers are flagged."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        (ws.worktree / "big.txt").write_text("line\n" * 50_000)
        (ws.worktree / "pkg" / "mod.py").write_text("<<<<<<< HEAD\nA\n=======\nB\n>>>>>>> other\n")
        d = take_diff(ws, task.repo_dir, redact=_ident, patch_limit=1000)
        assert d["truncated"] is True and len(d["patch"].encode()) <= 1000
        assert d["conflict_markers"] is True
        big = next(f for f in d["files"] if f["path"] == "big.txt")
        assert big["added"] == 50_000 and big["content"] is None  # too large to keep for replay
    finally:
        ws.cleanup()


def test_destroyed_git_falls_back_to_direct_comparison(tmp_path: Path) -> None:
    """An agent that deletes .git still gets its change recorded, marked apply_failed."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        remove_tree(ws.worktree / ".git")
        (ws.worktree / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
        d = take_diff(ws, task.repo_dir, redact=_ident)
        assert d["apply_failed"] is True
        assert [(f["path"], f["status"], f["added"], f["removed"]) for f in d["files"]] == [
            ("pkg/mod.py", "modified", 1, 1)]
        assert "+    return 2" in d["patch"]
    finally:
        ws.cleanup()


def test_hidden_tests_replace_whatever_the_agent_planted(tmp_path: Path) -> None:
    """install_hidden_tests copies the real hidden tests over an agent-made tests_hidden/."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        planted = ws.worktree / "tests_hidden"
        planted.mkdir()
        (planted / "test_secret.py").write_text("def test_f():\n    pass  # fake\n")
        (planted / "extra.py").write_text("")
        install_hidden_tests(ws, task)
        assert sorted(p.name for p in planted.iterdir()) == ["test_secret.py"]
        assert "assert True" in (planted / "test_secret.py").read_text()
    finally:
        ws.cleanup()


def test_remove_tree_handles_read_only_directories(tmp_path: Path) -> None:
    """Clean-up succeeds even when the agent removed write and read permission from folders."""
    top = tmp_path / "a"
    (top / "b" / "c").mkdir(parents=True)
    (top / "b" / "c" / "f").write_text("x")
    os.chmod(top / "b" / "c", 0)
    os.chmod(top / "b", 0o500)
    remove_tree(top)
    assert not top.exists()


@pytest.mark.parametrize("text,limit,expected", [
    ("abc", 5, ("abc", False, 3)),
    ("héllo", 2, ("h", True, 6)),
])
def test_bound_text_cuts_on_character_boundaries(text: str, limit: int, expected: tuple[str, bool, int]) -> None:
    """bound_text never splits a UTF-8 character and reports the full size."""
    assert bound_text(text, limit) == expected


def test_background_removal_returns_at_once_and_drain_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process hands its last attempt's folder to a thread and goes on at once;
    drain_removals returns only when the folder is gone."""
    from ledger.run import workspace as wsmod

    monkeypatch.setattr(wsmod, "_remover", None)  # this test's own remover, not the process's
    release = threading.Event()
    real_remove = wsmod.remove_tree

    def slow_remove(path: Path) -> None:
        release.wait(5)
        real_remove(path)

    monkeypatch.setattr(wsmod, "remove_tree", slow_remove)
    wsmod.remove_in_background()
    root = tmp_path / "attempt"
    (root / "wt").mkdir(parents=True)
    (root / "wt" / "f.py").write_text("x = 1\n")
    ws = wsmod.Workspace(root=root, worktree=root / "wt", home=root / "home",
                         scratch=root / "scratch", base="")
    t0 = time.monotonic()
    ws.cleanup()
    assert time.monotonic() - t0 < 1.0 and root.exists()  # handed over, not removed yet
    release.set()
    wsmod.drain_removals()
    assert not root.exists()


def test_shadow_git_stays_the_harness_own_and_the_agent_gets_a_copy_at_ready(tmp_path: Path) -> None:
    """With shadow_git the .git git made stays beside the worktree; the agent's copy appears at
    ready(), and what the agent writes into it (a hook-running config) never reaches the
    harness's, which take_diff uses."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task, shadow_git=True)
    try:
        assert ws.git_dir is not None and (ws.git_dir / "HEAD").is_file()
        assert not (ws.worktree / ".git").exists()  # the public tests run without one
        ws.ready()
        agent_git = ws.worktree / ".git"
        assert _git(ws.worktree, ws.home, "rev-parse", "HEAD").strip() == ws.base
        assert agent_git.stat().st_ino != ws.git_dir.stat().st_ino
        with open(agent_git / "config", "a") as fh:
            fh.write("[core]\n\tfsmonitor = touch /tmp/pwned-by-the-agent\n")
        assert "fsmonitor" not in (ws.git_dir / "config").read_text()
        (ws.worktree / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
        diff = take_diff(ws, task.repo_dir, redact=_ident)
        assert [f["path"] for f in diff["files"]] == ["pkg/mod.py"]
    finally:
        ws.cleanup()
    assert not ws.root.exists()
