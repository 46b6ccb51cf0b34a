"""Several ``python -c`` completion signals (the real ones and their canaries) in one process.

    series = SignalSeries(jobs)                 the codes, in the order they are to run
    argv, env = series.argv(python), series.env()
    run_command(argv, env={..., **env}, pass_fds=series.pass_fds)   one sandboxed, traced command
    runs = series.collect()                     one record per job, in order

Each signal run used to be its own sandboxed, traced interpreter; a canary costs one more. Here
one interpreter (the *series runner*, ``_RUNNER``: harness code that imports nothing of the
graded code) forks one child per job; the child runs the job's code as ``python -c`` would
(``sys.argv`` ``['-c', ...]``, a fresh ``__main__`` namespace) under the end-record wrapper, and
the runner reports how it ended. What keeps the runs indistinguishable and their outcomes
unforgeable:

* **One job at a time.** The harness writes job k+1 to the runner's feed pipe only after the
  runner reported run k, and the runner reports it only once run k's child and everything it
  started are gone (the runner is a child subreaper: orphans come back to it and are killed).
  A child can see the jobs that already ran (as a counter file could), never the ones to come.
* **The child never holds the harness's channel.** The runner closes the channel and the feed in
  the child before any graded code runs; the child's end record goes to a pipe of its own, and
  its exit code is what the runner's ``waitpid`` saw. The runner is not dumpable, so a child
  cannot open its descriptors or memory through ``/proc``, and it is traced (no second tracer).
* **The same for every job.** The real signals and the canaries run the same way, in the
  commitment key's order (``ledger.run.attempt.canaries.signal_runs``); a child's output goes to
  a file with a random name in ``TMPDIR``; only its tail comes back (the failure detail).

A child that kills the runner ends the series: the runs not reported have no end record.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.sandbox.outcomes import ReportChannel

FEED_ENV = "LEDGER_FEED_FD"
TAIL_BYTES = 2000

_RUNNER = r"""
import os as _o, struct as _s, sys as _y, json as _j, time as _t, signal as _g
_R = int(_o.environ.pop("LEDGER_REPORT_FD")); _F = int(_o.environ.pop("LEDGER_FEED_FD"))
_o.set_inheritable(_R, False); _o.set_inheritable(_F, False)
try:  # without both, a child could reach the runner or outlive its run: run nothing (fail closed)
    import ctypes as _c
    _l = _c.CDLL(None, use_errno=True)
    if _l.prctl(4, 0, 0, 0, 0) != 0 or _l.prctl(36, 1, 0, 0, 0) != 0:
        raise OSError(_c.get_errno(), "prctl")  # PR_SET_DUMPABLE 0 (no /proc/<runner>/fd or mem
    del _c, _l                                   # for the children), PR_SET_CHILD_SUBREAPER
except Exception as _e:
    _y.stderr.write("series runner: cannot protect itself: %r\n" % (_e,))
    _y.exit(70)
def _send(o):
    b = _j.dumps(o).encode()
    _o.write(_R, _s.pack(">I", len(b)) + b)
def _exact(n):
    b = b""
    while len(b) < n:
        c = _o.read(_F, n - len(b))
        if not c:
            return None
        b += c
    return b
def _job():
    h = _exact(4)
    b = h and _exact(_s.unpack(">I", h)[0])
    return _j.loads(b) if b else None
def _kids():
    me, out = str(_o.getpid()), []
    for p in _o.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p, "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[1] == me.encode():
                        out.append(int(p))
            except (OSError, IndexError):
                pass
    return out
def _sweep(pid):
    for _ in range(50):
        try: _o.killpg(pid, 9)
        except OSError: pass
        left = _kids()
        for k in left:
            try: _o.kill(k, 9)
            except OSError: pass
        while True:
            try:
                if _o.waitpid(-1, _o.WNOHANG)[0] == 0: break
            except ChildProcessError: break
        if not left: return
        _t.sleep(0.001)
def _child(job, w, out):
    _o.dup2(out, 1); _o.dup2(out, 2); _o.close(out)
    _o.setpgid(0, 0)
    _y.argv = ["-c", *job["args"]]
    def _end(st):
        b = ('{"exitstatus":%d}' % st).encode()
        try: _o.write(w, b)
        except OSError: pass
    g = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
    st = 0
    try:
        exec(compile(job["code"], "<string>", "exec"), g)
        _end(0)
    except SystemExit as e:
        c = e.code
        st = 0 if c is None else c if isinstance(c, int) else 1
        if not isinstance(c, int) and c is not None:
            print(c, file=_y.stderr)
        _end(st)
    except BaseException:
        import traceback
        traceback.print_exc()
        st = 1
        _end(1)
    try:
        import atexit, threading
        threading._shutdown()
        atexit._run_exitfuncs()
        _y.stdout.flush(); _y.stderr.flush()
    except BaseException:
        pass
    _o._exit(st & 0xFF)
while True:
    job = _job()
    if job is None:
        break
    name = _o.path.join(_o.environ.get("TMPDIR") or "/tmp", "." + _o.urandom(8).hex())
    out = _o.open(name, _o.O_RDWR | _o.O_CREAT | _o.O_EXCL, 0o600)
    r, w = _o.pipe()
    _y.stdout.flush(); _y.stderr.flush()
    t0 = _t.monotonic()
    pid = _o.fork()
    if pid == 0:
        _o.close(_R); _o.close(_F); _o.close(r)
        _child(job, w, out)
    _o.close(w)
    end, code, late = _t.monotonic() + job["timeout"], None, False
    while code is None:
        p, st = _o.waitpid(pid, _o.WNOHANG)
        if p:
            code = _o.waitstatus_to_exitcode(st)
            code = 128 - code if code < 0 else code  # a signal death: 128 + its number
        elif _t.monotonic() > end:
            late = True
            try: _o.killpg(pid, 9)
            except OSError: pass
            _o.kill(pid, 9)
        else:
            _t.sleep(0.002)
    took = _t.monotonic() - t0
    _sweep(pid)
    _o.set_blocking(r, False)
    try: said = _o.read(r, 4096)
    except OSError: said = b""
    _o.close(r)
    size = _o.lseek(out, 0, 2)
    _o.lseek(out, max(0, size - %(tail)d), 0)
    tail = _o.read(out, %(tail)d).decode("utf-8", "replace")
    _o.close(out); _o.unlink(name)
    try: ended = _j.loads(said.decode()) if said else None
    except ValueError: ended = None
    _send({"k": "run", "turn": job["turn"], "exit": code, "timed_out": late, "said": ended,
           "s": round(took, 6), "tail": tail})
_send({"k": "end", "exitstatus": 0})
""".replace("%(tail)d", str(TAIL_BYTES))


@dataclass(frozen=True)
class Job:
    turn: int
    code: str
    args: tuple[str, ...]
    timeout: float


class SignalSeries:
    """The harness's side of one series: the report channel and the feed (module docstring)."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = list(jobs)
        self._next = 0
        self._lock = threading.Lock()  # the reader thread feeds, the caller closes
        self._feed_r, self._feed_w = os.pipe()
        self.channel = ReportChannel(on_record=self._on_record)
        self._send_next()

    def argv(self, python: str) -> list[str]:
        return [python, "-c", _RUNNER]

    def env(self) -> dict[str, str]:
        return {**self.channel.env(), FEED_ENV: str(self._feed_r), "PYTHONNOUSERSITE": "1"}

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (*self.channel.pass_fds, self._feed_r)

    def timeout(self) -> float:
        return sum(j.timeout for j in self.jobs) + 10.0

    def _on_record(self, rec: Any) -> None:
        if isinstance(rec, dict) and rec.get("k") == "run":
            self._send_next()

    def _send_next(self) -> None:
        """The next job, or the end of the feed; a runner that is gone gets nothing."""
        with self._lock:
            self._feed_locked()

    def _feed_locked(self) -> None:
        if self._feed_w < 0:
            return
        try:
            if self._next < len(self.jobs):
                j = self.jobs[self._next]
                self._next += 1
                body = json.dumps({"turn": j.turn, "code": j.code, "args": list(j.args),
                                   "timeout": j.timeout}).encode()
                os.write(self._feed_w, struct.pack(">I", len(body)) + body)
            else:
                os.close(self._feed_w)
                self._feed_w = -1
        except OSError:
            os.close(self._feed_w)
            self._feed_w = -1

    def collect(self) -> dict[int, dict[str, Any]]:
        """Per turn, the runner's record of that run (a turn it never reported is absent)."""
        os.close(self._feed_r)
        self._feed_r = -1
        report = self.channel.collect()
        with self._lock:
            if self._feed_w >= 0:
                os.close(self._feed_w)
                self._feed_w = -1
        turns = {j.turn for j in self.jobs}
        return {r["turn"]: r for r in report.runs if r.get("turn") in turns}

    def close(self) -> None:
        """Release everything without reading (an error path)."""
        self.channel.close()
        with self._lock:
            for fd in (self._feed_r, self._feed_w):
                if fd >= 0:
                    os.close(fd)
            self._feed_r = self._feed_w = -1
