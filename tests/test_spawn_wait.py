"""``ledger.spawn.wait_exit``: the harness notices a child's exit at once, not at its next poll
(``Popen.wait(timeout=...)`` sleeps up to 50 ms between looks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ledger.spawn import wait_exit

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd here")


@needs_pidfd
def test_waits_for_the_exit_without_polling_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child is still running when the wait starts: ``Popen.wait`` would sleep between
    polls (and ``time.sleep`` raises here); ``wait_exit`` is woken by the pidfd."""
    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"])

    def no_sleep(_s: float) -> None:
        raise AssertionError("polled with time.sleep")

    monkeypatch.setattr(time, "sleep", no_sleep)
    assert wait_exit(proc, 30) == 3
    assert proc.returncode == 3  # reaped


def test_times_out_like_popen_wait_and_leaves_the_child_running() -> None:
    proc = subprocess.Popen(["sleep", "5"])
    try:
        t0 = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(proc, 0.2)
        assert 0.19 < time.monotonic() - t0 < 3
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_signal_death_is_the_negative_signal_number() -> None:
    proc = subprocess.Popen(["sleep", "5"])
    proc.kill()
    assert wait_exit(proc, 10) == -9


def test_read_available_is_bounded_and_never_blocks() -> None:
    """A pipe holding more than the limit gives the limit; an empty open pipe gives b"" at once."""
    import os

    from ledger.spawn import read_available

    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        assert read_available(r, 100) == b""  # empty, writer open: no wait
        os.write(w, b"x" * 60_000)  # under a pipe's 64 KiB, so the write itself never blocks
        assert read_available(r, 50_010) == b"x" * 50_010
        assert read_available(r, 10) == b"x" * 10
        os.close(w)
        w = -1
        assert read_available(r, 100_000) == b"x" * (60_000 - 50_020)
        assert read_available(r, 100) == b""  # closed and drained
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
