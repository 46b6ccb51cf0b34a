"""The in-process first commit (``ledger.run.gitobjects``) is the commit git makes of the same tree.

Each case builds one tree twice: once through ``initial_commit``, once through ``git init``,
``git add -A`` and ``git commit`` with the harness's identity; the commit ids must be equal (so
every object, the tree order and the modes are git's), ``git fsck --strict`` must find nothing,
and ``git status`` must show a clean tree (the index is git's too)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.run.gitobjects import initial_commit
from ledger.run.workspace import BASE_MESSAGE, EXCLUDES, GIT_IDENTITY, copy_tree, git, git_env

GOLDEN = Path(__file__).resolve().parents[2] / "ledger" / "tasks" / "golden"
EXCLUDE = "\n".join(EXCLUDES) + "\n"


def _by_git(tree: Path, home: Path) -> str:
    env = git_env(home)
    git(tree, "init", "-q", "-b", "main", env=env)
    git(tree, "add", "-A", env=env)
    git(tree, "commit", "-q", "--allow-empty", "--no-verify", "-m", BASE_MESSAGE, env=env)
    return (tree / ".git" / "refs" / "heads" / "main").read_text().strip()


def _twice(src: Path, tmp: Path) -> tuple[str | None, str, Path]:
    ours, theirs, home = tmp / "ours", tmp / "theirs", tmp / "home"
    home.mkdir()
    for dst in (ours, theirs):
        dst.mkdir()
        copy_tree(src, dst)
    mine = initial_commit(ours, message=BASE_MESSAGE, identity=GIT_IDENTITY, exclude=EXCLUDE)
    return mine, _by_git(theirs, home), ours


def _git_out(tree: Path, *args: str) -> str:
    return git(tree, *args, env=git_env(tree.parent / "home")).stdout.decode()


def _clean(tree: Path) -> None:
    assert _git_out(tree, "fsck", "--strict", "--no-dangling") == ""
    assert _git_out(tree, "status", "--porcelain", "--untracked-files=all") == ""
    assert _git_out(tree, "log", "--format=%s").strip() == BASE_MESSAGE
    assert (tree / ".git" / "info" / "exclude").read_text() == EXCLUDE


def _repos() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*/*/repo") if p.is_dir())


@pytest.mark.parametrize("repo", _repos(), ids=lambda p: p.parent.name)
def test_every_packaged_starting_tree_gets_gits_own_commit_id(repo: Path, tmp_path: Path) -> None:
    mine, theirs, ours = _twice(repo, tmp_path)
    if mine is None:  # declined: the tree has a .gitignore (git's rules), and nothing was left
        assert any(p.name.startswith(".git") for p in repo.rglob("*"))
        assert not (ours / ".git").exists()
        return
    assert mine == theirs
    _clean(ours)


def _odd_tree(root: Path) -> Path:
    src = root / "src"
    for rel, text in {"a.b": "dot\n", "a/b": "slash\n", "a-b": "dash\n", "a0": "zero\n",
                      "A/upper.py": "u = 1\n", "deep/er/still/x.txt": "", "e mpty": "",
                      "new\nline": "nl\n", "unicodé.txt": "é\n", "-leading": "dash\n",
                      "bin.dat": "\x00\x01\x02"}.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(src / "run.sh", 0o755)
    os.symlink("a/b", src / "link")
    os.symlink("/etc/hostname", src / "outside")  # stored as its target string, never followed
    (src / "empty_dir").mkdir()  # git keeps no empty folder
    return src


def test_odd_names_modes_links_and_empty_folders_match_git(tmp_path: Path) -> None:
    mine, theirs, ours = _twice(_odd_tree(tmp_path), tmp_path)
    assert mine is not None and mine == theirs
    _clean(ours)
    assert _git_out(ours, "cat-file", "-p", "HEAD:outside") == "/etc/hostname"
    modes = _git_out(ours, "ls-tree", "HEAD", "run.sh", "link", "a.b")
    assert "100755 blob" in modes and "120000 blob" in modes and "100644 blob" in modes


def test_an_empty_tree_matches_gits_allow_empty_commit(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    mine, theirs, ours = _twice(tmp_path / "src", tmp_path)
    assert mine == theirs
    _clean(ours)


def test_a_later_git_add_sees_an_edit_and_skips_the_rest(tmp_path: Path) -> None:
    """The index holds each file's lstat: ``git add -A`` after an edit stages exactly it."""
    mine, _theirs, ours = _twice(_odd_tree(tmp_path), tmp_path)
    assert mine is not None
    (ours / "a.b").write_text("changed\n")
    (ours / "added.txt").write_text("new\n")
    env = git_env(tmp_path / "home")
    git(ours, "add", "-A", env=env)
    names = git(ours, "diff", "--cached", "--name-status", mine, env=env).stdout.decode()
    assert names.split("\n")[:2] == ["M\ta.b", "A\tadded.txt"]


@pytest.mark.parametrize("planted", [".gitignore", ".gitattributes", "sub/.git", "sub/.GIT",
                                     ".gitmodules", "fifo", "back\\slash"])
def test_trees_needing_gits_own_rules_are_declined_and_leave_nothing(
        tmp_path: Path, planted: str) -> None:
    tree = tmp_path / "wt"
    (tree / "sub").mkdir(parents=True)
    (tree / "keep.py").write_text("x = 1\n")
    target = tree / planted
    if planted == "fifo":
        os.mkfifo(target)
    elif planted.endswith(("/.git", "/.GIT")):
        target.mkdir()
        (target / "HEAD").write_text("ref: refs/heads/main\n")
    else:
        target.write_text("*.py\n")
    assert initial_commit(tree, message=BASE_MESSAGE, identity=GIT_IDENTITY) is None
    assert not (tree / ".git").exists()


def test_create_workspace_writes_no_git_process_for_a_plain_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task without a replayed history starts with no git child; its base is git's id."""
    from ledger.run import workspace
    from ledger.tasks.loader import load_task

    task = load_task(GOLDEN / "smoke" / "add-clamp")
    calls: list[tuple[str, ...]] = []
    real = workspace.git
    monkeypatch.setattr(workspace, "git", lambda cwd, *a, **k: calls.append(a) or real(cwd, *a, **k))
    ws = workspace.create_workspace(task, parent=tmp_path)
    try:
        assert calls == []
        probe = tmp_path / "probe"
        probe.mkdir()
        shutil.copytree(task.repo_dir, probe / "wt")
        (probe / "home").mkdir()
        assert ws.base == _by_git(probe / "wt", probe / "home")
        out = subprocess.run(["git", "status", "--porcelain"], cwd=ws.worktree, check=True,
                             capture_output=True, env=git_env(ws.home)).stdout
        assert out == b""
    finally:
        ws.cleanup()


def test_one_diff_process_gives_the_listing_and_patch_of_two(tmp_path: Path) -> None:
    """``take_diff``'s single ``git diff -z --raw --numstat -p`` splits into exactly what the
    two separate calls (listing, then patch) give: edits, additions, deletions, a mode change,
    a file turned into a link, binary content and odd names."""
    from ledger.run import workspace

    mine, _theirs, tree = _twice(_odd_tree(tmp_path), tmp_path)
    assert mine is not None
    (tree / "a.b").write_text("changed\n")
    (tree / "new\nfile").write_text("x\n")
    (tree / "a0").unlink()
    os.chmod(tree / "a-b", 0o755)
    (tree / "e mpty").unlink()
    os.symlink("a.b", tree / "e mpty")
    (tree / "bin.dat").write_bytes(b"\x00\xff")
    env = git_env(tmp_path / "home")
    git(tree, "add", "-A", env=env)
    files, patch, more = workspace._git_diff(tree, env, mine)
    listing = git(tree, *workspace._DIFF, "-z", "--raw", "--numstat", mine, env=env).stdout
    alone = git(tree, *workspace._DIFF, mine, "--", env=env).stdout
    assert files == workspace._parse_raw_numstat(listing) and len(files) == 6
    assert patch == alone and not more
    assert workspace._split_listing(b"") == (b"", b"")
    assert workspace._split_listing(listing) is None  # a listing cut before the patch
