"""The bounded agent runner: crashes, signals, hangs, orphans, floods, bad bytes, tracing, redaction."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from ledger.agents import resolve_agent
from ledger.agents import strace as trace_mod
from ledger.agents.capture import output_events, redact_secrets, sanitize_event
from ledger.agents.contracts import AttemptContext, Invocation, ProcessOutcome
from ledger.agents.orphans import attempt_processes, parse_proc_stat, started_at
from ledger.agents.process import _Stream, resolve_trace, run_agent_process
from ledger.errors import UsageError
from ledger.textbound import bound_text

FAKES = Path(__file__).parent / "fakes"
HAS_STRACE = shutil.which("strace") is not None
TRACES = ["none", pytest.param("strace", marks=[
    pytest.mark.strace, pytest.mark.skipif(not HAS_STRACE, reason="strace not on PATH")])]


def make_ctx(tmp_path: Path, timeout: float = 20.0, **extra: object) -> AttemptContext:
    wt = tmp_path / "wt"
    home = tmp_path / "home"
    scratch = tmp_path / "scratch"
    for d in (wt, home, scratch):
        d.mkdir(exist_ok=True)
    prompt = scratch / "prompt.md"
    prompt.write_text("Fix the bug.\n")
    return AttemptContext(attempt_id="r-test/t1/fake/1/1", task_id="t1", worktree=wt,
                          prompt_file=prompt, prompt="Fix the bug.", home=home,
                          timeout_s=timeout, extra=dict(extra))


def run_fake(tmp_path: Path, script: str, *args: str, trace: str = "none", timeout: float = 20.0,
             **kw: object) -> ProcessOutcome:
    ctx = make_ctx(tmp_path, timeout)
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / script} " + " ".join(args))
    return run_agent_process(agent.invocation(ctx), ctx, trace=trace, **kw)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """True if pid is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


@pytest.mark.parametrize("trace", TRACES)
def test_crash_exit_code(tmp_path: Path, trace: str) -> None:
    """A non-zero exit is reported as such, with stdout and stderr captured."""
    out = run_fake(tmp_path, "crash.py", trace=trace)
    assert out.exit_code == 3 and out.signal is None and not out.timed_out
    assert "starting work" in out.stdout_text
    assert "something broke" in out.stderr_text
    assert out.trace == trace


@pytest.mark.parametrize("trace", TRACES)
def test_killed_by_signal(tmp_path: Path, trace: str) -> None:
    """An agent killed by a signal has no exit code and the signal number."""
    out = run_fake(tmp_path, "suicide.py", trace=trace)
    assert out.exit_code is None
    assert out.signal == signal.SIGKILL
    assert not out.timed_out


def test_hang_past_budget_is_terminated(tmp_path: Path) -> None:
    """A hanging agent gets SIGTERM at its budget; its child in the group dies too."""
    pids = tmp_path / "pids"
    start = time.monotonic()
    out = run_fake(tmp_path, "hang.py", str(pids), timeout=0.6, grace_s=1.0)
    elapsed = time.monotonic() - start
    assert out.timed_out
    assert out.signal == signal.SIGTERM
    assert 0.6 <= out.wall_s < 1.5 and elapsed < 2.5
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid)


@pytest.mark.parametrize("trace", TRACES)
def test_hang_ignoring_sigterm_is_killed_after_grace(tmp_path: Path, trace: str) -> None:
    """An agent that ignores SIGTERM is SIGKILLed after the grace period; the group is gone."""
    pids = tmp_path / "pids"
    out = run_fake(tmp_path, "hang.py", str(pids), "--ignore-term", trace=trace, timeout=0.6,
                   grace_s=0.4)
    assert out.timed_out
    assert out.signal == signal.SIGKILL
    assert 1.0 <= out.wall_s < 1.0 + 1.0
    agent_pid, child_pid = map(int, pids.read_text().split())
    assert not alive(agent_pid) and not alive(child_pid)
    assert out.orphans <= 1  # the child ignores nothing: SIGTERM already ended it, or the sweep did


@pytest.mark.parametrize("trace", TRACES)
def test_orphans_found_killed_counted(tmp_path: Path, trace: str) -> None:
    """Background processes left behind (same group, scrubbed env, setsid daemon) are killed and counted."""
    pids_file = tmp_path / "pids"
    out = run_fake(tmp_path, "orphans.py", str(pids_file), trace=trace)
    assert out.exit_code == 0
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3
    assert out.orphans == 3
    time.sleep(0.05)
    assert [p for p in pids if alive(p)] == []


# /proc/PID/stat of one process: (comm) state ppid pgrp session tty_nr tpgid flags minflt
# cminflt majflt cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime
STAT_RUNNING = b"910 (python3 (x)) R 904 904 904 0 -1 4194560 120 0 0 0 1 0 0 0 20 0 1 0 5123 9"
STAT_EXITING = b"910 (python3 (x)) R 904 904 904 0 -1 4194628 120 0 0 0 1 0 0 0 20 0 1 0 5123 9"


def test_a_process_that_is_already_exiting_is_not_an_orphan() -> None:
    """A process of the agent's group caught between its exit and its zombie state (flags hold
    PF_EXITING, 0x4) reads as gone: it is not killed or counted; a running one is."""
    assert parse_proc_stat(STAT_RUNNING) == ("R", 904, 904, 904, 5123)
    assert parse_proc_stat(STAT_EXITING) == ("X", 904, 904, 904, 5123)
    assert parse_proc_stat(b"910 (cut) R 904 904 904") is None
    assert parse_proc_stat(b"") is None


def test_processes_older_than_the_agent_are_passed_over() -> None:
    """A process that started before the agent cannot be one of its descendants: with the
    agent's start time given, it is not read, found or killed; the agent itself is found."""
    child = subprocess.Popen(["sleep", "5"], start_new_session=True)
    try:
        born = started_at(child.pid)
        assert born > 0
        assert attempt_processes("m#1", child.pid, born=born) == [child.pid]
        assert attempt_processes("m#1", child.pid, born=born + 1) == []
    finally:
        child.kill()
        child.wait()


def test_output_flood_is_bounded_and_counted(tmp_path: Path) -> None:
    """50 MiB on stdout: the head is kept, the total counted, and memory stays flat."""
    tracemalloc.start()
    try:
        out = run_fake(tmp_path, "flood.py", "50", output_limit=64 * 1024)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.exit_code == 0
    assert out.stdout_total == 50 * 1024 * 1024
    assert len(out.stdout_text.encode()) == 64 * 1024
    assert out.stderr_text == "done\n"
    assert peak < 8 * 1024 * 1024, peak
    ev = output_events(out)
    assert ev[0][1]["truncated"] is True and ev[0][1]["total_bytes"] == 50 * 1024 * 1024
    assert ev[1][1]["truncated"] is False


def test_flood_through_a_parser_keeps_memory_flat(tmp_path: Path) -> None:
    """A transcript parser sees lines, but a line longer than MAX_LINE is dropped, not buffered."""
    seen: list[int] = []
    stream = _Stream(1024, lambda line: seen.append(len(line)))
    chunk = b"y" * (1024 * 1024)
    for _ in range(6):  # a 6 MiB line without a newline
        stream.feed(chunk)
    assert len(stream.buf) <= 4 * 1024 * 1024
    stream.feed(b"tail\nshort line\n")
    stream.close()
    assert seen == [len("short line")]
    assert stream.total == 6 * 1024 * 1024 + len(b"tail\nshort line\n")
    assert len(stream.head) == 1024


def test_non_utf8_output_is_replaced(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are decoded with replacement characters, never an exception."""
    out = run_fake(tmp_path, "nonutf8.py")
    assert out.exit_code == 0
    assert "\ufffd" in out.stdout_text and out.stdout_text.startswith("ok ")
    assert "end" in out.stdout_text
    assert "\ufffd" in out.stderr_text and "broken" in out.stderr_text


def test_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    """A program that does not exist: available() says why, and running raises UsageError."""
    agent = resolve_agent("cmd:/nonexistent/agent-bin --go")
    ok, reason = agent.available()
    assert not ok and "/nonexistent/agent-bin" in reason
    ctx = make_ctx(tmp_path)
    inv = Invocation(argv=("/nonexistent/agent-bin",), env=dict(os.environ))
    with pytest.raises(UsageError, match="not found"):
        run_agent_process(inv, ctx, trace="none")
    with pytest.raises(UsageError):
        agent.invocation(ctx)


def test_secrets_are_redacted_from_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An API key from the environment that the agent prints never reaches the outcome."""
    monkeypatch.setenv("FAKE_API_KEY", "s3cr3t-value-123456")
    ctx = make_ctx(tmp_path)
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / 'env_dump.py'}")
    inv = agent.invocation(ctx)
    assert "s3cr3t-value-123456" in inv.secrets
    out = run_agent_process(inv, ctx, trace="none")
    assert "s3cr3t-value-123456" not in out.stdout_text
    assert "[REDACTED]" in out.stdout_text


def test_capture_filter_applies_to_output_and_events(tmp_path: Path) -> None:
    """The capture filter sees every captured text: output heads and transcript events."""
    ctx = make_ctx(tmp_path, demo_steps=[{"say": "the GOLDEN answer"}])
    agent = resolve_agent("demo")
    out = run_agent_process(agent.invocation(ctx), ctx, trace="none",
                            capture_filter=lambda s: s.replace("GOLDEN", "[gt]"))
    texts = [d["text"] for k, d in out.events if k == "agent.output"]
    assert texts == ["the [gt] answer"]
    assert "GOLDEN" not in out.stdout_text


def test_on_event_streams_transcript_events(tmp_path: Path) -> None:
    """on_event receives the transcript events as they are parsed, the same as outcome.events."""
    got = []
    ctx = make_ctx(tmp_path, demo_steps=[{"write": "a.txt", "content": "hi"}, {"read": "a.txt"}])
    out = run_agent_process(resolve_agent("demo").invocation(ctx), ctx, trace="none",
                            on_event=got.append)
    assert got == out.events
    assert [k for k, _ in got] == ["tool.call", "tool.result", "tool.call", "tool.result"]
    assert (ctx.worktree / "a.txt").read_text() == "hi"
    assert out.usage.cost_usd == 0.0


def test_redact_and_bound_helpers() -> None:
    """Secrets and key-shaped strings are redacted; long texts are cut on a character boundary."""
    assert redact_secrets("key=abcdef123 and sk-ant-" + "a" * 30, ["abcdef123"]) == \
        "key=[REDACTED] and [REDACTED]"
    text, cut, total = bound_text("é" * 10, 5)
    assert (text, cut, total) == ("éé", True, 20)
    kind, data = sanitize_event(("tool.result", {"tool": "t", "output": "z" * 100, "is_error": False}),
                                lambda s: s, limit=10)
    assert data["output"] == "z" * 10 and data["truncated"] is True and data["total_bytes"] == 100


def test_trace_unavailable_falls_back_or_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without strace, auto gives trace 'none' with a reason and strace mode is a UsageError."""
    monkeypatch.setattr(trace_mod, "_status", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_trace("auto") == ("none", "strace is not on PATH (install it: apt-get install strace)")
    with pytest.raises(UsageError, match="strace"):
        resolve_trace("strace")
    with pytest.raises(UsageError, match="unknown trace mode"):
        resolve_trace("ptrace")
    monkeypatch.setattr(trace_mod, "_status", None)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.strace
@pytest.mark.skipif(not HAS_STRACE, reason="strace not on PATH")
def test_strace_records_writes_outside_the_worktree(tmp_path: Path) -> None:
    """A write outside the worktree is an fs.write with in_worktree False; one inside is True."""
    outside = tmp_path / "elsewhere" / "loot.txt"
    outside.parent.mkdir()
    port = _free_port()
    out = run_fake(tmp_path, "touch_files.py", "--write", str(outside), "x", "--write", "inside.txt",
                   "y", "--connect", "127.0.0.1", str(port), trace="strace")
    assert out.exit_code == 0 and out.trace == "strace"
    writes = {d["resolved"]: d for k, d in out.events if k == "fs.write"}
    assert writes[str(outside.resolve())]["in_worktree"] is False
    inside = str((tmp_path / "wt" / "inside.txt").resolve())
    assert writes[inside]["in_worktree"] is True and writes[inside]["path"] == "inside.txt"
    conns = [d for k, d in out.events if k == "net.connect" and d["family"] == "inet"]
    assert {"host": "127.0.0.1", "port": port, "family": "inet", "source": "strace"} in conns
    execs = [d for k, d in out.events if k == "proc.exec"]
    assert execs and execs[0]["argv"][1].endswith("touch_files.py")


@pytest.mark.strace
@pytest.mark.skipif(not HAS_STRACE, reason="strace not on PATH")
def test_strace_records_reads_outside_with_resolved_path(tmp_path: Path) -> None:
    """Reading hidden tests by a relative path and through a symlink: fs.read with the real path,
    no content, and the evidence the commitment scan found in it when it was captured."""
    hidden = tmp_path / "task" / "tests" / "test_hidden.py"
    hidden.parent.mkdir(parents=True)
    hidden.write_text("def test_secret():\n    assert answer() == 42\n")
    ctx_wt = tmp_path / "wt"
    ctx_wt.mkdir()
    (ctx_wt / "link.py").symlink_to(hidden)
    out = run_fake(tmp_path, "touch_files.py", "--read", "../task/tests/test_hidden.py",
                   "--read", "link.py", trace="strace",
                   capture_filter=lambda s: s.replace("42", "[gt]"),
                   evidence=lambda text, tokens=None, token_set=None: (
                       "[gt]" if "42" in (tokens or ()) else ""))
    reads = [d for k, d in out.events if k == "fs.read" and d["resolved"] == str(hidden.resolve())]
    assert len(reads) == 1  # one event per path, however often it was opened
    assert reads[0]["in_worktree"] is False
    assert reads[0]["path"] == "../task/tests/test_hidden.py"
    assert "content" not in reads[0] and "sha256" not in reads[0]
    assert reads[0]["evidence"] == "[gt]" and reads[0]["size"] == hidden.stat().st_size
    assert reads[0]["source"] == "strace"


@pytest.mark.strace
@pytest.mark.skipif(not HAS_STRACE, reason="strace not on PATH")
def test_strace_skips_content_of_private_home(tmp_path: Path) -> None:
    """Reads in the attempt's config home are recorded without content or digest (credentials
    live there)."""
    ctx = make_ctx(tmp_path)
    cred = ctx.home / "creds.json"
    cred.write_text('{"token": "abc"}')
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / 'touch_files.py'} --read {cred}")
    out = run_agent_process(agent.invocation(ctx), ctx, trace="strace")
    reads = [d for k, d in out.events if k == "fs.read" and d["resolved"] == str(cred.resolve())]
    assert reads and "content" not in reads[0] and "sha256" not in reads[0]


@pytest.mark.strace
@pytest.mark.skipif(not HAS_STRACE, reason="strace not on PATH")
def test_strace_finds_orphan_that_scrubbed_env_and_left_session(tmp_path: Path) -> None:
    """A setsid daemon with an empty environment is still found through its tracer, and killed."""
    pid_file = tmp_path / "pid"
    out = run_fake(tmp_path, "escape.py", str(pid_file), trace="strace")
    daemon = int(pid_file.read_text())
    try:
        assert out.exit_code == 0
        assert out.orphans == 1
        time.sleep(0.05)
        assert not alive(daemon)
    finally:
        if alive(daemon):
            os.kill(daemon, signal.SIGKILL)


@pytest.mark.parametrize("trace", TRACES)
def test_agent_deleting_its_worktree_is_survived(tmp_path: Path, trace: str) -> None:
    """An agent that removes its own worktree is recorded normally (deletions as fs.write)."""
    ctx = make_ctx(tmp_path)
    (ctx.worktree / "src.py").write_text("x = 1\n")
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / 'wreck.py'}")
    out = run_agent_process(agent.invocation(ctx), ctx, trace=trace)
    assert out.exit_code == 0 and out.stdout_text == "wrecked\n"
    assert not ctx.worktree.exists()
    if trace == "strace":
        deleted = {d["resolved"] for k, d in out.events if k == "fs.write" and d["in_worktree"]}
        assert str(tmp_path.resolve() / "wt" / "src.py") in deleted
