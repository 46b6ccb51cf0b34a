"""Run one agent as a bounded, observed child process.

``run_agent_process`` starts the agent in a session of its own (``start_new_session=True``, so its
process group id is its pid) with stdin on ``/dev/null``, and then, in the calling thread:

* reads stdout and stderr together (one ``select`` loop, no threads), keeping the first
  ``output_limit`` bytes of each and counting the rest, so any amount of output keeps memory flat;
  stdout lines (each bounded by ``MAX_LINE``) go to the agent's transcript parser as they arrive;
* enforces the budget ``ctx.timeout_s``: SIGTERM to the whole group, ``grace_s`` later SIGKILL;
* once the agent has exited, sweeps for **orphans**: every live process that carries this
  attempt's marker in its environment (``LEDGER_ATTEMPT=<attempt id>#<nonce>``, inherited by
  every descendant, including ones that called ``setsid`` or double-forked), that is still in
  the agent's process group or session, or that the attempt's strace is tracing (strace follows
  every descendant). Each is SIGKILLed and counted. Without strace, a process that scrubbed its
  environment *and* left the session escapes the sweep;
* with tracing on, parses the strace log into activity events (``ledger.agents.trace``); files
  read outside the worktree are matched against the commitment with ``evidence`` (the
  redactor's), and only the markers found are kept.

Every captured text (output, transcript, file contents, argv) has the invocation's secrets replaced
by ``[REDACTED]`` and then passes through the capture filter before it enters an event or the
outcome. Texts in events are bounded to ``EVENT_TEXT_LIMIT`` bytes with ``truncated`` and
``total_bytes`` saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ledger.agents.contracts import (
    AttemptContext,
    CaptureFilter,
    Event,
    Invocation,
    OutputParser,
    ProcessOutcome,
    Usage,
    no_filter,
)
from ledger.agents.trace import (
    Evidence,
    TraceFollower,
    TraceOptions,
    strace_command,
    strace_status,
)
from ledger.errors import UsageError

MARKER_ENV = "LEDGER_ATTEMPT"
MAX_LINE = 4 * 1024 * 1024  # longest stdout line handed to a transcript parser
EVENT_TEXT_LIMIT = 64 * 1024
GRACE_S = 2.0
_READ_CHUNK = 64 * 1024
_TRACE_MODES = ("auto", "strace", "none")
REDACTED = "[REDACTED]"
# Shapes of well-known credentials, redacted even when they were not in the environment.
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|xox[abpr]-[A-Za-z0-9\-]{20,})"
)


# --- redaction and bounds ---------------------------------------------------------------------

def secret_redactor(secret_values: Iterable[str]) -> Callable[[str], str]:
    """``redact_secrets`` for one set of secret values, prepared once (a trace redacts thousands
    of paths with the same values)."""
    values = sorted({s for s in secret_values if s and len(s) >= 6}, key=len, reverse=True)
    sub = _KEY_SHAPES.sub

    def redact(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, REDACTED)
        # every key shape starts with one of these: most texts skip the expression
        if "sk-" in text or "AIza" in text or "gh" in text or "xox" in text:
            return sub(REDACTED, text)
        return text

    return redact


def redact_secrets(text: str, secret_values: Iterable[str]) -> str:
    """Replace each secret value (and anything shaped like a known API key) by ``[REDACTED]``."""
    return secret_redactor(secret_values)(text)


def bound_text(text: str, limit: int) -> tuple[str, bool, int]:
    """``(head, truncated, total_bytes)``: the first ``limit`` UTF-8 bytes, cut on a character."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text, False, len(raw)
    return raw[:limit].decode("utf-8", "ignore"), True, len(raw)


def _clean_value(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {str(k): _clean_value(v, clean) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_value(v, clean) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    return clean(str(value))


EVENT_DEPTH = 32  # a value nested deeper (a model's tool input) is kept as its JSON text


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests maps or lists more than ``limit`` levels (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _flat(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (RecursionError, ValueError, TypeError):
        return "<nested too deeply to record>"


def sanitize_event(event: Event, clean: Callable[[str], str], limit: int = EVENT_TEXT_LIMIT) -> Event:
    """Redact and filter every text of an event, and bound its long texts. A value nested more
    than ``EVENT_DEPTH`` levels (the journal's codec refuses 64) becomes its JSON text."""
    kind, data = event
    out: dict[str, Any] = {}
    total = 0
    truncated = False
    for key, value in data.items():
        if _deeper_than(value, EVENT_DEPTH):
            value = _flat(value)
        value = _clean_value(value, clean)
        if key in ("text", "output", "content") and isinstance(value, str):
            value, cut, n = bound_text(value, limit)
            if cut:
                truncated, total = True, n
        elif key == "input" and not isinstance(value, str):
            encoded = json.dumps(value, ensure_ascii=False, sort_keys=True)
            if len(encoded.encode("utf-8")) > limit:
                value, _cut, n = bound_text(encoded, limit)
                truncated, total = True, n
        elif key == "input" and isinstance(value, str):
            value, cut, n = bound_text(value, limit)
            if cut:
                truncated, total = True, n
        out[key] = value
    if kind == "agent.output":
        out.setdefault("total_bytes", len(str(out.get("text", "")).encode("utf-8")))
        out.setdefault("truncated", False)
        out.setdefault("stream", "stdout")
    if truncated:
        out["truncated"] = True
        out["total_bytes"] = max(total, int(out.get("total_bytes") or 0))
    return kind, out


def make_cleaner(secret_values: Iterable[str], capture_filter: CaptureFilter) -> Callable[[str], str]:
    redact = secret_redactor(secret_values)

    def clean(text: str) -> str:
        return capture_filter(redact(text))

    return clean


# --- trace mode -------------------------------------------------------------------------------

def resolve_trace(mode: str) -> tuple[str, str]:
    """``(effective mode, reason)`` for a requested ``auto|strace|none``.

    ``strace`` requested but not working here is a ``UsageError`` (check it before a run starts);
    ``auto`` falls back to ``none`` with the reason.
    """
    if mode not in _TRACE_MODES:
        raise UsageError(f"unknown trace mode {mode!r}; use one of {', '.join(_TRACE_MODES)}")
    if mode == "none":
        return "none", "tracing disabled (--trace none)"
    ok, reason = strace_status()
    if ok:
        return "strace", reason
    if mode == "strace":
        raise UsageError(f"--trace strace was requested but {reason}")
    return "none", reason


# --- processes --------------------------------------------------------------------------------

_PF_EXITING = 0x4  # the kernel's per-task flag (include/linux/sched.h): the task is exiting


class ProcStat(NamedTuple):
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # when the process started, in clock ticks since boot


def parse_proc_stat(raw: bytes) -> ProcStat | None:
    """The fields of ``/proc/PID/stat`` the harness uses, or None.

    A process that has already begun to exit (``PF_EXITING`` in the flags field: it runs no more
    code of its own and is about to become a zombie) has state ``"X"``, like one that is gone:
    it is neither killed nor counted as an orphan.
    """
    tail = raw[raw.rfind(b")") + 2:].split()
    if len(tail) < 20:
        return None
    try:
        st = ProcStat(tail[0].decode(), int(tail[1]), int(tail[2]), int(tail[3]), int(tail[19]))
        flags = int(tail[6])
    except (UnicodeDecodeError, ValueError):
        return None
    return st._replace(state="X") if flags & _PF_EXITING else st


def _proc_stat(pid: int) -> ProcStat | None:
    """``parse_proc_stat`` of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return parse_proc_stat(raw)


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return False
    return marker in env.split(b"\0")


def _cmdline_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


def _tracer_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def attempt_processes(marker: str, group: int, exclude: Iterable[int] = (),
                      tracers: Iterable[int] = (), born: int = 0) -> list[int]:
    """Live (non-zombie) processes of an attempt.

    A process belongs to the attempt if it carries the marker in its environment, is in the
    agent's process group or session, or is traced by one of ``tracers`` (the attempt's strace,
    which follows every descendant, even one that scrubbed its environment and called setsid).
    ``born``: the agent's start time (``ProcStat.start``); a process that started before it
    cannot descend from it and is passed over without reading its environment.
    """
    needle = f"{MARKER_ENV}={marker}".encode()
    tracer_set = set(tracers)
    skip = set(exclude) | tracer_set | {os.getpid()}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in skip:
            continue
        st = _proc_stat(pid)
        if st is None or st.state in ("Z", "X", "x") or st.start < born:
            continue
        if st.pgrp == group or st.session == group or _has_marker(pid, needle) or (
                tracer_set and _tracer_of(pid) in tracer_set):
            found.append(pid)
    return found


def started_at(pid: int) -> int:
    """``ProcStat.start`` of a process (0 when it is gone: then nothing is passed over)."""
    st = _proc_stat(pid)
    return st.start if st is not None else 0


def kill_attempt_processes(marker: str, group: int, exclude: Iterable[int] = (),
                           rounds: int = 50, tracers: Iterable[int] = (), born: int = 0) -> int:
    """SIGKILL every process of the attempt until none is left; return how many were killed.
    ``born``: see ``attempt_processes``."""
    killed: set[int] = set()
    tracers = tuple(tracers)
    for _ in range(rounds):
        alive = attempt_processes(marker, group, exclude, tracers, born)
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.01)
    return len(killed)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


def _is_tracer(pid: int, needle: bytes) -> bool:
    """A live (not zombie) process whose command line names the log ``needle``."""
    if not _cmdline_has(pid, needle):
        return False
    st = _proc_stat(pid)
    return st is not None and st.state not in ("Z", "X", "x")


def _tracers(log_path: Path) -> list[int]:
    needle = str(log_path).encode()
    me = os.getpid()
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and int(name) != me and _is_tracer(int(name), needle)]


def _wait_tracer(log_path: Path, pids: Iterable[int] | None = None, timeout: float = 5.0) -> None:
    """Wait until the tracer has written its log and exited (SIGKILL after ``timeout``).

    ``pids``: the tracers found after the agent ended (they exist from before the agent started);
    only those are watched, instead of reading every process's command line each round.
    """
    needle = str(log_path).encode()
    left = list(pids) if pids is not None else _tracers(log_path)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if _is_tracer(pid, needle)]
        if left:
            time.sleep(0.002)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _close_fds(fds: dict[str, int]) -> None:
    for key in list(fds):
        with contextlib.suppress(OSError):
            os.close(fds.pop(key))


def _ns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _inner_pid(pid: int) -> int | None:
    """A process's pid in its innermost PID namespace (``NSpid``), or None when gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
    except (OSError, ValueError, IndexError):
        return None
    return None


class _Waiter:
    """The harness side of the in-sandbox waiter (``Enforcement.init_script``): reads its
    ``ledger-init exit PID RC`` line, and bwrap's ``--info-fd`` JSON for the namespace."""

    def __init__(self, status_fd: int | None, info_fd: int | None) -> None:
        self.fd = status_fd
        self.info_fd = info_fd
        self.buf = bytearray()
        self.exited = False
        self.released = False
        self.inner: int | None = None

    def feed(self, chunk: bytes) -> None:
        if self.exited or len(self.buf) > 4096:
            return
        self.buf += chunk
        m = re.search(rb"ledger-init exit (\d+) (\d+)\n", self.buf)
        if m is not None:
            self.exited = True
            self.inner = int(m.group(1))

    def _namespace(self) -> tuple[int, str] | None:
        """(host pid of the namespace's init, its ``pid:[inode]``) from bwrap's info."""
        if self.info_fd is None:
            return None
        data = b""
        with contextlib.suppress(OSError):
            os.set_blocking(self.info_fd, False)
            while len(data) < 65536:
                chunk = os.read(self.info_fd, 4096)
                if not chunk:
                    break
                data += chunk
        try:
            info = json.loads(data.decode("utf-8", "replace").split("}", 1)[0] + "}")
            return int(info["child-pid"]), f"pid:[{int(info['pid-namespace'])}]"
        except (ValueError, KeyError, TypeError):
            return None

    def count_and_kill(self, rounds: int = 50) -> int:
        """Processes alive in the namespace besides its init and the waiter: counted, killed."""
        ns = self._namespace()
        if ns is None:
            return 0
        init, name = ns
        found: set[int] = set()
        for _ in range(rounds):
            alive = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == init or _ns_of(int(entry)) != name:
                    continue
                inner = _inner_pid(int(entry))
                if inner is not None and inner not in (1, self.inner):
                    alive.append(int(entry))
            if not alive:
                break
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            found.update(alive)
            time.sleep(0.005)
        return len(found)


def _find_program(argv0: str, env: Mapping[str, str], cwd: Path) -> str | None:
    if "/" in argv0:
        path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(argv0, path=env.get("PATH", os.defpath))


class _Stream:
    """Bounded head + byte count of one pipe; optional line splitting for a parser."""

    def __init__(self, limit: int, on_line: Callable[[str], None] | None) -> None:
        self.limit = limit
        self.head = bytearray()
        self.total = 0
        self.on_line = on_line
        self.buf = bytearray()
        self.skipping = False

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        if self.on_line is None:
            return
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            if not self.skipping:
                self.buf += chunk[start:nl]
                self._emit()
            self.buf.clear()
            self.skipping = False
            start = nl + 1
        if not self.skipping:
            self.buf += chunk[start:]
            if len(self.buf) > MAX_LINE:
                self.buf.clear()
                self.skipping = True

    def _emit(self) -> None:
        if self.on_line is not None and self.buf:
            self.on_line(bytes(self.buf).decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        if not self.skipping:
            self._emit()
        self.buf.clear()

    def text(self) -> str:
        return bytes(self.head).decode("utf-8", "replace")


# --- the runner -------------------------------------------------------------------------------

def run_agent_process(
    inv: Invocation,
    ctx: AttemptContext,
    *,
    trace: str = "auto",
    capture_filter: CaptureFilter = no_filter,
    evidence: Evidence | None = None,
    path_hit: Callable[[str], bool] | None = None,
    output_limit: int = 64 * 1024,
    on_event: Callable[[Event], None] | None = None,
    grace_s: float = GRACE_S,
    watch: Any = None,
    sandbox: Any = None,
    limits: Any = None,
) -> ProcessOutcome:
    """Run the agent once; see the module docstring. Raises UsageError if it cannot start at all.

    ``watch`` (a ``ledger.agents.errors.ReachWatch``) sees every output line and transcript
    event; once it has a ``verdict`` the agent is stopped like at its time limit (but not
    ``timed_out``) and the outcome's ``agent_error`` is the verdict, redacted.

    ``sandbox`` (a ``ledger.sandbox.SandboxPolicy``) runs the agent inside bubblewrap; strace
    then wraps bwrap from outside, so the tracer lives outside the sandbox's PID namespace.
    In the sandbox the agent runs under the in-namespace waiter (``Enforcement.init_script``):
    when the agent's main process exits, the processes it left in the namespace are counted
    (``orphans``) and killed before the namespace ends.

    ``limits`` (a ``ledger.sandbox.limits.Limits``, ``DEFAULTS`` when None, or an
    ``Enforcement`` made for this run, closed here) bound the run
    (``ledger.sandbox.limits``); the outcome's ``limits`` says how, ``limit_hits`` what was hit.
    A disk limit hit stops the agent like its time limit (but not ``timed_out``).
    """
    if not inv.argv:
        raise UsageError("agent invocation has an empty command line")
    mode, trace_reason = resolve_trace(trace)
    env = {k: v for k, v in inv.env.items() if k != MARKER_ENV}
    if _find_program(inv.argv[0], env, ctx.worktree) is None:
        raise UsageError(f"agent program {inv.argv[0]!r} not found (PATH or path); nothing was run")
    marker = f"{ctx.attempt_id}#{secrets.token_hex(6)}"
    clean = make_cleaner(inv.secrets, capture_filter)

    from ledger.sandbox.limits import DEFAULTS, DiskWatch, Enforcement, spawning

    trace_dir: Path | None = None
    log_path: Path | None = None
    argv = list(inv.argv)
    start_status: Any = None  # bwrap's status pipe: tells a sandbox that never started
    enforcement = limits if isinstance(limits, Enforcement) else Enforcement(
        limits or DEFAULTS, sandboxed=sandbox is not None, label="agent")
    pipes: dict[str, int] = {}
    if sandbox is not None:
        from ledger.sandbox.bwrap import StartStatus, bwrap_command

        start_status = StartStatus()
        try:
            for name in ("status", "release", "info"):
                pipes[name + "_r"], pipes[name + "_w"] = os.pipe()
        except OSError:
            _close_fds(pipes)
            start_status.close()
            enforcement.close()
            raise
        argv = bwrap_command(sandbox, argv,
                             extra=[*start_status.args(), "--info-fd", str(pipes["info_w"])],
                             init=enforcement.init_script(pipes["status_w"], pipes["release_r"]))
    child_fds = tuple(pipes[k] for k in ("status_w", "release_r", "info_w") if k in pipes)
    if mode == "strace":
        trace_dir = Path(tempfile.mkdtemp(prefix="ledger-trace-"))
        log_path = trace_dir / "strace.log"
        argv = strace_command(log_path, {MARKER_ENV: marker}) + argv
    else:
        env[MARKER_ENV] = marker

    timed: list[tuple[float, Event]] = []
    parser: OutputParser | None = inv.parser_factory() if inv.parser_factory else None

    def emit(events: Iterable[Event], ts: float) -> None:
        for ev in events:
            ev = sanitize_event(ev, clean)
            timed.append((ts, ev))
            if watch is not None:
                watch.event(ev)
            if on_event is not None:
                on_event(ev)

    def on_line(line: str) -> None:
        if watch is not None:
            watch.line(line)
        if parser is None:
            return
        try:
            events = parser.feed_line(line)
        except Exception:  # a parser bug must not lose the run; the raw output is kept anyway
            return
        emit(events, time.time())

    out = _Stream(output_limit, on_line if parser is not None or watch is not None else None)
    err = _Stream(output_limit, watch.line if watch is not None else None)
    proc: subprocess.Popen[bytes] | None = None
    try:
        with spawning():  # a stop arriving during the fork is raised after it, not lost
            proc = subprocess.Popen(
                argv, cwd=ctx.worktree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                pass_fds=(*(start_status.pass_fds if start_status is not None else ()), *child_fds),
                preexec_fn=enforcement.preexec,
            )
    except BaseException as exc:
        if proc is not None:  # started, then stopped before the run's own clean-up took over
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if trace_dir is not None:
            shutil.rmtree(trace_dir, ignore_errors=True)
        if start_status is not None:
            start_status.close()
        _close_fds(pipes)
        enforcement.close()
        if proc is not None or not isinstance(exc, OSError | subprocess.SubprocessError):
            raise
        why = getattr(exc, "strerror", None) or exc
        raise UsageError(f"cannot start agent {inv.argv[0]!r}: {why}") from None
    if start_status is not None:
        start_status.started()
    for key in ("status_w", "release_r", "info_w"):
        if key in pipes:
            os.close(pipes.pop(key))
    disk_roots = list(sandbox.writable) if sandbox is not None else [
        str(p) for p in dict.fromkeys((ctx.worktree, ctx.home))]
    disk = DiskWatch(disk_roots, enforcement.limits).start()
    waiter = _Waiter(pipes.get("status_r"), pipes.get("info_r"))

    start = time.monotonic()
    born = started_at(proc.pid)  # every process of the attempt starts after this one
    from ledger.sandbox.tracelog import TraceWatch, agent_lines

    tracewatch = TraceWatch(proc.pid) if mode == "strace" else None
    follower: TraceFollower | None = None
    if log_path is not None:  # parse the log while the agent runs, not after it
        redact_paths = secret_redactor(inv.secrets)
        follower = TraceFollower(
            log_path, TraceOptions(worktree=ctx.worktree, home=ctx.home, capture_filter=clean,
                                   evidence=evidence, path_hit=path_hit),
            keep=agent_lines if sandbox is not None else None,
            # content and argv are filtered while parsing; redact secrets (paths too) and bound
            post=lambda ev: sanitize_event(ev, redact_paths))
    assert proc.stdout is not None and proc.stderr is not None
    streams: dict[int, Any] = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    if waiter.fd is not None:
        streams[waiter.fd] = waiter
    sel = selectors.DefaultSelector()
    for fd in streams:
        sel.register(fd, selectors.EVENT_READ)

    def pump(timeout: float) -> None:
        if not sel.get_map():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
            return
        for key, _ in sel.select(timeout=timeout):
            fd = key.fd
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:
                chunk = b""
            if chunk:
                streams[fd].feed(chunk)
            else:
                sel.unregister(fd)

    timed_out = False
    orphans = 0
    inside_orphans = 0
    agent_end: float | None = None
    term_at: float | None = None
    hard_killed = False
    tracer_exclude: list[int] = []
    try:
        deadline = start + max(0.0, ctx.timeout_s)
        while True:
            pump(0.02)
            if tracewatch is not None:
                tracewatch.poll()
            if waiter.exited and not waiter.released:
                # the agent's main process has ended; the namespace lives until released
                agent_end = time.monotonic()
                inside_orphans = waiter.count_and_kill()
                os.close(pipes.pop("release_w"))
                waiter.released = True
            if proc.poll() is not None:
                break
            now = time.monotonic()
            if term_at is None and watch is not None and watch.verdict is not None:
                term_at = now  # the agent cannot reach its model: stop it now
                _signal_group(proc.pid, signal.SIGTERM)
            elif term_at is None and disk.hit is not None:
                term_at = now  # over its disk limit: stop it now
                _signal_group(proc.pid, signal.SIGTERM)
            elif term_at is None and now >= deadline:
                timed_out = True
                term_at = now
                _signal_group(proc.pid, signal.SIGTERM)
            elif term_at is not None and not hard_killed and now >= term_at + grace_s:
                hard_killed = True
                _signal_group(proc.pid, signal.SIGKILL)
        wall_s = (agent_end or time.monotonic()) - start
        disk.stop()
        if log_path is not None:
            # the tracer the watch saw tracing the agent (a /proc scan when it never looked)
            seen = tracewatch.tracer if tracewatch is not None else 0
            tracer_exclude = [seen] if seen else _tracers(log_path)
        orphans = inside_orphans + kill_attempt_processes(
            marker, proc.pid, tracers=tracer_exclude, born=born)
        drain_until = time.monotonic() + 2.0
        while sel.get_map() and time.monotonic() < drain_until:
            pump(0.02)
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        disk.stop()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        kill_attempt_processes(marker, proc.pid, born=born)
        enforcement.close()
        if follower is not None:
            follower.abandon()
        if trace_dir is not None:
            shutil.rmtree(trace_dir, ignore_errors=True)
        if start_status is not None:
            start_status.close()
        raise
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
        _close_fds(pipes)

    out.close()
    err.close()
    if parser is not None:
        flush = getattr(parser, "flush", None)
        if callable(flush):
            with contextlib.suppress(Exception):
                emit(flush(), time.time())
        try:
            usage = parser.finish()
        except Exception:
            usage = Usage()
    else:
        usage = Usage()

    if follower is not None and log_path is not None and trace_dir is not None:
        try:
            _wait_tracer(log_path, tracer_exclude)
            trace_events = follower.finish()
        finally:
            follower.abandon()
            shutil.rmtree(trace_dir, ignore_errors=True)
        for ts, ev in trace_events:
            timed.append((ts, ev))
            if on_event is not None:
                on_event(ev)

    timed.sort(key=lambda item: item[0])  # stable: same-time events keep their arrival order
    rc = proc.returncode
    sandbox_failed = None
    if start_status is not None:  # a sandbox the harness stopped did start
        failure = start_status.failure(rc, err.text())
        sandbox_failed = clean(failure) if failure and term_at is None else None
    try:
        hits = enforcement.hits(exit_code=rc if rc is not None and rc >= 0 else None,
                                signal_no=-rc if rc is not None and rc < 0 else None)
        # what is still in the attempt's cgroups escaped the sweep (no marker, own session)
        left = enforcement.kill_all()
        if sandbox is None:
            orphans += left
    finally:
        enforcement.close()
    if disk.hit is not None:
        hits.append(dict(disk.hit))
    return ProcessOutcome(
        exit_code=rc if rc is not None and rc >= 0 else None,
        signal=-rc if rc is not None and rc < 0 else None,
        wall_s=wall_s,
        timed_out=timed_out,
        orphans=orphans,
        stdout_text=clean(out.text()),
        stdout_total=out.total,
        stderr_text=clean(err.text()),
        stderr_total=err.total,
        events=[ev for _ts, ev in timed],
        usage=usage,
        trace=mode,
        trace_reason=trace_reason,
        agent_error=({k: clean(str(v)) for k, v in watch.verdict.items()}
                     if watch is not None and watch.verdict is not None else None),
        trace_partial=tracewatch is not None and tracewatch.partial,
        sandbox_failed=sandbox_failed,
        limits=enforcement.as_data(),
        limit_hits=hits,
    )


def output_events(outcome: ProcessOutcome, output_limit: int = 64 * 1024,
                  limit: int = EVENT_TEXT_LIMIT) -> list[Event]:
    """``agent.output`` events for the raw stdout/stderr heads of an outcome (empty streams skipped).

    The texts are already redacted and filtered by ``run_agent_process``; ``output_limit`` is the
    one it was called with.
    """
    events: list[Event] = []
    for stream, text, total in (("stdout", outcome.stdout_text, outcome.stdout_total),
                                ("stderr", outcome.stderr_text, outcome.stderr_total)):
        if total == 0:
            continue
        head, cut, _n = bound_text(text, limit)
        events.append(("agent.output", {"stream": stream, "text": head, "total_bytes": total,
                                        "truncated": cut or total > output_limit}))
    return events
