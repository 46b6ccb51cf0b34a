"""``agent_error``: agents that never reached a model are told apart, and stopped early.

Each case is data: the agent kind, what it printed, how it ended, what it parsed; and the
``agent_error`` kind it must get (None: it did work, or it is not judged).
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from ledger.agents import resolve_agent
from ledger.agents.contracts import AttemptContext, Invocation, ProcessOutcome, Usage
from ledger.agents.errors import ReachWatch, classify, line_sign
from ledger.agents.process import run_agent_process


def outcome(*, exit_code: int | None = 1, timed_out: bool = False, stdout: str = "",
            stderr: str = "", usage: Usage | None = None, events: list | None = None,
            stopped: dict | None = None) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, signal=None, wall_s=1.0, timed_out=timed_out,
                          orphans=0, stdout_text=stdout, stdout_total=len(stdout),
                          stderr_text=stderr, stderr_total=len(stderr), events=events or [],
                          usage=usage or Usage(), agent_error=stopped)


# an agent of each kind, whose own profile says whether it uses a model
AGENT_OF_KIND = {"cli": "claude", "http": "http:m@http://127.0.0.1:9/v1", "builtin": "noop",
                 "cmd": "cmd:true"}
CASES = {
    "connection-refused-cli": ("cli", outcome(stderr="Error: connect ECONNREFUSED 127.0.0.1:9\n"),
                               "unreachable"),
    "auth-401-cli-exit-0": ("cli", outcome(exit_code=0, stdout="The API provider is not able to "
                                                               "authenticate you. Check your API key.\n"),
                            "auth_rejected"),
    "invalid-key-json": ("cli", outcome(stdout='{"type":"result","is_error":true,'
                                               '"result":"Invalid API key"}\n'), "auth_rejected"),
    "timed-out-silent-cli": ("cli", outcome(exit_code=None, timed_out=True), "no_model_call"),
    "http-agent-says-unreachable": ("http", outcome(exit_code=3, usage=Usage(
        tokens_in=0, tokens_out=0, model_calls=0,
        agent_error={"kind": "unreachable", "detail": "refused"})), "unreachable"),
    "stopped-by-watch": ("cli", outcome(exit_code=None, stopped={"kind": "unreachable",
                                                                 "detail": "stopped early"}),
                         "unreachable"),
    # did work: never an agent_error, whatever it printed later
    "tokens-reported": ("cli", outcome(stderr="connection reset\n",
                                       usage=Usage(tokens_in=10, tokens_out=1)), None),
    "tool-call-seen": ("cli", outcome(events=[("tool.call", {"tool": "shell", "input": {}})],
                                      stderr="ECONNREFUSED\n"), None),
    "http-answered-once": ("http", outcome(exit_code=1, usage=Usage(model_calls=1)), None),
    # not judged: no model to reach
    "builtin-failed": ("builtin", outcome(stderr="connection refused\n"), None),
    "cmd-failed": ("cmd", outcome(stderr="connection refused\n"), None),
    # a CLI that exited 0 saying nothing about a failure is not flagged
    "cli-quiet-success": ("cli", outcome(exit_code=0), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_classify(name: str) -> None:
    """Each recorded ending gets the agent_error kind its case names (or none)."""
    kind, out, expected = CASES[name]
    got = classify(resolve_agent(AGENT_OF_KIND[kind]).profile().uses_model, out)
    assert (got["kind"] if got else None) == expected


def test_detail_prefers_the_transcript_words() -> None:
    """The detail quotes the parsed transcript line, not the raw JSON it came from."""
    raw = '{"type":"assistant","message":{"content":"API Error: Unable to connect (ConnectionRefused)"}}'
    got = classify(True, outcome(stdout=raw + "\n", events=[
        ("agent.output", {"text": "[api error] API Error: Unable to connect (ConnectionRefused)"})]))
    assert got == {"kind": "unreachable",
                   "detail": "[api error] API Error: Unable to connect (ConnectionRefused)"}


def test_line_signs() -> None:
    """Connection and auth failures are recognised in common CLI wordings; others are not."""
    assert line_sign('{"type":"error","message":"Reconnecting... 2/5 (error sending request)"}') \
        == "unreachable"
    assert line_sign("APIError: 401 Unauthorized") == "auth_rejected"
    assert line_sign("HTTP 403 Forbidden: invalid api key") == "auth_rejected"
    assert line_sign("ran 12 tests, 0 failures") is None
    assert line_sign("ModuleNotFoundError: No module named 'ledger'") is None  # not ENOTFOUND
    assert line_sign("Error: getaddrinfo ENOTFOUND api.example") == "unreachable"


def test_watch_ignores_failures_after_progress() -> None:
    """Once a tool call was seen, error lines (e.g. from the agent's own commands) stop nothing."""
    watch = ReachWatch()
    watch.event(("tool.call", {"tool": "bash"}))
    assert not any(watch.line("curl: (7) Failed to connect: Connection refused") for _ in range(9))
    assert watch.verdict is None


def test_watch_waits_out_a_burst_the_cli_recovers_from() -> None:
    """Failure lines within the window (codex's WebSocket attempts) stop nothing; persistent ones
    past it do."""
    now = [0.0]
    watch = ReachWatch(window_s=20.0, clock=lambda: now[0])
    line = "ERROR codex_api: failed to connect to Responses WebSocket stage=Unknown"
    for t in (0.0, 0.5, 1.5, 3.0, 10.0):
        now[0] = t
        assert not watch.line(line)
    now[0] = 21.0
    assert watch.line(line) and watch.verdict is not None
    assert watch.verdict["kind"] == "unreachable" and "in 21 s" in watch.verdict["detail"]
    recovered = ReachWatch(window_s=20.0, clock=lambda: now[0])
    now[0] = 0.0
    for _ in range(3):
        recovered.line(line)
    recovered.event(("tool.call", {"tool": "shell", "input": {}}))
    now[0] = 30.0
    assert not recovered.line(line) and recovered.verdict is None


def test_cli_retrying_a_dead_endpoint_is_stopped_early(tmp_path: Path) -> None:
    """A CLI that keeps retrying an unreachable model is stopped within seconds, not its budget."""
    script = tmp_path / "retrier.py"
    script.write_text(textwrap.dedent("""\
        import sys, time
        for i in range(1000):
            print('{"type":"error","message":"Reconnecting... %d/5 (error sending request)"}' % i,
                  flush=True)
            time.sleep(0.2)
        """))
    for d in ("wt", "home"):
        (tmp_path / d).mkdir()
    prompt = tmp_path / "prompt.md"
    prompt.write_text("x")
    ctx = AttemptContext(attempt_id="r-t/t/cli/1/1", task_id="t", worktree=tmp_path / "wt",
                         prompt_file=prompt, prompt="x", home=tmp_path / "home", timeout_s=120)
    inv = Invocation(argv=(sys.executable, str(script)), env={"PATH": "/usr/bin:/bin"})
    start = time.monotonic()
    out = run_agent_process(inv, ctx, trace="none", watch=ReachWatch(window_s=1.0), grace_s=1.0)
    assert time.monotonic() - start < 10
    assert not out.timed_out
    assert out.agent_error is not None and out.agent_error["kind"] == "unreachable"
    assert classify(True, out) == out.agent_error


RETRYING_CLI = """\
import sys, time
if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.0.0 (fake, retries a dead endpoint)")
    sys.exit(0)
for i in range(100000):
    print('{"type":"error","message":"Reconnecting... %d/5 (stream disconnected before '
          'completion: error sending request for url (http://127.0.0.1:9/v1/responses))"}' % i,
          flush=True)
    time.sleep(0.25)
"""


@pytest.mark.slow
def test_ledger_run_stops_a_cli_that_never_reaches_its_model(tmp_path: Path) -> None:
    """A codex-like CLI that keeps retrying a dead endpoint: stopped after the watch's window,
    agent_error unreachable, one summary line, exit 3, long before the task's 180 s budget."""
    import json
    import os
    import subprocess

    bindir = tmp_path / "bin"
    bindir.mkdir()
    program = bindir / "codex"
    program.write_text(f"#!{sys.executable}\n" + RETRYING_CLI)
    program.chmod(0o755)
    home = tmp_path / ".ledger"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", "--ledger", str(home), "run",
         "--task", "add-clamp", "--agent", "codex", "--trace", "none", "--sandbox", "none"],
        env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"},
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    took = time.monotonic() - start
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert took < 120
    assert "agent codex: never reached its model in 1 of 1 attempt(s) (unreachable:" in proc.stdout
    from ledger.journal.journal import Journal

    with Journal.open(home / "journal.db") as j:
        finished = next(e.data for e in j.entries() if e.kind == "agent.finished")
    assert finished["timed_out"] is False and finished["wall_s"] < 60
    assert finished["agent_error"]["kind"] == "unreachable"
    assert "stopped early" in json.dumps(finished["agent_error"])
