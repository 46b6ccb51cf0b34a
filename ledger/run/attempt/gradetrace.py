"""The grading phase under the agent's capture: strace from outside, the same flags and parser.

    capture = GradingCapture(tree=grade.worktree, hidden_dir=task.hidden_tests_dir, ...)
    wrap = capture.wrap(inner)          every grading command runs as strace ... -- inner(argv)
    ... the attempt's grade step (``ledger.run.attempt.commands.Boxed``: ``capture``) ...
    out.entry("grading.trace", capture.record())

Each grading command (the hidden suite with its canaries, every completion signal and signal
canary, the regression suite) runs as ``strace <the agent's flags> -o LOG -E LEDGER_TRACE_MARK=..
-- bwrap ... -- COMMAND`` (``ledger.agents.strace.strace_command``, detached with ``-DD``: ``DETACH``):
the tracer is outside the grading sandbox, in the harness's PID namespace. Its log is read with the agent's parser
(``iter_syscalls``), bwrap's own set-up cut off (``ledger.sandbox.tracelog.agent_lines``), into
the facts of ``grading.trace`` (journaled once per attempt, judged by ``attest.grading_scan``):

    commands   [{label, status, runner, processes, execs, outside, network, hidden_reads,
                 marked}]
    status     "strace" (every command traced) | "failed" (a command whose trace is missing:
               no log, or the runner's exec is not in it) | "off" (tracing is off for the run)

* ``runner``: the first program the command ran (pytest's interpreter, the signal's program);
  ``execs``: every program started after it (the processes the graded code started; the first
  ``EXECS`` argv, bounded), ``processes`` their count.
* ``outside``: files opened (read or written) outside the grading tree, its home and scratch and
  the system and interpreter folders (``OUTSIDE`` paths), each with ``hidden: true`` when it
  lies under a path no sandbox may show (the task folder, the packaged tasks, the ledger home).
* ``network``: every ``connect`` (family, host, port), ``loopback`` marked.
* ``hidden_reads``: opens of files under the hidden tests folder that the runner's own
  collection does not explain (rule below), each ``{path, by, phase}``.

**The collection rule.** pytest reads each test file once while it collects (the assertion
rewriter opens the source). The harness's reporter, when collection has finished, reads every
collected file into ``linecache`` (so that pytest's own tracebacks and locations never open them
again) and then marks the end of collection in the trace: a failed ``openat`` of
``/proc/self/ledger-mark-<nonce>-collected``, the nonce passed by ``-E`` (the reporter removes it
from its environment when it is imported, before any graded code). Reported as hidden reads:
an open by any process other than the runner (``by: "child"``), a second open of the same file
before the mark (``phase: "collection"``: graded code imported during collection read it), and
any open after the first mark (``phase: "after-collection"``; the reporter's own warm-up reads
between the mark's two halves excepted, once per file). A pytest run whose log never shows the
mark (the reporter never finished collection: the session was cut short or the reporter was
subverted) has every open after the runner's first one reported. Opens with ``O_DIRECTORY``
(listing the folder) are not reads of a test, nor are opens of files other than Python source
and bytecode (``.py``, ``.pyc``: data files beside the tests are theirs to read at run time). A
command that is not pytest has no collection: every open of a hidden test file by it is
reported. Only the hidden tests folder is watched: hidden tests applied as a patch over the
repository's own test files (SWE-bench style) are not told apart from the repository's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.agents import strace as st
from ledger.agents import trace as tr
from ledger.run.background import Background
from ledger.sandbox.tracelog import agent_lines

MARK_ENV = "LEDGER_TRACE_MARK"
MARK_PREFIX = "/proc/self/ledger-mark-"
EXECS = 32  # argv of started processes kept per command
OUTSIDE = 32  # outside paths kept per command
NETWORK = 32  # endpoints kept per command
HIDDEN_READS = 32  # hidden reads kept per command
TRACER_WAIT_S = 5.0  # how long a tracer may take to finish its log once the command ended
ARGV_ITEMS = 16  # items of one argv kept
ARGV_CHARS = 200  # characters of one argv item kept
STATUSES = ("strace", "failed", "off")
# The tracer detached into a process group of its own (the agent's capture uses -DDD, a session
# of its own): the command's group, killed when the command ends or times out, never holds the
# tracer, and the tracee stays the harness's child. Measured (benchmarks/README.md): -DDD costs
# ~60-90 ms more per command than -DD here, on every grading command.
DETACH = "-DD"
# Only what the grading facts use (opens, execs, connects; not the agent capture's renames,
# unlinks, links and mkdirs): each traced call stops the tracee twice.
TRACED = "trace=openat,execve,execveat,connect,?open,?openat2,?creat"
_SKIP_FAILED = frozenset({"open", "openat", "openat2", "creat", "execve", "execveat"})
_OPENS = frozenset({"open", "openat", "openat2", "creat"})
_TEST_SOURCES = (".py", ".pyc")  # a hidden test file; data files beside them are the tests' own


def _hex(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in text.encode())


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


@dataclass
class Scope:
    """What the facts of one log are judged against (absolute, resolved paths)."""

    tree: str  # the grading worktree
    hidden_dir: str  # the hidden tests folder inside it
    private: tuple[str, ...] = ()  # the grading home and scratch, the reporter's folder
    system: tuple[str, ...] = ()  # system and interpreter folders (reads there are not listed)
    secret: tuple[str, ...] = ()  # folders no sandbox may show (task folder, ledger home)


@dataclass
class _Facts:
    scope: Scope
    pytest: bool
    runner: list[str] | None = None
    runner_pid: int | None = None
    processes: int = 0
    execs: list[list[str]] = field(default_factory=list)
    outside: dict[str, bool] = field(default_factory=dict)
    outside_count: int = 0
    network: list[dict[str, Any]] = field(default_factory=list)
    endpoints: set[tuple[str, str, int]] = field(default_factory=set)
    hidden_reads: list[dict[str, str]] = field(default_factory=list)
    hidden_count: int = 0
    opened: set[str] = field(default_factory=set)  # hidden files the runner opened (collection)
    warmed: set[str] = field(default_factory=set)  # ... and in the reporter's warm-up
    phase: str = "collection"  # "warm-up" after the first mark's start, "after-collection" next

    def as_data(self) -> dict[str, Any]:
        return {"runner": self.runner, "processes": self.processes, "execs": self.execs,
                "outside": [{"path": p, "hidden": h} for p, h in self.outside.items()],
                "outside_count": self.outside_count, "network": self.network,
                "hidden_reads": self.hidden_reads, "hidden_count": self.hidden_count,
                "marked": self.phase == "after-collection"}


def _argv(sc: st.Syscall) -> list[str]:
    a_idx = 1 if sc.name == "execve" else 2
    argv = st.decode_array(sc.args[a_idx]) if a_idx < len(sc.args) else []
    return [a[:ARGV_CHARS] for a in argv[:ARGV_ITEMS]]


def _exec(f: _Facts, sc: st.Syscall) -> None:
    if f.runner is None:
        f.runner, f.runner_pid = _argv(sc), sc.pid
        return
    f.processes += 1
    if len(f.execs) < EXECS:
        f.execs.append(_argv(sc))


def _open_path(sc: st.Syscall) -> tuple[str, bool] | None:
    """(the resolved path an open returned, whether it was a directory open)."""
    if sc.ret_path is None or not sc.ret_path.startswith(b"/"):
        return None
    p_idx = 0 if sc.name in ("open", "creat") else 1
    flags = sc.args[p_idx + 1] if len(sc.args) > p_idx + 1 else ""
    if "O_PATH" in flags:
        return None
    return _text(sc.ret_path), "O_DIRECTORY" in flags


def _hidden_read(f: _Facts, sc: st.Syscall, path: str) -> None:
    rel = os.path.relpath(path, f.scope.tree)
    if sc.pid != f.runner_pid:
        by, phase = "child", f.phase
    elif not f.pytest:  # the task's own runner (a check script): it reads its own scripts;
        return  # only its children's reads count (exit-code outcomes are weaker evidence)
    elif f.phase == "collection":
        if path not in f.opened:
            f.opened.add(path)
            return
        by, phase = "runner", "collection"
    elif f.phase == "warm-up" and path not in f.warmed:
        f.warmed.add(path)  # the reporter's own linecache warm-up, once per file
        return
    else:
        by, phase = "runner", "after-collection"
    f.hidden_count += 1
    read = {"path": rel, "by": by, "phase": phase}
    if len(f.hidden_reads) < HIDDEN_READS and read not in f.hidden_reads:
        f.hidden_reads.append(read)


def _open(f: _Facts, sc: st.Syscall) -> None:
    opened = _open_path(sc)
    if opened is None:
        return
    path, is_dir = opened
    s = f.scope
    if _under(path, s.hidden_dir):
        if not is_dir and path.endswith(_TEST_SOURCES):
            _hidden_read(f, sc, path)
        return
    if _under(path, s.tree) or any(_under(path, p) for p in s.private) or tr._is_pseudo(path):
        return
    if any(_under(path, p) for p in s.system) or "/site-packages/" in path \
            or "/dist-packages/" in path:
        return
    f.outside_count += 1
    if len(f.outside) < OUTSIDE and path not in f.outside:
        f.outside[path] = any(_under(path, p) for p in s.secret)


def _connect(f: _Facts, sc: st.Syscall) -> None:
    builder = tr._Builder(tr.TraceOptions(worktree=Path(f.scope.tree)))
    ev = builder.connect(sc)
    if ev is None:
        return
    data = ev[1]
    key = (str(data["family"]), str(data["host"]), int(data["port"]))
    if key in f.endpoints:
        return
    f.endpoints.add(key)
    if len(f.network) < NETWORK:
        f.network.append({"family": key[0], "host": key[1], "port": key[2],
                          "loopback": _loopback(key[0], key[1])})


def _loopback(family: str, host: str) -> bool:
    import ipaddress

    if family == "unix":
        return True  # a socket inside the sandbox's own filesystem view
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def log_facts(lines: Iterable[str], scope: Scope, *, nonce: str | None, pytest: bool,
              sandboxed: bool) -> dict[str, Any]:
    """The facts of one grading command's strace log (module docstring), in one pass."""
    f = _Facts(scope, pytest=pytest and nonce is not None)
    start = _hex(MARK_PREFIX + nonce + "-collected") if nonce else None
    done = _hex(MARK_PREFIX + nonce + "-warmed") if nonce else None
    seq = agent_lines(lines) if sandboxed else lines

    def marked(src: Iterable[str]) -> Iterator[str]:
        for line in src:
            if start is not None and start in line:
                if f.phase == "collection" and f.runner_pid is not None and \
                        line.startswith(f"{f.runner_pid} "):
                    f.phase = "warm-up"
                continue
            if done is not None and done in line:
                if f.phase == "warm-up" and line.startswith(f"{f.runner_pid} "):
                    f.phase = "after-collection"
                continue
            yield line

    for sc in st.iter_syscalls(marked(seq), skip_failed=_SKIP_FAILED):
        if sc.name in ("execve", "execveat"):
            if sc.ok:
                _exec(f, sc)
        elif f.runner is None:
            continue
        elif sc.name in _OPENS:
            if sc.ok:
                _open(f, sc)
        elif sc.name == "connect":
            _connect(f, sc)
    return f.as_data()


class GradingCapture:
    """The grading commands of one attempt under strace; ``record()`` is ``grading.trace``.

    ``enabled`` False (the run's trace mode is not strace): commands run as they are, and the
    record says ``status: "off"``. ``traceable`` False (a box whose commands a tracer outside
    cannot follow: a container's, ``Box.captures_trace``): they run untraced and the record says
    ``status: "not-captured"`` (the attestation's grading is then not observed)."""

    def __init__(self, *, scratch: Path, scope: Scope, enabled: bool,
                 sandboxed: bool, traceable: bool = True) -> None:
        self.scratch, self.scope = scratch, scope
        self.requested = enabled
        self.enabled, self.sandboxed = enabled and traceable, sandboxed
        self._runs: list[tuple[str, Path, str, bool]] = []
        self._facts: list[dict[str, Any]] = []
        self._handed = 0  # runs handed to a parse (the commands run one after the other)
        self._parsing: Background | None = None  # the last parse, beside the next command

    def wrap(self, inner: Callable[[list[str]], list[str]]) -> TracedWrap:
        return TracedWrap(self, inner)

    def _start(self, argv: Sequence[str]) -> list[str]:
        self._settle()  # the commands so far have ended: their logs are read beside this one
        n = len(self._runs)
        log = self.scratch / f"grading-trace-{n}.log"
        nonce = secrets.token_hex(16)
        label = os.path.basename(argv[0]) if argv else "?"
        pytest = "pytest" in argv[:4] or any(a.endswith("/pytest") for a in argv[:2])
        self._runs.append((label, log, nonce, pytest))
        return [DETACH if a == "-DDD" else TRACED if a.startswith("trace=") else a
                for a in st.strace_command(log, {MARK_ENV: nonce})]

    def _settle(self) -> None:
        """Hand the runs not yet parsed to a parse in a thread (after the previous parse, so
        the facts keep the commands' order)."""
        todo = self._runs[self._handed:]
        if todo:
            self._handed = len(self._runs)
            self._parsing = Background(self._parse, todo, self._parsing)

    def _finish_all(self) -> None:
        self._settle()
        parsing, self._parsing = self._parsing, None
        if parsing is not None:
            parsing.result()

    def _parse(self, todo: list[tuple[str, Path, str, bool]], after: Background | None) -> None:
        if after is not None:
            after.result()
        killed = wait_tracers([log for _l, log, _n, _p in todo])
        for label, log, nonce, pytest in todo:
            one = self._one(label, log, nonce, pytest)
            if log in killed:
                one = {**one, "status": "failed", "detail": "the tracer did not finish its log"}
            self._facts.append(one)

    def _one(self, label: str, log: Path, nonce: str, pytest: bool) -> dict[str, Any]:
        try:
            with open(log, encoding="utf-8", errors="replace") as fh:
                facts = log_facts(fh, self.scope, nonce=nonce, pytest=pytest,
                                  sandboxed=self.sandboxed)
        except OSError as exc:
            return {"label": label, "status": "failed",
                    "detail": f"no trace log: {exc.strerror or exc}"}
        if facts["runner"] is None:
            return {"label": label, "status": "failed",
                    "detail": "the trace never shows the command start", **facts}
        return {"label": label, "status": "strace", **facts}

    def record(self) -> dict[str, Any]:
        """The data of the ``grading.trace`` entry."""
        if not self.enabled:
            return {"status": "not-captured" if self.requested else "off", "commands": []}
        self._finish_all()
        status = "failed" if any(c["status"] != "strace" for c in self._facts) else "strace"
        if not self._facts:
            status = "failed"  # traced grading that ran nothing is not an observation
        return {"status": status, "filter": st.strace_filter(), "commands": self._facts}


class TracedWrap:
    """A grading ``Wrap`` under the capture: ``strace ... -- inner(argv)``; the inner wrap's
    descriptors, preexec and start check pass through."""

    def __init__(self, capture: GradingCapture, inner: Callable[[list[str]], list[str]]) -> None:
        self.capture, self.inner = capture, inner
        self.preexec = getattr(inner, "preexec", None)

    def __call__(self, argv: list[str]) -> list[str]:
        wrapped = self.inner(argv)
        if not self.capture.enabled:
            return wrapped
        return self.capture._start(argv) + wrapped

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(getattr(self.inner, "pass_fds", ()))

    def check(self, code: int, timed_out: bool, log: Path) -> None:
        check = getattr(self.inner, "check", None)
        if check is not None:
            check(code, timed_out, log)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _live(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X", b"x")
    except (OSError, IndexError):
        return False


def wait_tracers(logs: Sequence[Path], timeout: float = TRACER_WAIT_S) -> set[Path]:
    """Wait until the tracers writing ``logs`` have exited (strace runs detached, ``-DD``: the
    command's end does not wait for it); the logs whose tracer had to be killed after
    ``timeout`` (their log may be cut short)."""
    import signal
    import time

    needles = {str(log).encode() + b"\0": log for log in logs}
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and p != me]
    except OSError:
        return set()
    left: dict[str, Path] = {}
    for pid in pids:
        line = _cmdline(pid)
        for needle, log in needles.items():
            if needle in line and line.startswith(b"/") and b"strace" in line.split(b"\0")[0]:
                left[pid] = log
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        left = {p: log for p, log in left.items() if _live(p)}
        if left:
            time.sleep(0.002)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGKILL)
    return set(left.values())


def grading_scope(*, tree: Path, hidden_dir: str, private: Sequence[Path],
                  secret: Sequence[str]) -> Scope:
    """The ``Scope`` of a grading tree: the system and interpreter folders from the agent's
    capture (``ledger.agents.trace``), the reporter's folder among the private ones."""
    from ledger.sandbox.outcomes import PLUGIN_DIR

    real = os.path.realpath(tree)
    return Scope(tree=real, hidden_dir=os.path.join(real, hidden_dir.strip("/")),
                 private=tuple(os.path.realpath(p) for p in (*private, PLUGIN_DIR)),
                 system=tuple(p.rstrip("/") for p in tr._default_system_prefixes()),
                 secret=tuple(os.path.realpath(s) for s in secret))


def summary(record: Mapping[str, Any]) -> dict[str, int]:
    """Counts over a ``grading.trace`` record's commands (for the report and the benchmark)."""
    cmds = [c for c in record.get("commands", ()) if isinstance(c, Mapping)]
    return {"commands": len(cmds),
            "processes": sum(int(c.get("processes", 0)) for c in cmds),
            "outside": sum(int(c.get("outside_count", 0)) for c in cmds),
            "network": sum(len(c.get("network", ())) for c in cmds),
            "hidden_reads": sum(int(c.get("hidden_count", 0)) for c in cmds)}
