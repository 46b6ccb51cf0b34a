"""The fanotify recorder against a real bubblewrap sandbox (``ledger.sandbox.fanotify``).

Each case starts the project's own sandbox command (``bwrap_command`` of a real policy) with
``--block-fd``, marks the sandbox's mounts while bwrap's child waits, releases it, and checks what
the kernel reported: the files the command read and wrote under their sandbox paths, with the
writing process's pid; an exec; the opens of a ``CLONE_UNTRACED`` child (no tracer involved:
fanotify reports every process that opens through the sandbox's mounts); nothing of the host
(a file the harness reads itself during the run); no pseudo file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.sandbox import probe_bwrap
from ledger.sandbox.bwrap import bwrap_command
from ledger.sandbox.fanotify import (
    FAN_CLOSE_NOWRITE,
    FAN_CLOSE_WRITE,
    FanotifyError,
    FileOpen,
    MountRecorder,
    fanotify_status,
    namespace_mounts,
    wait_blocked,
)
from ledger.sandbox.policy import PolicyRequest, build_policy

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()
FAN_OK, FAN_WHY = fanotify_status()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}"),
              pytest.mark.skipif(not FAN_OK, reason=FAN_WHY)]


def _run(tmp: Path, script: str, *, host_read: Path | None = None) -> tuple[list[FileOpen],
                                                                             MountRecorder, str]:
    policy = build_policy(PolicyRequest(cwd=tmp, writable=[tmp], programs=[sys.executable]))
    block_r, block_w = os.pipe()
    argv = bwrap_command(policy, [sys.executable, "-c", script],
                         extra=["--block-fd", str(block_r)])
    rec = MountRecorder()
    proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, pass_fds=(block_r,))
    os.close(block_r)
    try:
        child = wait_blocked(proc.pid, block_r)
        assert rec.mark_namespace(child) >= 2
        rec.start()
        os.write(block_w, b"x")
        os.close(block_w)
        if host_read is not None:
            host_read.read_text()  # the harness's own read, outside the sandbox
        out = proc.communicate(timeout=60)[0].decode()
        events = rec.stop()
    finally:
        rec.close()
    return events, rec, out


def _paths(events: list[FileOpen], bit: int) -> set[str]:
    return {e.path.decode() for e in events if e.mask & bit}


def test_reads_and_writes_are_reported_under_their_sandbox_paths(tmp_path: Path) -> None:
    tmp = tmp_path.resolve()
    (tmp / "in.txt").write_text("data\n")
    host = tmp_path.parent / f"host-only-{os.getpid()}.txt"
    host.write_text("host\n")
    script = ("import os\nprint('attacker: pid', os.getpid(), flush=True)\n"
              "open('in.txt').read()\nopen('out.txt', 'w').write('x')\n"
              "open('/proc/self/status').read()\nopen('/dev/null').read()\n")
    try:
        events, rec, out = _run(tmp, script, host_read=host)
    finally:
        host.unlink()
    assert "attacker: pid" in out, out
    reads, writes = _paths(events, FAN_CLOSE_NOWRITE), _paths(events, FAN_CLOSE_WRITE)
    assert str(tmp / "in.txt") in reads
    assert str(tmp / "out.txt") in writes and str(tmp / "out.txt") not in reads
    assert any(p.endswith("/python3") or "/python3." in p for p in reads | _paths(events, 0x1000))
    assert not [p for p in reads | writes if p.startswith(("/proc", "/dev", "/sys"))]
    assert str(host) not in reads  # the host's own opens are never the sandbox's
    assert not rec.overflowed


def test_a_clone_untraced_child_is_reported(tmp_path: Path) -> None:
    """Attack: a raw CLONE_UNTRACED child reads a file. No tracer is involved: the kernel
    reports its open like any other, with the child's own pid."""
    tmp = tmp_path.resolve()
    (tmp / "secret.txt").write_text("the answer\n")
    script = """
import ctypes, os, platform, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = 56 if platform.machine() == "x86_64" else 220
print("attacker: cloning with CLONE_UNTRACED", flush=True)
pid = libc.syscall(nr, 0x00800000 | int(signal.SIGCHLD), 0, 0, 0, 0)
if pid == 0:
    data = open("secret.txt").read()
    print("attacker: child read", len(data), "bytes", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""
    events, _rec, out = _run(tmp, script)
    assert "attacker: child read 11 bytes" in out, out
    secret = [e for e in events if e.path == str(tmp / "secret.txt").encode()]
    assert any(e.read for e in secret)
    parent_pids = {e.pid for e in events if e.path.endswith(b"/python3") or e.mask & 0x1000}
    assert {e.pid for e in secret} - parent_pids  # the child's own pid, not its parent's


def test_an_exec_and_a_deleted_file_keep_their_paths(tmp_path: Path) -> None:
    tmp = tmp_path.resolve()
    script = ("import os, subprocess\nopen('gone.txt', 'w').write('x')\n"
              "fh = open('gone.txt')\nos.unlink('gone.txt')\nfh.close()\n"
              "subprocess.run(['/bin/true'], check=True)\nprint('attacker: done', flush=True)\n")
    events, _rec, out = _run(tmp, script)
    assert "attacker: done" in out, out
    assert str(tmp / "gone.txt") in _paths(events, FAN_CLOSE_NOWRITE)
    execs = _paths(events, 0x1000)
    assert any(p.endswith("/true") for p in execs), execs


def test_the_pseudo_mounts_are_not_marked(tmp_path: Path) -> None:
    """/proc, /dev and /sys (and what lies under them) are never in the marked set."""
    points = [p for _m, p in namespace_mounts(os.getpid())]
    assert points and not [p for p in points if p.startswith((b"/proc", b"/dev", b"/sys"))]


def test_waiting_for_a_sandbox_that_never_blocks_fails_clearly() -> None:
    proc = subprocess.Popen(["/bin/true"])
    proc.wait()
    with pytest.raises(FanotifyError, match="ended before|did not reach"):
        wait_blocked(proc.pid, 99, timeout=0.2)


def test_turned_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_CAPTURE_FANOTIFY", "off")
    ok, why = fanotify_status()
    assert not ok and "off" in why
