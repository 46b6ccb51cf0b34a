"""The harness's own code only: a folder named like one of the harness's packages in the working
directory never runs inside a harness process (the CLI, its forkserver and workers, the resource
tracker) and never breaks a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run.minitasks import make_ledger

LEDGER_SCRIPT = Path(sys.executable).parent / "ledger"  # the console script users run


@pytest.mark.parametrize("name", ["attest", "cli", "evaluators", "ledger"])
def test_a_shadowing_package_in_the_working_directory_never_runs(tmp_path: Path, name: str) -> None:
    """`ledger run` started in a folder holding ``NAME/__init__.py`` (which writes a marker file
    when imported, and would break the import of the real package): the run succeeds, the
    marker is never written."""
    work = tmp_path / "project"
    marker = tmp_path / f"imported-{name}"
    (work / name).mkdir(parents=True)
    (work / name / "__init__.py").write_text(
        f"import sys\nopen({str(marker)!r}, 'a').write(repr(sys.argv) + '\\n')\n"
        "raise SystemExit('the planted package ran')\n")
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    proc = subprocess.run([str(LEDGER_SCRIPT), "--ledger", str(home), "run", "--json",
                           "--task", "fix-sub", "--agent", "oracle"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert not marker.exists(), f"the planted {name}/ ran in: {marker.read_text()}"
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["attempts"][0]["hidden_passed"] is True


def test_the_planted_package_would_run_without_a_safe_path(tmp_path: Path) -> None:
    """Control: the same planted package does run in a plain ``python -c`` started in that
    folder (what multiprocessing's forkserver is), so the test above can fail."""
    work = tmp_path / "project"
    marker = tmp_path / "imported"
    (work / "attest").mkdir(parents=True)
    (work / "attest" / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    subprocess.run([sys.executable, "-c", "import attest"], cwd=work, env=env, timeout=60, check=False)
    assert marker.exists()


def test_agents_get_the_users_environment_not_the_harness_safe_path(tmp_path: Path) -> None:
    """The workers start with PYTHONSAFEPATH=1, but the agent inherits the user's environment
    (here: without it), so its own scripts import their neighbours as outside."""
    from ledger.journal.journal import Journal

    home = make_ledger(tmp_path, tasks=("fix-sub",))
    agent = tmp_path / "agent.py"
    agent.write_text("import os, sys\nprint('AGENT SAFEPATH=%s flag=%s' % ("
                     "os.environ.get('PYTHONSAFEPATH'), sys.flags.safe_path), flush=True)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    proc = subprocess.run([str(LEDGER_SCRIPT), "--ledger", str(home), "run", "--json",
                           "--task", "fix-sub", "--agent", f"cmd:{sys.executable} {agent}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["run"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        text = json.dumps([e.data for e in j.entries(run=run)], default=str)
    assert "AGENT SAFEPATH=None flag=False" in text
