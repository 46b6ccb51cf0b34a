"""The agent runs through the Sandbox port: whatever backend the run names, the attempt asks it for
the agent's box and runs the command that box makes, and a box that says it never ran the agent
is the harness's failure with that backend's name.

The backend here exists only in this test: ``recording`` wraps the ``none`` backend, records
every ``agent_box`` request and every command its boxes confine, and makes each command announce
itself (``BOXED-BY-RECORDING`` on stderr before the agent's own program runs): the agent's output
in the journal holding that line proves the attempt ran the box's command, not one of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ledger.sandbox import registry
from ledger.sandbox.local import LocalSandbox
from ledger.sandbox.port import (
    AgentRequest,
    Availability,
    Box,
    BoxRecords,
    Confined,
    GradingRequest,
)
from tests.sandbox.test_start_failure import _agent, _entries, _Inline, _ledger

NAME = "recording"
ANNOUNCE = "BOXED-BY-RECORDING"


class RecordingBox:
    """A box of the ``none`` backend whose commands announce themselves; ``refuse``: the message
    ``failure`` reports (a box that says it never ran the command)."""

    def __init__(self, inner: Box, log: list[tuple[str, Any]], refuse: str | None) -> None:
        self.inner, self.log, self.refuse = inner, log, refuse
        self.backend = NAME
        self.purpose, self.isolated = inner.purpose, inner.isolated
        self.proxy, self.captures_trace = inner.proxy, inner.captures_trace
        self.captures_opens = inner.captures_opens

    def capture_opens(self) -> Any:
        return self.inner.capture_opens()

    def readable(self) -> tuple[str, ...]:
        return self.inner.readable()

    def writable(self) -> tuple[str, ...]:
        return self.inner.writable()

    def enforcement(self, limits: Any, *, label: str) -> Any:
        return self.inner.enforcement(limits, label=label)

    def command(self, argv: Sequence[str], env: Mapping[str, str], *, limits: Any = None,
                waiter: tuple[int, int] | None = None) -> Confined:
        self.log.append(("command", tuple(argv)))
        made = self.inner.command(argv, env, limits=limits, waiter=waiter)
        script = f'echo {ANNOUNCE} >&2; exec "$@"'
        return Confined(argv=("/bin/sh", "-c", script, "sh", *made.argv), env=made.env,
                        pass_fds=made.pass_fds, preexec=made.preexec)

    def started(self) -> None:
        self.inner.started()

    def failure(self, returncode: int | None, output: str) -> str | None:
        return self.refuse if self.refuse is not None else self.inner.failure(returncode, output)

    def namespace(self) -> tuple[int, str] | None:
        return self.inner.namespace()

    def trace_lines(self, lines: Any) -> Any:
        return self.inner.trace_lines(lines)

    def as_data(self) -> dict[str, Any] | None:
        return self.inner.as_data()

    def close(self) -> BoxRecords:
        self.log.append(("close", self.purpose))
        records = self.inner.close()
        return BoxRecords(backend=NAME, connections=records.connections,
                          failures=records.failures, commands=records.commands)


class RecordingSandbox:
    """The test-only backend (see the module docstring)."""

    name = NAME
    hint = ""
    isolated = False  # its boxes are the none backend's

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.requests: list[AgentRequest] = []
        self.log: list[tuple[str, Any]] = []

    def available(self) -> Availability:
        return Availability(True, "a test backend over none")

    def agent_box(self, request: AgentRequest) -> RecordingBox:
        self.requests.append(request)
        return RecordingBox(LocalSandbox().agent_box(request), self.log, self.refuse)

    def grading_box(self, request: GradingRequest) -> Box:
        return LocalSandbox().grading_box(request)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Register a backend under ``recording`` for one test (the CLI's choices include it), run
    attempts in this process (so they see it), and take it out again."""
    import ledger.run.coordinator as coordinator

    made: list[RecordingSandbox] = []

    def install(refuse: str | None = None) -> RecordingSandbox:
        backend = RecordingSandbox(refuse)
        registry.register(backend)
        made.append(backend)
        return backend

    monkeypatch.setattr(coordinator, "make_executor", _Inline)
    try:
        yield install
    finally:
        registry._BACKENDS.pop(NAME, None)
    assert made


def _run(home: Path, tmp: Path) -> tuple[Any, list[Any]]:
    result = _ledger(home, "run", "--json", "--task", "add-clamp", "--agent", _agent(tmp),
                     "--sandbox", NAME)
    run = json.loads(result.stdout)["run"]
    return result, _entries(home, run)


def test_the_attempts_agent_runs_the_command_its_box_made(tmp_path: Path, recording: Any) -> None:
    """``ledger run --sandbox recording``: the attempt asked the backend for the agent's box
    (the request names the attempt's worktree and the agent's program), that box confined the
    agent's command line, and what ran was the box's command (its announcement is in the
    agent's journaled output, beside the agent's own line); the box was closed."""
    backend = recording()
    home = tmp_path / ".ledger"
    result, entries = _run(home, tmp_path)
    assert result.exit_code in (0, 1), result.output
    [started] = [e.data for e in entries if e.kind == "agent.started"]
    program = str(tmp_path / "agent.sh")
    asked = [r for r in backend.requests if str(r.worktree) == started["cwd"]]
    assert len(asked) == 1 and asked[0].argv[0] == program, backend.requests
    commands = [argv for what, argv in backend.log if what == "command"]
    assert any(argv[0] == program for argv in commands), backend.log
    text = "".join(e.data.get("text", "") for e in entries if e.kind == "agent.output")
    assert ANNOUNCE in text and "START-TEST agent ran" in text, text
    assert ("close", "agent") in backend.log
    assert not [e for e in entries if e.kind == "sandbox.failed"]


def test_a_box_whose_failure_reports_a_message_is_sandbox_failed_of_that_backend(
        tmp_path: Path, recording: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's box says it never ran the agent: ``sandbox.failed`` (stage agent, backend
    ``recording``, the box's message), agent error ``sandbox_failed`` (not a crash), nothing
    graded, UNOBSERVED, and ``ledger run`` exits 3 with one error line."""
    import ledger.run.plan as plan

    monkeypatch.setattr(plan, "_preflight_sandboxes", lambda *a, **k: None)  # not seen ahead
    recording(refuse="recording: the test box refused to start")
    home = tmp_path / ".ledger"
    result, entries = _run(home, tmp_path)
    assert result.exit_code == 3, result.output
    [failed] = [e.data for e in entries if e.kind == "sandbox.failed"]
    assert failed["stage"] == "agent" and failed["backend"] == NAME
    assert failed["message"] == "recording: the test box refused to start"
    [finished] = [e.data for e in entries if e.kind == "agent.finished"]
    assert finished["crashed"] is False and finished["agent_error"]["kind"] == "sandbox_failed"
    assert "test.result" not in [e.kind for e in entries]
    [row] = json.loads(result.stdout)["attempts"]
    assert row["attestation"] == "UNOBSERVED"
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "sandbox never started" in errors[0], result.stderr
