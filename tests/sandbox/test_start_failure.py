"""A sandbox that fails to start is the harness's failure, never the agent's crash, never CLEAN.

Cases, one per way a start fails: a policy bwrap cannot apply (a readable path it cannot find,
the merged-/usr ``/bin`` bind of issue 26), an agent installed where the sandbox user cannot
reach (the pre-flight refuses the run: exit 3, no run journaled), a failure the pre-flight did
not see (the attempt: ``sandbox.failed``, agent error ``sandbox_failed``, UNOBSERVED, exit 3),
and the grading sandbox failing (``sandbox.failed`` stage grading, the attempt in error). And the
forgery: a command that prints ``bwrap: ...`` and exits 1 is a command that ran.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.run.attempt import run_attempt
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.sandbox import probe_bwrap
from ledger.sandbox.bwrap import StartStatus, bwrap_command, check_start
from ledger.sandbox.policy import PolicyRequest, SandboxPolicy, build_policy

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}")]
MISSING = f"/nonexistent-ledger-test-{uuid.uuid4().hex[:8]}"

HONEST_SH = """#!/bin/sh
echo "START-TEST agent ran"
"""


def _good(tmp: Path) -> SandboxPolicy:
    return build_policy(PolicyRequest(cwd=tmp, writable=[tmp]))


def test_a_policy_bwrap_cannot_apply_is_reported_with_bwraps_message(tmp_path: Path) -> None:
    """A readable path bwrap cannot find: check_start gives bwrap's own line; the good one None."""
    assert check_start(_good(tmp_path)) is None
    bad = dataclasses.replace(_good(tmp_path), readable=(*_good(tmp_path).readable, MISSING))
    why = check_start(bad)
    assert why is not None and why.startswith("bwrap: ") and MISSING in why


@pytest.mark.skipif(not os.path.islink("/bin"), reason="this host has no merged-/usr /bin link")
def test_the_unresolved_bin_bind_of_issue_26_is_a_start_failure(tmp_path: Path) -> None:
    """The policy the old install_tree made (/bin bound over its own recreated link) fails to
    start, with bwrap's message: the failure this project's machines showed."""
    good = _good(tmp_path)
    bad = dataclasses.replace(good, readable=(*good.readable, "/bin"))
    why = check_start(bad)
    assert why is not None and "/newroot/bin" in why


def test_a_command_that_prints_like_bwrap_and_exits_1_ran(tmp_path: Path) -> None:
    """Forgery: ``echo 'bwrap: ...' >&2; exit 1`` inside a working sandbox is a command that ran
    (bwrap wrote its exit-code record), never a sandbox failure."""
    import subprocess

    status = StartStatus()
    argv = bwrap_command(_good(tmp_path), ["/bin/sh", "-c",
                                           "echo 'bwrap: Can not mount anything' >&2; exit 1"],
                         extra=status.args())
    proc = subprocess.run(argv, capture_output=True, pass_fds=status.pass_fds, timeout=30)
    assert proc.returncode == 1 and b"bwrap: Can not mount" in proc.stderr  # it ran
    assert status.failure(proc.returncode, proc.stderr.decode()) is None


# --------------------------------------------------------------------------- ledger run


def _ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def _agent(tmp: Path) -> str:
    path = tmp / "agent.sh"
    path.write_text(HONEST_SH)
    path.chmod(0o755)
    return f"cmd:{path}"


def _runs(home: Path) -> list[str]:
    if not (home / "journal.db").exists():
        return []
    with Journal.open(home / "journal.db", readonly=True) as j:
        return [e.run for e in j.entries(kind="run.started")]


def test_preflight_refuses_an_agent_the_sandbox_user_cannot_reach(tmp_path: Path) -> None:
    """The agent lives in a folder only another user may enter: `ledger run` starts its sandbox
    once before anything, refuses with bwrap's reason (exit 3, one line) and journals no run."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the agent's folder to another user")
    locked = tmp_path / "locked"
    (locked / "tool").mkdir(parents=True)
    spec = _agent(locked / "tool")
    shutil.chown(locked, 65534, 65534)
    locked.chmod(0o700)
    home = tmp_path / ".ledger"
    result = _ledger(home, "run", "--task", "add-clamp", "--agent", spec, "--sandbox", "bwrap")
    assert result.exit_code == 3, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "sandbox cannot start" in lines[0], lines
    assert "bwrap: " in lines[0] and "Permission denied" in lines[0]
    assert _runs(home) == []


def _bad_agent_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every agent policy gets a readable path bwrap cannot find."""
    from ledger.sandbox import attempt_boxes

    real = attempt_boxes.agent_policy

    def bad(**kwargs: Any) -> SandboxPolicy:
        policy = real(**kwargs)
        return dataclasses.replace(policy, readable=(*policy.readable, MISSING))

    monkeypatch.setattr(attempt_boxes, "agent_policy", bad)


def test_preflight_refuses_a_policy_bwrap_cannot_apply(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever makes the agent's policy unusable, the pre-flight says so: exit 3, no run."""
    _bad_agent_policy(monkeypatch)
    home = tmp_path / ".ledger"
    result = _ledger(home, "run", "--task", "add-clamp", "--agent", _agent(tmp_path))
    assert result.exit_code == 3, result.output
    assert MISSING in result.stderr and "Traceback" not in result.output
    assert _runs(home) == []


class _Inline:
    """An executor running each attempt in this process (so a monkeypatch reaches it)."""

    kind = "local"

    def __init__(self, *_a: Any, **_k: Any) -> None:
        self.queue: list[AttemptEvent] = []

    def place(self, plan: AttemptPlan) -> dict[str, str | None]:
        return {"node": "inline"}

    def submit(self, plan: AttemptPlan) -> None:
        run_attempt(plan, self.queue.append)

    def events(self, *, idle_timeout: float | None = None) -> Iterator[AttemptEvent]:
        while self.queue:
            yield self.queue.pop(0)

    def ready(self) -> int:
        return len(self.queue)

    def cancel(self, attempt_id: str, *, status: str = "cancelled") -> None:
        return None

    def close(self) -> None:
        return None


def _inline_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[Any, Path]:
    import ledger.run.coordinator as coordinator
    import ledger.run.plan as plan

    monkeypatch.setattr(coordinator, "make_executor", _Inline)
    monkeypatch.setattr(plan, "_preflight_sandboxes", lambda *a, **k: None)  # not seen ahead
    home = tmp_path / ".ledger"
    result = _ledger(home, "run", "--json", "--task", "add-clamp", "--agent", _agent(tmp_path),
                     "--sandbox", "bwrap", *extra)
    return result, home


def _entries(home: Path, run: str) -> list[Any]:
    with Journal.open(home / "journal.db", readonly=True) as j:
        return list(j.entries(run=run))


def test_an_agent_sandbox_that_fails_at_the_attempt_is_sandbox_failed_never_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attempt journals sandbox.failed (stage agent, backend bwrap, bwrap's message), the
    agent did not crash (agent error sandbox_failed), nothing is graded, the attestation is
    UNOBSERVED (verify re-derives it), and `ledger run` exits 3 with one line."""
    _bad_agent_policy(monkeypatch)
    result, home = _inline_run(tmp_path, monkeypatch)
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    [row] = summary["attempts"]
    assert row["outcome"] == "agent_error" and row["crashed"] is False
    assert row["agent_error"]["kind"] == "sandbox_failed"
    assert row["attestation"] == "UNOBSERVED"
    entries = _entries(home, summary["run"])
    [failed] = [e.data for e in entries if e.kind == "sandbox.failed"]
    assert failed["stage"] == "agent" and failed["backend"] == "bwrap"
    assert failed["message"].startswith("bwrap: ") and MISSING in failed["message"]
    kinds = [e.kind for e in entries]
    assert "test.result" not in kinds and "agent.output" not in kinds  # nothing ran, nothing graded
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "sandbox never started" in errors[0], result.stderr
    assert _ledger(home, "verify").exit_code == 0


@pytest.mark.parametrize("when", ["collecting-before-the-agent", "grading-after-the-agent"])
def test_a_grading_sandbox_that_fails_is_sandbox_failed_and_the_attempt_errs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """A grading sandbox that cannot start (the one collecting the hidden test ids before the
    agent, or the one grading after it): sandbox.failed stage grading, the attempt ends in
    error (the harness's), and no test result pretends the agent failed. Before the agent,
    nothing ran and nothing is CLEAN; after it, the agent's own run stands."""
    import inspect

    import ledger.run.attempt.expected as expected
    from ledger.sandbox import attempt_boxes  # the bwrap backend's grading boxes are built there

    real = attempt_boxes.grading_policy
    monkeypatch.setattr(expected, "_EXPECTED", {})  # collect afresh, whatever ran before

    def bad(**kwargs: Any) -> SandboxPolicy:
        policy = real(**kwargs)
        grading = any(f.function == "prepare_grading" for f in inspect.stack())
        if grading != (when == "grading-after-the-agent"):
            return policy
        return dataclasses.replace(policy, readable=(*policy.readable, MISSING))

    monkeypatch.setattr(attempt_boxes, "grading_policy", bad)
    result, home = _inline_run(tmp_path, monkeypatch)
    summary = json.loads(result.stdout)
    [row] = summary["attempts"]
    assert row["status"] == "error" and "grading sandbox did not start" in row["error"]
    entries = _entries(home, summary["run"])
    [failed] = [e.data for e in entries if e.kind == "sandbox.failed"]
    assert failed["stage"] == "grading" and failed["backend"] == "bwrap" and MISSING in failed["message"]
    assert not [e for e in entries if e.kind == "test.result"]
    text = "".join(e.data.get("text", "") for e in entries if e.kind == "agent.output")
    if when == "collecting-before-the-agent":
        assert "START-TEST agent ran" not in text
        assert row["attestation"] in (None, "UNOBSERVED")
    else:
        assert "START-TEST agent ran" in text  # the agent itself did run
        # ... but its grading was never observed: UNOBSERVED, never CLEAN (verify re-derives it)
        assert row["attestation"] == "UNOBSERVED"
        [att] = [e.data["attestation"] for e in entries if e.kind == "attestation"]
        assert att["grading"]["trace"] == "sandbox-failed" and att["grading"]["observed"] is False
        assert _ledger(home, "verify").exit_code == 0


def test_stderr_of_a_started_sandbox_is_never_read_as_a_start_failure() -> None:
    """Without bwrap's status pipe saying so, nothing is a start failure (a killed sandbox, a
    timeout, exit 1 with an exit-code record)."""
    status = StartStatus()
    os.write(status.pass_fds[0], b'{ "child-pid": 5 }\n{ "exit-code": 1 }\n')
    assert status.failure(1, "bwrap: looks like a failure\n") is None
    status = StartStatus()
    assert status.failure(-9, "bwrap: killed\n") is None
    status = StartStatus()
    assert status.failure(1, "bwrap: Can't find source path /x: No such file\n") is not None
