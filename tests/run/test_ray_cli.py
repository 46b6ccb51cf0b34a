"""`ledger run --executor ray` from the command line: flags, ledger.toml, the journaled archive."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from tests.run.test_ray_executor import HAS_RAY


def _ledger(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(tmp_path / ".ledger"), *args])
    return res.exit_code, res.stdout, res.stderr


def test_missing_extra_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Ray, --executor ray is exit 2 naming the install command, and nothing runs."""
    monkeypatch.setitem(sys.modules, "ray", None)
    code, _, err = _ledger(tmp_path, "run", "--executor", "ray", "--task", "add-clamp",
                           "--agent", "noop", "--trace", "none")
    assert code == 2
    assert "pip install 'eval-ledger[ray]'" in err
    assert "Traceback" not in err
    code, out, _ = _ledger(tmp_path, "runs", "--json")  # the refused start left no empty run
    assert code != 0 or json.loads(out) == []


def test_ray_address_without_ray_executor_is_a_usage_error(tmp_path: Path) -> None:
    """--ray-address with --executor local is refused before anything runs."""
    code, _, err = _ledger(tmp_path, "run", "--executor", "local", "--ray-address", "127.0.0.1:1")
    assert code == 2 and "--ray-address needs --executor ray" in err
    assert not (tmp_path / ".ledger" / "journal.db").exists()


def test_unknown_executor_in_ledger_toml_is_refused(tmp_path: Path) -> None:
    """ledger.toml [run] executor is checked like the flag."""
    (tmp_path / "ledger.toml").write_text('[run]\nexecutor = "dask"\n')
    code, _, err = _ledger(tmp_path, "run", "--agent", "noop")
    assert code == 2 and "executor must be one of local, ray" in err


@pytest.mark.ray
@pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'eval-ledger[ray]'")
def test_executor_ray_from_the_cli_journals_node_and_archive(tmp_path: Path) -> None:
    """A CLI run on Ray records the node and the task archive hash before each attempt."""
    # In a child process: Ray keeps its auth token in process-wide state, so an in-process
    # instance here would break the cluster fixtures of the tests that run after this one.
    proc = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", "--ledger",
         str(tmp_path / ".ledger"), "run", "--executor", "ray", "--task", "add-clamp",
         "--agent", "oracle", "--agent", "noop", "--trace", "none", "--json"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 0, err
    summary = json.loads(out)
    outcomes = {r["agent"]: r["outcome"] for r in summary["attempts"]}
    assert outcomes == {"oracle": "passed", "noop": "failed"}
    with Journal.open(tmp_path / ".ledger" / "journal.db", readonly=True) as j:
        started = [e.data for e in j.entries(kind="attempt.started")]
        run_started = next(j.entries(kind="run.started")).data
    assert run_started["config"]["executor"] == "ray"
    assert all(len(s["archive"]) == 64 and "/" in s["node"] for s in started)
    assert len({s["archive"] for s in started}) == 1  # one task, one archive
    assert _ledger(tmp_path, "verify")[0] == 0
    assert _ledger(tmp_path, "replay")[0] == 0
