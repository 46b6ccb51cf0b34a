"""A task is validated exactly the way it runs: `tasks validate` and the run share one runner and
one signal check (ledger/tasks/checks.py), so each signal gets the same verdict from both."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ledger.run.attempt import run_signal
from ledger.run.workspace import create_workspace
from ledger.tasks import checks
from ledger.tasks.loader import load_tasks
from ledger.tasks.model import Signal
from ledger.tasks.validate import check_signal, run_command
from tests.run.minitasks import make_ledger

# One case per way a signal can go; the expected verdict holds for both paths.
CASES = {
    "path-inside": (Signal(kind="path_exists", path="ops.py"), True),
    "path-missing": (Signal(kind="path_exists", path="nope.py"), False),
    "path-escapes-by-dotdot": (Signal(kind="path_exists", path="../../"), False),
    "path-escapes-by-symlink": (Signal(kind="path_exists", path="out-link/secret.txt"), False),
    "contains-found": (Signal(kind="file_contains", path="ops.py", pattern=r"def sub\("), True),
    "contains-not-found": (Signal(kind="file_contains", path="ops.py", pattern="a - b"), False),
    "contains-escapes": (Signal(kind="file_contains", path="out-link/secret.txt", pattern="x"), False),
    "command-ok": (Signal(kind="command", command=("python", "-c", "import ops")), True),
    "command-exit": (Signal(kind="command", command="exit 4", expect_exit=4), True),
}


@pytest.fixture(scope="module")
def worktree(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real attempt workspace of the mini task fix-sub, with a symlink out of it."""
    home = make_ledger(tmp_path_factory.mktemp("mini"), tasks=("fix-sub",))
    task = {t.id: t for t in load_tasks(["mini"], overrides=home / "golden")}["fix-sub"]
    ws = create_workspace(task)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("x\n")
    os.symlink(outside, ws.worktree / "out-link")
    yield ws
    ws.cleanup()


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_and_run_give_a_signal_the_same_verdict(worktree, case: str) -> None:  # type: ignore[no-untyped-def]
    """check_signal (tasks validate) and run_signal (a run) agree, escapes refused by both."""
    sig, expected = CASES[case]
    validated, v_detail, _executable = check_signal(sig, worktree.worktree)
    ran = run_signal(worktree, 0, sig, redact=str, timeout=30)
    assert validated is ran["passed"] is expected
    if sig.kind != "command":
        assert v_detail == ran["detail"]


def test_validate_runs_commands_with_the_runs_time_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A command signal is given the run's signal time limit, not a shorter one of its own."""
    seen: list[float] = []
    real = checks.run_command

    def spy(argv, **kw):  # type: ignore[no-untyped-def]
        seen.append(kw["timeout"])
        return real(argv, **kw)

    monkeypatch.setattr(checks, "run_command", spy)
    check_signal(Signal(kind="command", command="exit 0"), tmp_path)
    assert seen == [checks.SIGNAL_TIMEOUT_S]


def test_a_timed_out_command_takes_its_process_group_with_it(tmp_path: Path) -> None:
    """validate's runner is the run's: at the time limit the whole process group is killed."""
    pidfile = tmp_path / "child.pid"
    res = run_command(f"sleep 300 & echo $! > {pidfile}; wait", tmp_path, timeout=1.0)
    assert res.exit_code is None and "timed out" in res.summary
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Running (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False
