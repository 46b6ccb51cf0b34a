"""`ledger run --sandbox auto|bwrap|none` on a machine where bubblewrap does not work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.sandbox import bwrap as bw
from tests.run.minitasks import make_ledger


@pytest.fixture()
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process believes bubblewrap cannot run here."""
    monkeypatch.setattr(bw, "_probed", (False, "bwrap is not on PATH", None))


def test_bwrap_required_but_missing_exits_3_with_one_clear_line(tmp_path: Path,
                                                                 no_bwrap: None) -> None:
    """--sandbox bwrap without bubblewrap: exit 3, one line naming the fix, nothing run."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    result = CliRunner().invoke(cli, ["--ledger", str(home), "run", "--task", "fix-sub",
                                      "--agent", "noop", "--sandbox", "bwrap"])
    assert result.exit_code == 3
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "apt-get install bubblewrap" in lines[0]
    assert "Traceback" not in result.output
    assert not (home / "journal.db").exists() or not list(
        Journal.open(home / "journal.db", readonly=True).entries(kind="attempt.started"))


def test_auto_without_bubblewrap_warns_once_and_attests_isolation_none(tmp_path: Path,
                                                                       no_bwrap: None) -> None:
    """--sandbox auto without bubblewrap: one warning line saying how to get isolation, the run
    goes on unisolated, and its attestations say isolation none."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    result = CliRunner().invoke(cli, ["--ledger", str(home), "run", "--json", "--task", "fix-sub",
                                      "--agent", "noop", "--trace", "none"])
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if "without isolation" in ln]
    assert len(warnings) == 1 and "install bubblewrap" in warnings[0]
    summary = json.loads(result.stdout)
    with Journal.open(home / "journal.db", readonly=True) as j:
        started = next(j.entries(kind="run.started"))
        atts = [e.data["attestation"] for e in j.entries(run=summary["run"], kind="attestation")]
    assert started.data["config"]["sandbox"] == "none"
    assert atts and all(a["isolation"] == "none" and a["sandbox"] is None for a in atts)
