"""The signal series runner (ledger/sandbox/signal_series.py): runs ``python -c`` codes one
after the other in forked children, and what one run can and cannot reach of the others."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.sandbox import sandbox_status
from ledger.sandbox.signal_series import Job, SignalSeries
from ledger.tasks.checks import run_command

_SANDBOX = sandbox_status("auto")


def _series(tmp_path: Path, *codes: str, timeout: float = 20.0, backend: str = "none",
            extra_env: dict[str, str] | None = None) -> tuple[int, dict[int, Any]]:
    """Run ``codes`` as one series in a grading box of ``backend`` over ``tmp_path``."""
    from ledger.sandbox.port import GradingRequest
    from ledger.sandbox.registry import get

    wt, home, scratch = (tmp_path / n for n in ("wt", "home", "scratch"))
    for d in (wt, home, scratch):
        d.mkdir(exist_ok=True)
    box = get(backend).grading_box(GradingRequest(wt, home, scratch))
    series = SignalSeries([Job(k, c, (), timeout) for k, c in enumerate(codes)])
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(scratch), "HOME": str(home), **series.env(),
           **(extra_env or {})}
    try:
        confined = box.command(series.argv(sys.executable), env, limits=None)
        code, _s, _t = run_command(confined.argv, cwd=wt, env=confined.env,
                                   timeout=series.timeout(), output=scratch / "log",
                                   pass_fds=(*series.pass_fds, *confined.pass_fds),
                                   preexec=confined.preexec)
        return code, series.collect()
    except BaseException:
        series.close()
        raise
    finally:
        box.close()


def test_each_run_ends_with_its_own_record_exit_code_and_tail(tmp_path: Path) -> None:
    code, runs = _series(tmp_path, "import sys; assert sys.argv == ['-c']; print('one')",
                         "print('two'); raise SystemExit(3)", "print('three'); assert 1 == 2")
    assert code == 0 and sorted(runs) == [0, 1, 2]
    assert (runs[0]["exit"], runs[0]["ended"], runs[0]["exitstatus"]) == (0, True, 0)
    assert (runs[1]["exit"], runs[1]["exitstatus"]) == (3, 3) and "two" in runs[1]["tail"]
    assert runs[2]["exit"] == 1 and runs[2]["exitstatus"] == 1
    assert "AssertionError" in runs[2]["tail"].splitlines()  # the traceback, as python -c prints it


def test_a_run_starts_fresh_from_the_last_ones_module_state(tmp_path: Path) -> None:
    """Globals and imports of one run are not the next one's (each is a fork of the runner)."""
    _code, runs = _series(tmp_path, "import fractions; x = 1",
                          "import sys; assert 'x' not in globals(); "
                          "assert 'fractions' not in sys.modules")
    assert runs[1]["ended"] and runs[1]["exitstatus"] == 0, runs[1]


def test_what_a_run_started_is_gone_before_the_next_run(tmp_path: Path) -> None:
    """A daemon of run 0 (its own session, double-forked) is killed before run 1 starts."""
    spawn = ("import os, subprocess, sys\n"
             "p = subprocess.Popen(['/bin/sh', '-c', 'sleep 60 & echo $! > pid; wait'],"
             " start_new_session=True)\n"
             "import time\n"
             "while not os.path.exists('pid') or not open('pid').read().strip(): time.sleep(0.01)\n")
    check = ("import os\n"
             "pid = int(open('pid').read())\n"
             "try:\n    os.kill(pid, 0)\nexcept ProcessLookupError:\n    pass\n"
             "else:\n    raise SystemExit('the daemon of the last run is alive')\n")
    _code, runs = _series(tmp_path, spawn, check)
    assert runs[0]["ended"], runs[0]
    assert runs[1]["ended"] and runs[1]["exitstatus"] == 0, runs[1]


@pytest.mark.sandbox
@pytest.mark.skipif(_SANDBOX.mode != "bwrap", reason=_SANDBOX.reason)
def test_a_run_cannot_open_the_runners_descriptors_or_environment(tmp_path: Path) -> None:
    """In the grading sandbox the runner is not dumpable: a child cannot reach the channel,
    the feed (the jobs to come) or the runner's environment through /proc."""
    probe = ("import os\n"
             "p = os.getppid()\n"
             "try:\n"
             "    fds = os.listdir(f'/proc/{p}/fd')\n"
             "except PermissionError:\n"
             "    fds = []\n"
             "opened = []\n"
             "for n in fds:\n"
             "    try:\n"
             "        os.close(os.open(f'/proc/{p}/fd/{n}', os.O_RDONLY | os.O_NONBLOCK))\n"
             "        opened.append(n)\n"
             "    except OSError:\n"
             "        pass\n"
             "print('fds opened', opened)\n"
             "for what in ('environ', 'mem'):\n"
             "    try:\n"
             "        open(f'/proc/{p}/{what}', 'rb').read(1)\n"
             "    except PermissionError:\n"
             "        print('refused', what)\n"
             "    else:\n"
             "        print('OPENED', what)\n")
    _code, runs = _series(tmp_path, probe, "pass", backend="bwrap")
    assert [line for line in runs[0]["tail"].splitlines()] == [
        "fds opened []", "refused environ", "refused mem"], runs[0]["tail"]


def test_an_atexit_exit_disagrees_with_the_end_record(tmp_path: Path) -> None:
    _code, runs = _series(tmp_path, "import atexit, os; atexit.register(lambda: os._exit(0)); "
                                    "assert False")
    assert runs[0]["exit"] == 0 and runs[0]["exitstatus"] == 1


def test_an_early_exit_has_no_end_record(tmp_path: Path) -> None:
    _code, runs = _series(tmp_path, "import os; os._exit(0)", "pass")
    assert runs[0]["exit"] == 0 and runs[0]["ended"] is False
    assert runs[1]["ended"] is True


def test_killing_the_runner_ends_the_series_unreported(tmp_path: Path) -> None:
    """The run that kills its runner and every run after it are never reported."""
    code, runs = _series(tmp_path, "pass", "import os, signal; os.kill(os.getppid(), 9)", "pass")
    assert sorted(runs) == [0] and code == 128 + 9


def test_a_runner_that_cannot_protect_itself_runs_nothing(tmp_path: Path) -> None:
    """No prctl (here: a ctypes that fails to import): no job runs, not even an honest one."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "ctypes.py").write_text("raise ImportError('no ctypes in this test')\n")
    marker = tmp_path / "ran"
    code, runs = _series(tmp_path, f"open({str(marker)!r}, 'w').write('x')",
                         extra_env={"PYTHONPATH": str(fake)})
    assert code == 70 and runs == {} and not marker.exists()
    code, runs = _series(tmp_path, f"open({str(marker)!r}, 'w').write('x')")  # the control
    assert code == 0 and sorted(runs) == [0] and marker.exists()


def test_a_run_over_its_time_is_killed_and_the_next_one_runs(tmp_path: Path) -> None:
    _code, runs = _series(tmp_path, "import time; time.sleep(30)", "pass", timeout=1.0)
    assert runs[0]["timed_out"] is True and runs[0]["ended"] is False
    assert runs[1]["ended"] is True
