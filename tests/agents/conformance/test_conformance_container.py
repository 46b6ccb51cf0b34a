"""The real agent CLIs (claude, codex) on a containerised task: `ledger run --sandbox podman` runs
the packaged smoke task in a container of the base image, the CLI inside it (its install tree
mounted read-only), the scripted model on the host's 127.0.0.1 reached through the harness's
journaling proxy (the container has no network of its own). Skipped where the CLI is not
installed or no engine runs a container."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.sandbox.container import engine
from tests.agents.conformance.clis import CLIS, totals
from tests.agents.conformance.test_conformance import check_recorded, real_cli, run_cli

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_real_cli_edits_the_smoke_task_in_a_container(tmp_path: Path, name: str) -> None:
    """The CLI runs in the container (agent.started's sandbox is podman's, uid 1000), reaches the
    scripted model only through the proxy (net.connect journaled), and the task passes with the
    scripted token totals; the attestation is not CLEAN (no trace is captured in a container)."""
    probe = engine.probe()
    if not probe.runs:
        pytest.skip(probe.reason)
    cli = CLIS[name]
    program = real_cli(cli)
    att = run_cli(tmp_path, cli, program, cli.honest(), args=("--sandbox", "podman", "--trace", "auto"))
    a = att.attempt
    assert (a["outcome"], a["hidden_passed"]) == ("passed", True), a
    check_recorded(att, cli, totals(cli.honest_usage))
    started = att.entries("agent.started")[-1].data
    assert started["sandbox"]["backend"] == "podman" and started["sandbox"]["uid"] == 1000, started["sandbox"]
    connects = att.entries("net.connect")
    assert any(c.data.get("port") == att.port for c in connects), [c.data for c in connects]
    assert a["attestation"] != "CLEAN", a
