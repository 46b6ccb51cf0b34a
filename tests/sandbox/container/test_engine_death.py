"""The engine ends an attempt's container under a running agent (killed from outside, mid-attempt):
through `ledger run` the attempt is the harness's failure (a `sandbox.failed` entry, an infra
failure of kind `sandbox`), excluded from the score, and `--resume RUN --retry infra` runs it
again; the agent's own failure would have been scored. Skipped with the probe's reason where no
engine runs a container."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.journal.journal import Journal
from ledger.sandbox.container import engine
from tests.sandbox.container.test_run_environment import _env_task

# mode "hang": mark that it started, then wait to be killed; mode "fix": fix the task.
AGENT = """#!/bin/sh
if [ "$(cat "$(dirname "$0")/mode")" = hang ]; then
  echo STARTED-IN-CONTAINER > started.txt
  exec sleep 600
fi
printf 'def add(a, b):\\n    return a + b\\n\\n\\ndef neg(a):\\n    return -a\\n' > calc.py
"""


@pytest.fixture
def agent_dir() -> Iterator[Path]:
    """The agent's folder, one the container's uid 1000 can reach (pytest's own are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-engine-death-"))
    os.chmod(folder, 0o755)
    script = folder / "hangs.sh"
    script.write_text(AGENT)
    script.chmod(0o755)
    (folder / "mode").write_text("hang")
    os.chmod(folder / "mode", 0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _ledger_bin() -> str:
    return str(Path(sys.executable).parent / "ledger")


def _entries(home: Path, run: str) -> list[Any]:
    with Journal.open(home / "journal.db", readonly=True) as j:
        return list(j.entries(run=run))


def _agent_container(podman: engine.Engine, agent_dir: Path, proc: subprocess.Popen[str],
                     timeout: float = 240.0) -> str:
    """The running agent container that mounts ``agent_dir`` (this test's agent), once its agent
    has written its marker in the worktree (read through the engine, inside the container)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        names = podman.call(["ps", "--filter", "name=ledger-agent-", "--format", "{{.Names}}"], timeout=30).stdout
        for name in names.split():
            mounts = podman.call(["inspect", "--format", "{{range .Mounts}}{{.Source}} {{end}}", name],
                                 timeout=30).stdout.split()
            if str(agent_dir) not in mounts:
                continue
            seen = podman.call(["exec", name, "cat", "started.txt"], timeout=30)
            if seen.ok and seen.stdout.strip() == "STARTED-IN-CONTAINER":
                return name
        time.sleep(0.5)
    raise AssertionError("the agent's container never ran")


def test_a_container_killed_mid_attempt_is_an_infra_failure_and_is_retried(
        podman: engine.Engine, tmp_path: Path, agent_dir: Path) -> None:
    """The agent's container is killed from outside while the agent runs (it was running: its
    marker read inside it): sandbox.failed (stage agent, the engine's doing), agent_error
    sandbox_failed, nothing graded, an infra failure of kind sandbox that the score excludes;
    `--resume --retry infra` re-runs exactly that attempt, which now passes."""
    from evaluators.stats_view import infra_attempts, stats_of

    home = tmp_path / ".ledger"
    _env_task(home, "t-env", f"FROM {engine.BASE_IMAGE}\nRUN echo ENV-MARKER > /etc/ledger-env-marker "
                             f"&& echo {tmp_path.name} > /etc/ledger-env-nonce\n")
    spec = f"cmd:{agent_dir / 'hangs.sh'}"
    proc = subprocess.Popen([_ledger_bin(), "--ledger", str(home), "run", "--task", "t-env", "--agent", spec,
                             "--trace", "none", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready_ids: set[str] = set()
    try:
        name = _agent_container(podman, agent_dir, proc)
        podman.call(["kill", name], timeout=60, check=True)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 1, 3), err
    summary = json.loads(out)
    run = summary["run"]
    entries = _entries(home, run)
    ready_ids |= {e.data["image_id"] for e in entries if e.kind == "environment.ready"}
    [failed] = [e.data for e in entries if e.kind == "sandbox.failed"]
    assert failed["stage"] == "agent" and failed["backend"] == podman.name
    assert "the container ended before its command did" in failed["message"]
    [fin] = [e.data for e in entries if e.kind == "agent.finished"]
    assert fin["agent_error"]["kind"] == "sandbox_failed" and fin["crashed"] is False
    assert not [e for e in entries if e.kind == "test.result"]  # nothing graded
    stats = stats_of(entries, run)
    assert {k: n for k, n in stats["infra"]["by_kind"].items() if n} == {"sandbox": 1} and stats["infra"]["excluded"] == 1
    [attempt] = [e.data["attempt"] for e in entries if e.kind == "attempt.started"]
    assert list(infra_attempts(entries, run)) == [attempt]
    assert podman.call(["ps", "--all", "--filter", f"name={name}", "--format", "{{.Names}}"]).stdout.strip() == ""

    (agent_dir / "mode").write_text("fix")
    again = subprocess.run([_ledger_bin(), "--ledger", str(home), "run", "--resume", run, "--retry", "infra",
                            "--trace", "none", "--json"], capture_output=True, text=True, timeout=600)
    try:
        assert again.returncode == 0, again.stderr
        entries = _entries(home, run)
        ready_ids |= {e.data["image_id"] for e in entries if e.kind == "environment.ready"}
        tries = [e.data for e in entries if e.kind == "attempt.started"]
        assert len(tries) == 2 and tries[1]["try"] == tries[0]["try"] + 1
        [result] = [e.data for e in entries if e.kind == "test.result" and e.data.get("suite") == "hidden"]
        assert result["passed"] is True
    finally:
        for image_id in ready_ids:
            podman.call(["rmi", "--force", image_id], timeout=120)
