"""The strace log of a sandboxed agent: bubblewrap's set-up cut off; a tracer that lets go early."""

from __future__ import annotations

import os
import subprocess

import pytest

from ledger.agents.strace import strace_status
from ledger.sandbox.tracelog import TraceWatch, agent_lines

STRACE_OK, STRACE_WHY = strace_status()

LOG = """\
100 1.0 execve("/usr/bin/bwrap", ["bwrap", "--unshare-all"], 0x1 /* 3 vars */) = 0
100 1.1 openat(AT_FDCWD</tmp>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>
101 1.2 openat(AT_FDCWD</>, "/newroot/usr", O_RDONLY|O_PATH) = 5</newroot/usr>
101 1.3 openat(5</proc/101>, "uid_map", O_RDWR|O_CLOEXEC) = 6</proc/101/uid_map>
102 1.4 openat(AT_FDCWD</>, "/newroot/tmp/x", O_RDONLY|O_PATH) = 5</newroot/tmp/x>
102 1.5 execve("/bin/sh", ["/bin/sh", "-c", "cat f"], 0x2 /* 3 vars */) = 0
102 1.6 openat(AT_FDCWD</wt>, "f", O_RDONLY) = 3</wt/f>
101 1.7 wait4(-1, NULL, 0, NULL) = 102
"""


def test_agent_lines_keep_the_agent_from_its_first_exec() -> None:
    """Lines of bwrap's processes and everything before the agent's exec are dropped."""
    kept = list(agent_lines(LOG.splitlines(keepends=True)))
    assert [ln.split()[2].split("(")[0] for ln in kept] == ["execve", "openat"]
    assert all(ln.startswith("102 ") for ln in kept)


def test_agent_lines_without_an_agent_exec_keep_nothing() -> None:
    """bwrap failed before the agent ran: nothing is kept, not bwrap's activity."""
    assert list(agent_lines(LOG.splitlines(keepends=True)[:4])) == []


@pytest.mark.strace
@pytest.mark.skipif(not STRACE_OK, reason=STRACE_WHY)
def test_trace_watch_flags_a_tracer_that_lets_go() -> None:
    """A traced child whose tracer dies while it runs is partial; a child never traced is not."""
    sleeper = subprocess.Popen(["sleep", "5"])
    tracer = subprocess.Popen(["strace", "-qq", "-o", os.devnull, "-p", str(sleeper.pid)])
    try:
        watch = TraceWatch(sleeper.pid)
        for _ in range(200):
            watch.poll()
            if watch.tracer:
                break
            subprocess.run(["sleep", "0.01"])
        assert watch.tracer == tracer.pid and not watch.partial
        tracer.kill()
        tracer.wait()
        for _ in range(200):
            watch.poll()
            if watch.partial:
                break
            subprocess.run(["sleep", "0.01"])
        assert watch.partial
    finally:
        for p in (tracer, sleeper):
            p.kill()
            p.wait()
    untraced = subprocess.Popen(["sleep", "0.2"])
    watch = TraceWatch(untraced.pid)
    watch.poll()
    untraced.wait()
    watch.poll()
    assert not watch.partial
