"""The private, throw-away directory an attempt runs in.

    <tmp>/ledger-attempt-XXXX/      mode 0700, removed when the attempt ends
        wt/        the worktree: a copy of the task's repo/ with a fresh git history
        home/      an empty HOME for the agent (its config, caches, credentials helpers)
        scratch/   the prompt file, JUnit reports, demo steps: outside the worktree

The git history of the worktree is made with a fixed author, committer and date, so the same
``repo/`` always yields the same commit ids. When the task ships ``repo_history.yaml`` its commits
are replayed first (an adversarial task hides the fix in history) and the tree is then set to
``repo/`` exactly. The last commit is always ``starting state``; the diff is taken against it.

Ground truth (hidden tests, solution) is copied in only by ``install_hidden_tests``, which the
attempt calls after the agent process group is gone.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import queue
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import safefs
from ledger.errors import TaskError
from ledger.run.background import Background
from ledger.run.gitobjects import initial_commit
from ledger.tasks.model import Task
from ledger.textbound import bound_text

BASE_MESSAGE = "starting state"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "eval-ledger",
    "GIT_AUTHOR_EMAIL": "harness@eval-ledger.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "eval-ledger",
    "GIT_COMMITTER_EMAIL": "harness@eval-ledger.invalid",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
# Caches that tests and tools create; never part of the agent's change.
EXCLUDES = ("__pycache__/", "*.pyc", "*.pyo", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/")
_IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
PATCH_LIMIT = 64 * 1024
CONTENT_LIMIT = 64 * 1024
SCAN_LIMIT = 8 * 1024 * 1024  # patch bytes read to look for conflict markers
FALLBACK_FILE_LIMIT = 1024 * 1024  # bytes of one file the fallback diff reads
FALLBACK_READ_LIMIT = 64 * 1024 * 1024  # bytes the fallback diff reads in all
_GIT_TIMEOUT = 120
_MARKER = re.compile(rb"^\+(<{7}|>{7})(?: |$)", re.MULTILINE)
_PLAIN_MARKER = re.compile(rb"^(<{7}|>{7})(?: |$)", re.MULTILINE)

Redact = Callable[[str], str]


class WorkspaceError(TaskError):
    """The worktree could not be prepared (copy or git failed)."""


@dataclass
class Workspace:
    root: Path
    worktree: Path
    home: Path
    scratch: Path
    base: str  # commit id of "starting state"
    git_dir: Path | None = None  # the harness's own copy of the history (sandboxed attempts)
    pending_git: Background | None = None  # the agent's copy of it, while it is being made

    def ready(self) -> None:
        """Put the agent's ``.git`` in place once its copy is made (raises WorkspaceError if it
        could not be); call before the agent starts."""
        if self.pending_git is None:
            return
        pending, self.pending_git = self.pending_git, None
        try:
            pending.result()
            os.rename(self.root / ".git-agent", self.worktree / ".git")
        except OSError as exc:
            raise WorkspaceError(f"cannot copy the repository's .git for the agent: {exc}") from None

    def cleanup(self) -> None:
        """Remove the attempt's folder (in the background once ``remove_in_background`` was
        called in this process)."""
        if self.pending_git is not None:
            self.pending_git.wait()  # no copy may run into the removal
        if _remover is not None:
            _remover.put(self.root)
        else:
            remove_tree(self.root)


class _Remover:
    """Removes attempt folders, one after the other, in a thread of its own."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Path] = queue.Queue()
        self._thread: threading.Thread | None = None

    def put(self, path: Path) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="ledger-remover", daemon=True)
            self._thread.start()
        self._queue.put(path)

    def _work(self) -> None:
        while True:
            path = self._queue.get()
            try:
                with contextlib.suppress(Exception):  # housekeeping, like the synchronous clean-up
                    remove_tree(path)
            finally:
                self._queue.task_done()

    def drain(self) -> None:
        self._queue.join()


_remover: _Remover | None = None


def remove_in_background() -> None:
    """From now on ``Workspace.cleanup`` in this process hands the folder to a background thread
    and returns: a worker process then takes its next attempt while the last one's files go.
    Call ``drain_removals`` before the process ends."""
    global _remover
    if _remover is None:
        _remover = _Remover()


def drain_removals() -> None:
    """Wait until every folder handed to the background has been removed."""
    if _remover is not None:
        _remover.drain()


def _unlock(path: str) -> None:
    """Give the owner rwx on every directory below ``path`` (an agent may have chmod-ed them)."""
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
        with os.scandir(path) as it:
            for child in it:
                if child.is_dir(follow_symlinks=False):
                    _unlock(child.path)


def remove_tree(path: Path) -> None:
    """Remove ``path`` even when an agent made parts of it read-only; never follows symlinks."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    try:
        shutil.rmtree(path)
    except OSError:
        _unlock(str(path))
        shutil.rmtree(path, ignore_errors=True)


def git_env(home: Path) -> dict[str, str]:
    """A git environment that ignores the user's and the system's configuration, with automatic
    ``gc`` off (a commit of a large tree would otherwise pack the refs the harness reads, and
    spend the attempt's time compacting a repository that lives for one attempt)."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "gc.auto",
        "GIT_CONFIG_VALUE_0": "0",
        **GIT_IDENTITY,
    }


def git(cwd: Path, *args: str, env: Mapping[str, str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            capture_output=True, timeout=_GIT_TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceError(f"git {args[0]} failed in {cwd}: {exc}") from None
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorkspaceError(f"git {args[0]} failed in {cwd}: {err[-1] if err else proc.returncode}")
    return proc


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _IGNORED_NAMES or n.endswith((".pyc", ".pyo"))}


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a task folder's files (not its caches) into ``dst``, merging with what is there."""
    shutil.copytree(src, dst, ignore=_ignore, dirs_exist_ok=True, symlinks=True)


def _write_history(worktree: Path, files: Mapping[str, str | None]) -> None:
    for rel, content in files.items():
        target = worktree / rel
        if content is None:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _clear_worktree(worktree: Path) -> None:
    for child in worktree.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            remove_tree(child)
        else:
            child.unlink()


def _git_history(worktree: Path, task: Task, commits: list[Any], env: Mapping[str, str], *,
                 copied: bool) -> str:
    """The worktree's history made by git itself: the task's replayed commits, then ``repo/`` as
    ``starting state`` (a tree ``initial_commit`` declines, or a task with a history)."""
    if (worktree / ".git").exists():
        remove_tree(worktree / ".git")
    git(worktree, "init", "-q", "-b", "main", env=env)
    (worktree / ".git" / "info").mkdir(exist_ok=True)
    (worktree / ".git" / "info" / "exclude").write_text("\n".join(EXCLUDES) + "\n")
    for commit in commits:
        _write_history(worktree, commit.files)
        git(worktree, "add", "-A", env=env)
        git(worktree, "commit", "-q", "--allow-empty", "--no-verify", "-m", commit.message, env=env)
    if commits:
        _clear_worktree(worktree)
    if not copied:
        copy_tree(task.repo_dir, worktree)
    git(worktree, "add", "-A", env=env)
    git(worktree, "commit", "-q", "--allow-empty", "--no-verify", "-m", BASE_MESSAGE, env=env)
    return (worktree / ".git" / "refs" / "heads" / "main").read_text().strip()


def create_workspace(
    task: Task,
    *,
    history: Iterable[Any] = (),
    parent: Path | None = None,
    shadow_git: bool = False,
) -> Workspace:
    """Make the attempt directory and a worktree holding ``repo/`` at commit ``starting state``.

    ``history`` is the task's replayed commits (objects with ``message`` and ``files``).
    ``shadow_git`` keeps the fresh ``.git`` beside the worktree (``root/git``, never shown to a
    sandboxed agent): ``take_diff`` then runs git with it, so nothing the agent wrote into its
    copy of ``.git`` (``core.fsmonitor``, filter drivers, hooks) runs on the host. The agent's
    copy is made in the background and put in place by ``Workspace.ready``, which the caller
    calls before the agent starts: until then the worktree has no ``.git`` (the public tests'
    baseline runs as the grading does, without one).
    """
    root = Path(tempfile.mkdtemp(prefix="ledger-attempt-", dir=parent))
    try:
        os.chmod(root, 0o700)
        worktree, home, scratch = root / "wt", root / "home", root / "scratch"
        for folder in (worktree, home, scratch):
            folder.mkdir(mode=0o700)
        commits = list(history)
        base = None
        if not commits:  # the usual case: written in-process, no git process (gitobjects.py)
            copy_tree(task.repo_dir, worktree)
            base = initial_commit(worktree, message=BASE_MESSAGE, identity=GIT_IDENTITY,
                                  exclude="\n".join(EXCLUDES) + "\n")
        if base is None:
            base = _git_history(worktree, task, commits, git_env(home), copied=not commits)
        git_dir = pending = None
        if shadow_git:
            # the harness keeps the very .git it made; the agent gets a copy, made in the
            # background and put in place by ``ready`` (the public tests run without one)
            git_dir = root / "git"
            os.rename(worktree / ".git", git_dir)
            pending = Background(shutil.copytree, git_dir, root / ".git-agent", symlinks=True)
        return Workspace(root=root, worktree=worktree, home=home, scratch=scratch, base=base,
                         git_dir=git_dir, pending_git=pending)
    except BaseException:
        remove_tree(root)
        raise


def create_grading_tree(task: Task, *, parent: Path | None = None) -> Workspace:
    """A fresh copy of the task's starting repo (``repo/``) to grade in, with its own empty home
    and scratch: no git history (grading needs none), nothing of the agent's."""
    root = Path(tempfile.mkdtemp(prefix="ledger-grade-", dir=parent))
    try:
        os.chmod(root, 0o700)
        worktree, home, scratch = root / "wt", root / "home", root / "scratch"
        for folder in (home, scratch):
            folder.mkdir(mode=0o700)
        worktree.mkdir(mode=0o700)
        copy_tree(task.repo_dir, worktree)
        return Workspace(root=root, worktree=worktree, home=home, scratch=scratch, base="")
    except BaseException:
        remove_tree(root)
        raise


def install_hidden_tests(ws: Workspace, task: Task) -> Path:
    """Bring the hidden tests into the worktree (replacing anything the agent put there):
    ``tests/`` copied in, or the hidden test patch applied (``ledger.tasks.apply``)."""
    from ledger.tasks.apply import install_hidden_tests as install

    if not ws.worktree.is_dir():
        ws.worktree.mkdir(parents=True)
    return install(task, ws.worktree, remove=remove_tree)


# --------------------------------------------------------------------------- diff


def _file_content(worktree: Path, rel: str, limit: int, redact: Redact) -> str | None:
    """The final text of a changed file, for replay; None when binary, too large, unreadable or not
    a regular file (read with ``ledger.safefs.read_under``: no link, FIFO or device is opened)."""
    data = safefs.read_under(worktree, rel, limit)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    return redact(text)


def _read_bounded(argv: list[str], cwd: Path, env: Mapping[str, str], limit: int) -> tuple[bytes, bool, int]:
    """Run ``argv`` and read at most ``limit`` bytes of stdout (the rest is drained and counted)."""
    with subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        head = proc.stdout.read(limit)
        total = len(head)
        more = False
        while True:
            chunk = proc.stdout.read(1 << 16)
            if not chunk:
                break
            more = True
            total += len(chunk)
        code = proc.wait(timeout=_GIT_TIMEOUT)
    if code != 0:
        raise WorkspaceError(f"{' '.join(argv[:2])} exited with {code}")
    return head, more, total


_DIFF = ("diff", "--cached", "--no-renames", "--no-ext-diff", "--no-textconv")
LISTING_LIMIT = 4 * 1024 * 1024  # bytes of the raw and numstat listing read with the patch


def _split_listing(out: bytes) -> tuple[bytes, bytes] | None:
    """(listing, patch) of ``git diff -z --raw --numstat -p``: the raw records (``:...`` and a
    path each), the numstat records, one empty record, then the patch; None when ``out`` ends
    before the patch begins (cut short by the read limit)."""
    pos = 0
    while out.startswith(b":", pos):  # a raw record, then its path (paths hold no NUL)
        for _ in range(2):
            pos = out.find(b"\0", pos) + 1
            if pos == 0:
                return None
    while pos < len(out) and out[pos] != 0:  # a numstat record ("added\tremoved\tpath")
        pos = out.find(b"\0", pos) + 1
        if pos == 0:
            return None
    if pos >= len(out):
        return (out, b"") if pos == len(out) and not out else None
    return out[:pos], out[pos + 1:]


def _git_diff(wt: Path, env: Mapping[str, str], base: str) -> tuple[list[dict[str, Any]], bytes, bool]:
    """(files, the patch's first ``SCAN_LIMIT`` bytes, whether there was more) of the staged
    change against ``base``: one git process for the listing and the patch, or two when the
    listing alone outgrows ``LISTING_LIMIT``."""
    out, more, _total = _read_bounded(["git", *_DIFF, "-z", "--raw", "--numstat", "-p", base, "--"],
                                      wt, env, LISTING_LIMIT + SCAN_LIMIT)
    split = _split_listing(out)
    if split is not None and (not more or len(split[1]) >= SCAN_LIMIT):
        listing, patch = split
        return _parse_raw_numstat(listing), patch[:SCAN_LIMIT], more or len(patch) > SCAN_LIMIT
    listing = git(wt, *_DIFF, "-z", "--raw", "--numstat", base, env=env).stdout
    head, more, _total = _read_bounded(["git", *_DIFF, base, "--"], wt, env, SCAN_LIMIT)
    return _parse_raw_numstat(listing), head, more


def _parse_raw_numstat(out: bytes) -> list[dict[str, Any]]:
    tokens = out.split(b"\0")
    status: dict[str, str] = {}
    counts: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok:
            i += 1
            continue
        if tok.startswith(b":"):
            letter = tok.split()[-1][:1].decode()
            path = tokens[i + 1].decode("utf-8", "replace")
            status[path] = {"A": "added", "D": "deleted"}.get(letter, "modified")
            order.append(path)
            i += 2
            continue
        added, removed, path_b = tok.split(b"\t", 2)
        path = path_b.decode("utf-8", "replace")
        counts[path] = (
            int(added) if added.isdigit() else 0,
            int(removed) if removed.isdigit() else 0,
        )
        i += 1
    return [
        {"path": p, "status": status[p], "added": counts.get(p, (0, 0))[0],
         "removed": counts.get(p, (0, 0))[1]}
        for p in order
    ]


def _walk(folder: Path) -> safefs.Walk:
    return safefs.walk(folder, skip_names=_IGNORED_NAMES, skip_suffixes=(".pyc", ".pyo"))


@dataclass
class _Side:
    """One side of a path in the fallback diff: a file's bytes (None: over the cap), a link's
    target, or a special file (never opened)."""

    kind: str
    data: bytes | None = None
    size: int = 0


def _side(root: Path, node: safefs.Node | None, budget: list[int]) -> _Side | None:
    if node is None:
        return None
    if node.kind == safefs.LINK:
        return _Side(safefs.LINK, os.fsencode(node.target or ""), node.size)
    if node.kind != safefs.FILE:
        return _Side(safefs.OTHER, None, node.size)
    if node.size > FALLBACK_FILE_LIMIT or node.size > budget[0]:
        return _Side(safefs.FILE, None, node.size)
    data = safefs.read_under(root, node.rel, FALLBACK_FILE_LIMIT)
    budget[0] -= len(data or b"")
    return _Side(safefs.FILE, data, node.size)


def _same(a: _Side | None, b: _Side | None) -> bool:
    if a is None or b is None or a.kind != b.kind:
        return False
    if a.data is None or b.data is None:  # too large to read (or special): compared by size
        return a.size == b.size and a.kind == safefs.OTHER
    return a.data == b.data


def _lines(side: _Side | None) -> list[str] | None:
    if side is None:
        return []
    if side.data is None or b"\0" in side.data:
        return None
    try:
        return side.data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _fallback_diff(repo_dir: Path, worktree: Path,
                   after: safefs.Walk | None = None) -> tuple[list[dict[str, Any]], str, bool]:
    """Compare the worktree with ``repo/`` directly, when git cannot be trusted with the tree (its
    ``.git`` destroyed, a nested repository, a ``.git`` file): (files, patch, truncated).

    The walk never follows a link (a link is diffed as its target string, the way git records
    it), never opens a FIFO, socket or device (listed, marked ``Not a regular file``), reads at
    most ``FALLBACK_FILE_LIMIT`` bytes of one file and ``FALLBACK_READ_LIMIT`` in all (past them,
    files are compared by size and the diff is marked truncated). Names that are not plain
    printable ASCII are quoted in the patch the way git quotes them."""
    before = _walk(repo_dir)
    after = after if after is not None else _walk(worktree)
    truncated = after.truncated
    budget = [FALLBACK_READ_LIMIT]
    files: list[dict[str, Any]] = []
    chunks: list[str] = []
    for rel in sorted(set(before.nodes) | set(after.nodes), key=os.fsencode):
        a = _side(repo_dir, before.nodes.get(rel), budget)
        b = _side(worktree, after.nodes.get(rel), budget)
        if _same(a, b):
            continue
        if any(s is not None and s.kind == safefs.FILE and s.data is None for s in (a, b)):
            truncated = truncated or budget[0] <= 0
        status = "added" if a is None else "deleted" if b is None else "modified"
        name = safefs.text_name(rel)
        shown_a, shown_b = safefs.display("a/" + rel), safefs.display("b/" + rel)
        if any(s is not None and s.kind == safefs.OTHER for s in (a, b)):
            files.append({"path": name, "status": status, "added": 0, "removed": 0})
            chunks.append(f"Not a regular file: {shown_b if b is not None else shown_a}\n")
            continue
        old, new = _lines(a), _lines(b)
        if old is None or new is None:
            files.append({"path": name, "status": status, "added": 0, "removed": 0})
            chunks.append(f"Binary files {shown_a} and {shown_b} differ\n")
            continue
        lines = list(difflib.unified_diff(old, new, "/dev/null" if a is None else shown_a,
                                          "/dev/null" if b is None else shown_b, lineterm="\n"))
        added = sum(1 for ln in lines[2:] if ln.startswith("+"))
        removed = sum(1 for ln in lines[2:] if ln.startswith("-"))
        files.append({"path": name, "status": status, "added": added, "removed": removed})
        if (a is not None and a.kind == safefs.LINK) or (b is not None and b.kind == safefs.LINK):
            chunks.append(f"symbolic link {shown_b if b is not None else shown_a}\n")
        chunks.append("".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n"
                              for ln in lines))
    return files, "".join(chunks), truncated


def take_diff(
    ws: Workspace,
    repo_dir: Path,
    *,
    redact: Redact,
    patch_limit: int = PATCH_LIMIT,
    content_limit: int = CONTENT_LIMIT,
) -> dict[str, Any]:
    """The agent's change as the data of a ``diff`` entry (without ``attempt``).

    Files carry ``content``: the final text of an added or modified file (redacted; None when
    deleted, binary or larger than ``content_limit``), which is what ``replay:RUN`` re-enacts.
    ``apply_failed`` is true when git could not produce the change against ``starting state``
    (the agent destroyed the worktree or its history); the files then come from comparing the
    worktree with ``repo/`` directly.
    """
    env = git_env(ws.home)
    wt = ws.worktree
    if ws.git_dir is not None:
        env.update({"GIT_DIR": str(ws.git_dir), "GIT_WORK_TREE": str(wt)})
    apply_failed = False
    try:
        if ws.git_dir is None and not (wt / ".git").is_dir():
            raise WorkspaceError("the worktree has no .git")
        if safefs.nested_repositories(wt, skip_names=_IGNORED_NAMES):
            # git would resolve a nested repository's HEAD, or a `.git` file naming a host
            # repository, or refuse one without a commit: the safe walk takes the diff instead
            raise WorkspaceError("the worktree holds a nested repository")
        git(wt, "add", "-A", env=env)
        files, head, more = _git_diff(wt, env, ws.base)
        conflict = bool(_MARKER.search(head))
        patch_full = head.decode("utf-8", "replace")
        if more:
            patch_full += "\n"
    except WorkspaceError:
        apply_failed = True
        files, patch_full, more = _fallback_diff(repo_dir, wt)
        conflict = bool(_PLAIN_MARKER.search(
            "\n".join(ln[1:] for ln in patch_full.splitlines() if ln.startswith("+")).encode()
        ))
    patch, truncated, _ = bound_text(redact(patch_full), patch_limit)
    for entry in files:
        entry["content"] = (
            None if entry["status"] == "deleted"
            else _file_content(wt, entry["path"], content_limit, redact)
        )
    return {
        "files": files,
        "patch": patch,
        "truncated": truncated or more,
        "conflict_markers": conflict,
        "apply_failed": apply_failed,
    }
