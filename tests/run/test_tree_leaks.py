"""Nothing of the host is read through the agent's tree: the diff (and its fallback) opens regular
files only, records links as links, never opens a FIFO, and handles nested repositories, a
``.git`` file and odd names. Each attack runs through the real `ledger run` in the default sandbox
(or, for the unit cases, through ``take_diff``) and proves its attacker ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ledger.journal.journal import Journal
from ledger.run.workspace import create_workspace, git_env, take_diff
from ledger.tasks.loader import load_task
from tests.run.minitasks import make_ledger
from tests.run.test_workspace import _task

LEDGER = [sys.executable, "-P", "-c", "from cli.main import main; main()"]

# The agent: makes a nested repository without a commit (so the harness's `git add -A` fails),
# then plants what it was told to (a link to a host file, or a FIFO) and says so on stdout.
_AGENT = '''\
import os, subprocess, sys
what, arg = sys.argv[1], sys.argv[2]
if what != "gitfile":  # a nested repository without a commit: `git add -A` refuses it
    rc = subprocess.run(["git", "init", "-q", "sub"], capture_output=True).returncode
    if rc != 0:
        os.makedirs("sub/.git/objects", exist_ok=True); os.makedirs("sub/.git/refs", exist_ok=True)
        open("sub/.git/HEAD", "w").write("ref: refs/heads/main\\n")
    open("sub/inner.txt", "w").write("inner\\n")
if what == "link":
    os.symlink(arg, "notes.txt")
    print("ATTACKER planted notes.txt ->", arg, "nested repo rc", rc, flush=True)
elif what == "gitfile":
    os.makedirs("sub2", exist_ok=True)
    open("sub2/.git", "w").write("gitdir: " + arg + "\\n")
    open("sub2/inner.txt", "w").write("inner\\n")
    print("ATTACKER planted sub2/.git ->", arg, flush=True)
else:
    os.mkfifo("pipe")
    print("ATTACKER planted a FIFO named pipe, nested repo rc", rc, flush=True)
src = open("calc.py").read().replace("a - b", "a + b")
open("calc.py", "w").write(src)
'''


def _run(tmp_path: Path, what: str, arg: str, *, timeout: float = 180) -> tuple[Path, dict, list]:
    home = make_ledger(tmp_path, tasks=("fix-add",))
    agent = tmp_path / "agent.py"
    agent.write_text(_AGENT)
    proc = subprocess.run(
        [*LEDGER, "--ledger", str(home), "run", "--json", "--task", "fix-add",
         "--agent", f"cmd:{sys.executable} {agent} {what} {arg}", "--timeout", "60"],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary["run"]))
    return home, summary, entries


def _said(entries: list, text: str) -> bool:
    return any(text in json.dumps(e.data, default=str) for e in entries if e.kind != "diff")


def test_nested_repository_symlink_to_a_host_file_leaks_no_byte(tmp_path: Path) -> None:
    """notes.txt -> a host file, beside a nested repository that makes `git add -A` fail: the
    patch records the link (its target string), and no byte of the host file reaches the journal
    or an exported bundle."""
    marker = f"HOST-SECRET-{uuid.uuid4().hex}"
    host_file = tmp_path / "host" / "secret.txt"
    host_file.parent.mkdir()
    host_file.write_text(marker + "\n")
    home, summary, entries = _run(tmp_path, "link", str(host_file))
    assert _said(entries, "ATTACKER planted notes.txt"), "the attacker never ran"
    (diff,) = [e for e in entries if e.kind == "diff"]
    paths = {f["path"]: f for f in diff.data["files"]}
    assert "notes.txt" in paths and paths["notes.txt"]["content"] is None
    assert str(host_file) in diff.data["patch"]  # the link, as a link
    assert "sub/inner.txt" in paths  # the nested repository's files are the agent's change
    assert marker.encode() not in (home / "journal.db").read_bytes()
    assert all(marker not in json.dumps(e.data, default=str) for e in entries)
    bundle = tmp_path / "bundle.json"
    out = subprocess.run([*LEDGER, "--ledger", str(home), "export", summary["run"], "-o", str(bundle)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert marker.encode() not in bundle.read_bytes()


def test_fifo_in_the_worktree_does_not_block_the_run(tmp_path: Path) -> None:
    """A FIFO beside a nested repository: the diff never opens it, the run ends well within its
    timeout and the FIFO is listed as a special file."""
    _home, summary, entries = _run(tmp_path, "fifo", "-", timeout=150)
    assert _said(entries, "ATTACKER planted a FIFO"), "the attacker never ran"
    (diff,) = [e for e in entries if e.kind == "diff"]
    assert "pipe" in {f["path"] for f in diff.data["files"]}
    assert summary["attempts"][0]["status"] == "completed"
    assert summary["attempts"][0]["hidden_passed"] is True  # the agent's real fix was graded


def test_git_file_pointing_at_a_host_repository_reads_nothing_of_it(tmp_path: Path) -> None:
    """sub2/.git is a file naming the host's repository: the diff never resolves it (no commit id
    of the host repository in the journal)."""
    host = tmp_path / "hostrepo"
    host.mkdir()
    env = git_env(tmp_path)
    subprocess.run(["git", "init", "-q", str(host)], env=env, check=True)
    (host / "f").write_text(uuid.uuid4().hex)
    subprocess.run(["git", "-C", str(host), "add", "-A"], env=env, check=True)
    subprocess.run(["git", "-C", str(host), "commit", "-qm", "x"], env=env, check=True)
    head = subprocess.run(["git", "-C", str(host), "rev-parse", "HEAD"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    home, _summary, entries = _run(tmp_path, "gitfile", str(host / ".git"))
    assert _said(entries, "ATTACKER planted sub2/.git"), "the attacker never ran"
    assert head.encode() not in (home / "journal.db").read_bytes()
    (diff,) = [e for e in entries if e.kind == "diff"]
    assert head[:7] not in json.dumps(diff.data)
    assert "sub2/inner.txt" in {f["path"] for f in diff.data["files"]}


@pytest.mark.parametrize("git_ok", [True, False], ids=["git", "fallback"])
def test_odd_names_are_diffed_quoted_and_never_forge_a_line(tmp_path: Path, git_ok: bool) -> None:
    """Names with a newline, a leading dash and non-UTF-8 bytes: the diff lists them, the patch
    quotes them (no forged header line), and neither path crashes."""
    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        if not git_ok:
            (ws.worktree / "nest" / ".git").mkdir(parents=True)  # a nested repository
        (ws.worktree / "x\n+++ forged").write_text("a\n")
        (ws.worktree / "-rf").write_text("b\n")
        (Path(os.fsdecode(os.fsencode(ws.worktree) + b"/caf\xe9.txt"))).write_text("c\n")
        d = take_diff(ws, task.repo_dir, redact=lambda s: s)
        assert d["apply_failed"] is (not git_ok)
        paths = {f["path"] for f in d["files"]}
        assert {"x\n+++ forged", "-rf"} <= paths
        assert any(p.startswith("caf") and p.endswith(".txt") for p in paths)
        json.dumps(d)  # every field is valid text
        assert "\n+++ forged" not in d["patch"]
        assert "+b\n" in d["patch"] and "+c\n" in d["patch"]
    finally:
        ws.cleanup()


def test_fallback_reads_bounded_per_file(tmp_path: Path) -> None:
    """A file over the per-file cap is compared but never put in the patch."""
    from ledger.run import workspace

    task = load_task(_task(tmp_path))
    ws = create_workspace(task)
    try:
        (ws.worktree / "nest" / ".git").mkdir(parents=True)
        (ws.worktree / "big.txt").write_text("line\n" * (workspace.FALLBACK_FILE_LIMIT // 5 + 10))
        d = take_diff(ws, task.repo_dir, redact=lambda s: s)
        assert d["apply_failed"] is True
        assert "big.txt" in {f["path"] for f in d["files"]}
        assert "+line" not in d["patch"]
    finally:
        ws.cleanup()
