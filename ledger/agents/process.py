"""Run one agent as a bounded, observed child process.

``run_agent_process`` starts the agent in a session of its own (``start_new_session=True``, so its
process group id is its pid) with stdin on ``/dev/null``, and then, in the calling thread:

* reads stdout and stderr together (one ``select`` loop, no threads), keeping the first
  ``output_limit`` bytes of each and counting the rest, so any amount of output keeps memory flat;
  stdout lines (each bounded by ``MAX_LINE``) go to the agent's transcript parser as they arrive;
* enforces the budget ``ctx.timeout_s``: SIGTERM to the whole group, ``grace_s`` later SIGKILL;
* once the agent has exited, sweeps for **orphans** (``ledger.agents.orphans``): every live
  process that carries this attempt's marker in its environment, that is still in the agent's
  process group or session, or that the attempt's strace is tracing. Each is SIGKILLed and
  counted. Without strace, a process that scrubbed its environment *and* left the session
  escapes the sweep;
* with tracing on, parses the strace log into activity events (``ledger.agents.trace``); files
  read outside the worktree are matched against the commitment with ``evidence`` (the
  redactor's), and only the markers found are kept. Where the box reports the agent's file
  opens itself (``box.captures_opens``: bwrap with fanotify), strace traces everything but the
  opens (``strace_command(opens=False)``: the agent no longer stops on each ``openat``) and the
  box's opens are merged into the same events (``ledger.agents.follow``); the capture is then
  ``fanotify+strace`` (``capture_mode``), and one that missed opens (a mark refused, the
  kernel's queue overflowed) makes the trace partial, as a tracer that let go does.

Every captured text is redacted, filtered and bounded as ``ledger.agents.capture`` says before it
enters an event or the outcome.

The run is three objects: ``_Launch`` (the command actually started: the agent's argv as its
``Box`` of the Sandbox port confines it, strace wrapped around that), ``_AgentRun`` (started,
watched until it ends, swept, its transcript and trace collected) and the ``ProcessOutcome`` it
returns.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.agents import orphans
from ledger.agents.capture import make_cleaner, sanitize_event, secret_redactor
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
from ledger.agents.orphans import MARKER_ENV
from ledger.agents.follow import TraceFollower
from ledger.agents.strace import strace_command, strace_status
from ledger.agents.trace import Evidence, TraceOptions
from ledger.errors import UsageError

MAX_LINE = 4 * 1024 * 1024  # longest stdout line handed to a transcript parser
GRACE_S = 2.0
_READ_CHUNK = 64 * 1024
_TRACE_MODES = ("auto", "strace", "none")
_CHILD_FDS = ("status_w", "release_r")  # the waiter pipes' ends the child keeps
CAPTURE_FANOTIFY = "fanotify+strace"  # opens from the box (the kernel), the rest from strace
CAPTURE_STRACE = "strace"


def capture_mode(mode: str, box: Any) -> str | None:
    """How a run traced in ``mode`` (``resolve_trace``) captures the agent in ``box``:
    ``CAPTURE_FANOTIFY`` where the box reports the opens itself, ``CAPTURE_STRACE``; None
    untraced (``agent.started.capture``)."""
    if mode != "strace":
        return None
    return CAPTURE_FANOTIFY if box is not None and box.captures_opens else CAPTURE_STRACE


def resolve_trace(mode: str, box: Any = None) -> tuple[str, str]:
    """``(effective mode, reason)`` for a requested ``auto|strace|none``, in ``box`` (a
    ``ledger.sandbox.port.Box``; None: an ordinary process).

    ``strace`` requested but not working here, or around a box whose processes strace cannot
    see (``box.captures_trace`` False: a container engine's client), is a ``UsageError`` (check
    it before a run starts); ``auto`` falls back to ``none`` with the reason.
    """
    if mode not in _TRACE_MODES:
        raise UsageError(f"unknown trace mode {mode!r}; use one of {', '.join(_TRACE_MODES)}")
    if mode == "none":
        return "none", "tracing disabled (--trace none)"
    ok, reason = strace_status()
    if ok and box is not None and not box.captures_trace:
        ok, reason = False, (f"the {box.backend} sandbox's processes cannot be traced from "
                             "outside (trace not captured)")
    if ok:
        return "strace", reason
    if mode == "strace":
        raise UsageError(f"--trace strace was requested but {reason}")
    return "none", reason


def _close_fds(fds: dict[str, int]) -> None:
    for key in list(fds):
        with contextlib.suppress(OSError):
            os.close(fds.pop(key))


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


@dataclass
class _Launch:
    """The command actually started: the agent's argv as its box confines it (with the
    in-namespace waiter's status and release pipes, for an isolated box that takes them) under
    strace, and the marker."""

    argv: list[str]
    env: dict[str, str]
    marker: str
    mode: str  # "strace" | "none"
    enforcement: Any  # what ``box.enforcement`` made: ``ledger.sandbox.limits.Enforcement``, ...
    box: Any  # ledger.sandbox.port.Box
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None
    pipes: dict[str, int] = field(default_factory=dict)
    trace_dir: Path | None = None
    log_path: Path | None = None
    opens: Any = None  # the box's capture of the agent's opens (``Box.capture_opens``)

    def discard(self) -> None:
        """Release what was made for a child that never ran (or was stopped at once)."""
        if self.trace_dir is not None:
            shutil.rmtree(self.trace_dir, ignore_errors=True)
        _close_fds(self.pipes)
        if self.opens is not None:
            self.opens.close()
        self.enforcement.close()


def _enforcement(box: Any, limits: Any) -> Any:
    """``limits`` as made for this run, or the box's enforcement of ``Limits`` (DEFAULTS)."""
    from ledger.limits import DEFAULTS, Limits

    if limits is None or isinstance(limits, Limits):
        return box.enforcement(limits or DEFAULTS, label="agent")
    return limits


def _launch(inv: Invocation, env: dict[str, str], marker: str, mode: str, box: Any,
            limits: Any) -> _Launch:
    enforcement = _enforcement(box, limits)
    launch = _Launch(list(inv.argv), env, marker, mode, enforcement, box)
    pipes = launch.pipes
    try:
        if box.isolated:  # the in-namespace waiter tells when the agent's main process ended
            for name in ("status", "release"):
                pipes[name + "_r"], pipes[name + "_w"] = os.pipe()
        if mode != "strace":
            env[MARKER_ENV] = marker
        elif capture_mode(mode, box) == CAPTURE_FANOTIFY:
            launch.opens = box.capture_opens()  # arms the next command
        confined = box.command(launch.argv, env, limits=enforcement,
                               waiter=(pipes["status_w"], pipes["release_r"]) if pipes else None)
    except BaseException:
        launch.discard()
        raise
    if pipes and pipes["status_w"] not in confined.pass_fds:  # a box with no waiter of ours
        _close_fds(pipes)
    launch.argv, launch.env = list(confined.argv), dict(confined.env)
    launch.pass_fds, launch.preexec = tuple(confined.pass_fds), confined.preexec
    if mode == "strace":
        launch.trace_dir = Path(tempfile.mkdtemp(prefix="ledger-trace-"))
        launch.log_path = launch.trace_dir / "strace.log"
        launch.argv = strace_command(launch.log_path, {MARKER_ENV: marker},
                                     opens=launch.opens is None) + launch.argv
    return launch


class _AgentRun:
    """One agent process: started, watched until it ends (time, reach, disk), swept, and its
    transcript and trace collected into the outcome."""

    def __init__(self, inv: Invocation, ctx: AttemptContext, launch: _Launch,
                 clean: Callable[[str], str], *, watch: Any, output_limit: int,
                 on_event: Callable[[Event], None] | None) -> None:
        self.inv, self.ctx, self.launch, self.clean = inv, ctx, launch, clean
        self.watch, self.on_event = watch, on_event
        self.timed: list[tuple[float, Event]] = []
        self.parser: OutputParser | None = inv.parser_factory() if inv.parser_factory else None
        self.out = _Stream(output_limit,
                           self.on_line if self.parser is not None or watch is not None else None)
        self.err = _Stream(output_limit, watch.line if watch is not None else None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.timed_out = False
        self.orphans = 0
        self.inside_orphans = 0
        self.agent_end: float | None = None
        self.term_at: float | None = None
        self.hard_killed = False
        self.tracer_exclude: list[int] = []
        self.follower: TraceFollower | None = None
        self.wall_s = 0.0

    def emit(self, events: Iterable[Event], ts: float) -> None:
        for ev in events:
            ev = sanitize_event(ev, self.clean)
            self.timed.append((ts, ev))
            if self.watch is not None:
                self.watch.event(ev)
            if self.on_event is not None:
                self.on_event(ev)

    def on_line(self, line: str) -> None:
        if self.watch is not None:
            self.watch.line(line)
        if self.parser is None:
            return
        try:
            events = self.parser.feed_line(line)
        except Exception:  # a parser bug must not lose the run; the raw output is kept anyway
            return
        self.emit(events, time.time())

    def start(self) -> None:
        """Fork the launch; UsageError when it cannot start (everything made for it released)."""
        from ledger.sandbox.limits import spawning

        launch, proc = self.launch, None
        try:
            with spawning():  # a stop arriving during the fork is raised after it, not lost
                proc = subprocess.Popen(
                    launch.argv, cwd=self.ctx.worktree, env=launch.env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                    close_fds=True, pass_fds=launch.pass_fds, preexec_fn=launch.preexec,
                )
        except BaseException as exc:
            if proc is not None:  # started, then stopped before the run's own clean-up took over
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            launch.discard()
            if proc is not None or not isinstance(exc, OSError | subprocess.SubprocessError):
                raise
            why = getattr(exc, "strerror", None) or exc
            raise UsageError(f"cannot start agent {self.inv.argv[0]!r}: {why}") from None
        self.proc = proc
        launch.box.started()
        if launch.opens is not None:  # marks the sandbox's mounts, then lets the agent start
            launch.opens.begin(proc.pid)
        for key in _CHILD_FDS:
            if key in launch.pipes:
                os.close(launch.pipes.pop(key))

    def observe(self, evidence: Evidence | None, path_hit: Callable[[str], bool] | None) -> None:
        """The watches beside the running agent: disk, the sandbox's waiter, the tracer, the
        strace log parsed as it grows, and one selector over its pipes."""
        from ledger.sandbox.limits import DiskWatch
        from ledger.sandbox.tracelog import TraceWatch

        launch, ctx, proc = self.launch, self.ctx, self.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        self.disk = DiskWatch(list(launch.box.writable()), launch.enforcement.limits).start()
        self.waiter = orphans.Waiter(launch.pipes.get("status_r"), launch.box.namespace)
        self.start_t = time.monotonic()
        self.born = orphans.started_at(proc.pid)  # every process of the attempt starts after it
        self.tracewatch = TraceWatch(proc.pid) if launch.mode == "strace" else None
        if launch.log_path is not None:  # parse the log while the agent runs, not after it
            redact_paths = secret_redactor(self.inv.secrets)
            self.follower = TraceFollower(
                launch.log_path,
                TraceOptions(worktree=ctx.worktree, home=ctx.home, capture_filter=self.clean,
                             evidence=evidence, path_hit=path_hit),
                keep=launch.box.trace_lines,
                # content and argv are filtered while parsing; redact secrets (paths too), bound
                post=lambda ev: sanitize_event(ev, redact_paths), opens=launch.opens)
        self.streams: dict[int, Any] = {proc.stdout.fileno(): self.out,
                                        proc.stderr.fileno(): self.err}
        if self.waiter.fd is not None:
            self.streams[self.waiter.fd] = self.waiter
        self.sel = selectors.DefaultSelector()
        for fd in self.streams:
            self.sel.register(fd, selectors.EVENT_READ)

    def _pump(self, timeout: float) -> None:
        assert self.proc is not None
        if not self.sel.get_map():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
            return
        for key, _ in self.sel.select(timeout=timeout):
            fd = key.fd
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:
                chunk = b""
            if chunk:
                self.streams[fd].feed(chunk)
            else:
                self.sel.unregister(fd)

    def _step(self, deadline: float, grace_s: float) -> bool:
        """One round of the watch; True once the agent's process has ended."""
        proc = self.proc
        assert proc is not None
        self._pump(0.02)
        if self.tracewatch is not None:
            self.tracewatch.poll()
        waiter = self.waiter
        if waiter.exited and not waiter.released:
            # the agent's main process has ended; the namespace lives until released
            self.agent_end = time.monotonic()
            self.inside_orphans = waiter.count_and_kill()
            os.close(self.launch.pipes.pop("release_w"))
            waiter.released = True
        if proc.poll() is not None:
            return True
        now = time.monotonic()
        if self.term_at is None and self.watch is not None and self.watch.verdict is not None:
            self.term_at = now  # the agent cannot reach its model: stop it now
            orphans.signal_group(proc.pid, signal.SIGTERM)
        elif self.term_at is None and self.disk.hit is not None:
            self.term_at = now  # over its disk limit: stop it now
            orphans.signal_group(proc.pid, signal.SIGTERM)
        elif self.term_at is None and now >= deadline:
            self.timed_out = True
            self.term_at = now
            orphans.signal_group(proc.pid, signal.SIGTERM)
        elif self.term_at is not None and not self.hard_killed and now >= self.term_at + grace_s:
            self.hard_killed = True
            orphans.signal_group(proc.pid, signal.SIGKILL)
        return False

    def supervise(self, grace_s: float) -> None:
        """Watch the agent until it ends, then sweep its orphans and drain its pipes."""
        proc, launch = self.proc, self.launch
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        try:
            deadline = self.start_t + max(0.0, self.ctx.timeout_s)
            while not self._step(deadline, grace_s):
                pass
            self.wall_s = (self.agent_end or time.monotonic()) - self.start_t
            self.disk.stop()
            if launch.log_path is not None:
                # the tracer the watch saw tracing the agent (a /proc scan when it never looked)
                seen = self.tracewatch.tracer if self.tracewatch is not None else 0
                self.tracer_exclude = [seen] if seen else orphans.tracers_of(launch.log_path)
            self.orphans = self.inside_orphans + orphans.kill_attempt_processes(
                launch.marker, proc.pid, tracers=self.tracer_exclude, born=self.born)
            drain_until = time.monotonic() + 2.0
            while self.sel.get_map() and time.monotonic() < drain_until:
                self._pump(0.02)
        except BaseException:
            orphans.signal_group(proc.pid, signal.SIGKILL)
            self.disk.stop()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
            orphans.kill_attempt_processes(launch.marker, proc.pid, born=self.born)
            launch.enforcement.close()
            if self.follower is not None:
                self.follower.abandon()
            if launch.opens is not None:
                launch.opens.close()
            if launch.trace_dir is not None:
                shutil.rmtree(launch.trace_dir, ignore_errors=True)
            raise
        finally:
            self.sel.close()
            proc.stdout.close()
            proc.stderr.close()
            _close_fds(launch.pipes)

    def collect(self) -> Usage:
        """The transcript's last events and usage, then the strace log's events, in time order."""
        self.out.close()
        self.err.close()
        usage = Usage()
        if self.parser is not None:
            flush = getattr(self.parser, "flush", None)
            if callable(flush):
                with contextlib.suppress(Exception):
                    self.emit(flush(), time.time())
            try:
                usage = self.parser.finish()
            except Exception:
                usage = Usage()
        launch = self.launch
        if self.follower is not None and launch.log_path is not None \
                and launch.trace_dir is not None:
            try:
                orphans.wait_tracer(launch.log_path, self.tracer_exclude)
                # every process of the box has ended: its last closes are queued
                tail = launch.opens.finish() if launch.opens is not None else []
                trace_events = self.follower.finish(tail)
            finally:
                self.follower.abandon()
                if launch.opens is not None:
                    launch.opens.close()
                shutil.rmtree(launch.trace_dir, ignore_errors=True)
            for ts, ev in trace_events:
                self.timed.append((ts, ev))
                if self.on_event is not None:
                    self.on_event(ev)
        self.timed.sort(key=lambda item: item[0])  # stable: same-time events keep arrival order
        return usage

    def outcome(self, usage: Usage, trace_reason: str) -> ProcessOutcome:
        proc, launch, clean = self.proc, self.launch, self.clean
        assert proc is not None
        rc = proc.returncode
        failure = launch.box.failure(rc, self.err.text())  # a box the harness stopped did start
        sandbox_failed = clean(failure) if failure and self.term_at is None else None
        try:
            hits = launch.enforcement.hits(exit_code=rc if rc is not None and rc >= 0 else None,
                                           signal_no=-rc if rc is not None and rc < 0 else None)
            # what is still in the attempt's cgroups escaped the sweep (no marker, own session)
            left = launch.enforcement.kill_all()
            if not launch.box.isolated:
                self.orphans += left
        finally:
            launch.enforcement.close()
        if self.disk.hit is not None:
            hits.append(dict(self.disk.hit))
        watch = self.watch
        let_go = self.tracewatch is not None and self.tracewatch.partial
        lost = launch.opens.lost if launch.opens is not None else None
        partial_why = ("the tracer let go of the agent before it ended" if let_go else lost)
        return ProcessOutcome(
            exit_code=rc if rc is not None and rc >= 0 else None,
            signal=-rc if rc is not None and rc < 0 else None,
            wall_s=self.wall_s, timed_out=self.timed_out, orphans=self.orphans,
            stdout_text=clean(self.out.text()), stdout_total=self.out.total,
            stderr_text=clean(self.err.text()), stderr_total=self.err.total,
            events=[ev for _ts, ev in self.timed], usage=usage,
            trace=launch.mode, trace_reason=trace_reason,
            agent_error=({k: clean(str(v)) for k, v in watch.verdict.items()}
                         if watch is not None and watch.verdict is not None else None),
            trace_partial=partial_why is not None, trace_partial_reason=partial_why,
            capture=(CAPTURE_FANOTIFY if launch.opens is not None
                     else capture_mode(launch.mode, None)),
            sandbox_failed=sandbox_failed, limits=launch.enforcement.as_data(), limit_hits=hits,
        )


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
    box: Any = None,
    limits: Any = None,
) -> ProcessOutcome:
    """Run the agent once; see the module docstring. Raises UsageError if it cannot start at all.

    ``watch`` (a ``ledger.agents.errors.ReachWatch``) sees every output line and transcript
    event; once it has a ``verdict`` the agent is stopped like at its time limit (but not
    ``timed_out``) and the outcome's ``agent_error`` is the verdict, redacted.

    ``box`` (a ``ledger.sandbox.port.Box`` of ``Sandbox.agent_box``; None: an ordinary process,
    the ``none`` backend's box) confines the agent: ``box.command`` makes the command that runs,
    strace wraps it from outside (so the tracer lives outside the box's PID namespace; not at all
    when ``box.captures_trace`` is False), ``box.trace_lines`` cuts the box's own set-up out of
    the log, ``box.failure`` tells a box that never ran the agent (``sandbox_failed``). In an
    isolated box the agent runs under the in-namespace waiter (``Enforcement.init_script``):
    when the agent's main process exits, the processes it left in ``box.namespace()`` are
    counted (``orphans``) and killed before the namespace ends. The caller closes its box.

    ``limits`` (a ``ledger.sandbox.limits.Limits``, ``DEFAULTS`` when None, or the
    ``box.enforcement`` made for this run, closed here) bound the run
    (``ledger.sandbox.limits``); the outcome's ``limits`` says how, ``limit_hits`` what was hit.
    A disk limit hit stops the agent like its time limit (but not ``timed_out``).
    """
    if not inv.argv:
        raise UsageError("agent invocation has an empty command line")
    if box is None:
        from ledger.sandbox.local import LocalBox

        box = LocalBox("agent", [str(p) for p in dict.fromkeys((ctx.worktree, ctx.home))])
    mode, trace_reason = resolve_trace(trace, box)
    env = {k: v for k, v in inv.env.items() if k != MARKER_ENV}
    if _find_program(inv.argv[0], env, ctx.worktree) is None:
        raise UsageError(f"agent program {inv.argv[0]!r} not found (PATH or path); nothing was run")
    marker = f"{ctx.attempt_id}#{secrets.token_hex(6)}"
    clean = make_cleaner(inv.secrets, capture_filter)
    launch = _launch(inv, env, marker, mode, box, limits)
    run = _AgentRun(inv, ctx, launch, clean, watch=watch, output_limit=output_limit,
                    on_event=on_event)
    run.start()
    run.observe(evidence, path_hit)
    run.supervise(grace_s)
    return run.outcome(run.collect(), trace_reason)


__all__ = ["CAPTURE_FANOTIFY", "CAPTURE_STRACE", "GRACE_S", "MAX_LINE", "capture_mode",
           "resolve_trace", "run_agent_process"]
