"""`ledger tasks validate --sandbox`: a task is validated exactly the way it runs, its test runs
and signals in the grading sandbox of `ledger run` when bubblewrap works (issues 13 and 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.sandbox import bwrap as bw
from ledger.sandbox import sandbox_status
from tests.tasks.helpers import make_task

needs_bwrap = pytest.mark.skipif(sandbox_status("auto").mode != "bwrap",
                                 reason="bubblewrap does not work on this host")


def _validate(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--ledger", str(home), "tasks", "validate", *args])
    return result.exit_code, result.stdout, result.stderr


def _leaky_task(tmp_path: Path) -> Path:
    """An operator task whose hidden test reads a file outside the task's repo copy."""
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("outside\n")
    hidden = ("from calc import add\n\n\ndef test_add_sums_two_numbers():\n"
              f"    assert open({str(secret)!r}).read() == 'outside\\n'\n"
              "    assert add(2, 3) == 5\n")
    home = tmp_path / ".ledger"
    make_task(home / "golden" / "smoke", "t-leak", files={"tests/test_add_hidden.py": hidden})
    return home


@needs_bwrap
def test_packaged_task_validates_sandboxed(tmp_path: Path) -> None:
    """A packaged task passes validation with its test runs in the grading sandbox, reported so."""
    code, out, err = _validate(tmp_path / ".ledger", "--task", "add-clamp", "--sandbox", "bwrap", "--json")
    assert code == 0, out + err
    [task] = json.loads(out)["tasks"]
    assert task["ok"] and task["sandbox"] == "bwrap" and task["sandboxed"] is True


@needs_bwrap
def test_auto_sandboxes_and_text_output_says_so(tmp_path: Path) -> None:
    """The default (auto) sandboxes where bubblewrap works; the table says `yes`."""
    code, out, err = _validate(tmp_path / ".ledger", "--task", "add-clamp")
    assert code == 0, out + err
    assert "sandboxed" in out and any("add-clamp" in ln and " yes " in ln for ln in out.splitlines())


@needs_bwrap
def test_hidden_test_reading_outside_its_copy_fails_sandboxed_only(tmp_path: Path) -> None:
    """Attack: a hidden test reading a host file outside the repo copy passes unsandboxed but
    fails in the grading sandbox, proving validate really runs it there."""
    home = _leaky_task(tmp_path)
    code, out, _ = _validate(home, "--task", "t-leak", "--sandbox", "none", "--json")
    assert code == 0, out
    assert json.loads(out)["tasks"][0]["sandboxed"] is False
    code, out, _ = _validate(home, "--task", "t-leak", "--sandbox", "bwrap", "--json")
    assert code == 1
    [task] = json.loads(out)["tasks"]
    assert task["sandboxed"] is True
    checks = {c["name"]: c["passed"] for c in task["checks"]}
    assert checks["hidden-passes-after"] is False and checks["hidden-fails-before"] is True


def test_bwrap_requested_without_bubblewrap_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--sandbox bwrap where bubblewrap cannot run: exit 3, one clear line, nothing validated."""
    monkeypatch.setattr(bw, "_probed", (False, "bwrap is not on PATH", None))
    code, out, err = _validate(tmp_path / ".ledger", "--task", "add-clamp", "--sandbox", "bwrap")
    assert code == 3
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "apt-get install bubblewrap" in lines[0] and "Traceback" not in out + err
    assert out == ""


def test_auto_without_bubblewrap_validates_unsandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--sandbox auto without bubblewrap validates as before and reports sandboxed false."""
    monkeypatch.setattr(bw, "_probed", (False, "bwrap is not on PATH", None))
    code, out, err = _validate(_leaky_task(tmp_path), "--task", "t-leak", "--json")
    assert code == 0, out + err
    assert json.loads(out)["tasks"][0]["sandbox"] == "none"
