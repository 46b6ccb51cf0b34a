"""The harness's diagnostic log (structlog): JSON or console lines on stderr, the run id and the
attempt id bound to each line, LEDGER_LOG picks the level, nothing of it in the journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger

ROOT = Path(__file__).resolve().parents[2]


def _ledger(home: Path, *args: str, level: str = "debug") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(PYTHONPATH=str(ROOT), LEDGER_LOG=level)
    return subprocess.run([sys.executable, "-c", "from cli.main import main; main()",
                           "--ledger", str(home), *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=home.parent)


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_json_lines_carry_the_run_and_attempt_ids(tmp_path: Path) -> None:
    """--log-format json: one JSON object per line; run events name the run, attempt events the
    attempt too, from the coordinator and from the worker process alike."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    proc = _ledger(home, "--log-format", "json", "run", "--tier", "mini", "--agent", "noop",
                   "--trace", "none", "--json")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run"]
    lines = _json_lines(proc.stderr)
    events = {line["event"] for line in lines}
    assert {"run.started", "attempt.submitted", "attempt.running", "attempt.finished",
            "run.finished"} <= events
    assert all(line["run"] == run_id and line["level"] and line["timestamp"] for line in lines)
    attempt = f"{run_id}/fix-add/noop/1/1"
    assert {line.get("attempt") for line in lines if line["event"].startswith("attempt.")} == {attempt}
    with Journal.open(home / "journal.db", readonly=True) as j:
        assert not any(e.kind.startswith(("log", "attempt.submitted")) for e in j.entries())


def test_the_default_level_keeps_a_quiet_run_quiet(tmp_path: Path) -> None:
    """LEDGER_LOG=warning (the default): an ordinary run writes no diagnostic lines."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    proc = _ledger(home, "--log-format", "json", "run", "--tier", "mini", "--agent", "noop",
                   "--trace", "none", "--json", level="warning")
    assert proc.returncode == 0, proc.stderr
    assert _json_lines(proc.stderr) == []


def test_console_format_is_plain_text(tmp_path: Path) -> None:
    """The console format is readable text naming the event and the run (no JSON, no colours)."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    proc = _ledger(home, "run", "--tier", "mini", "--agent", "noop", "--trace", "none", "--json",
                   level="info")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run"]
    lines = [ln for ln in proc.stderr.splitlines() if "run.started" in ln]
    assert lines and run_id in lines[0] and "\x1b[" not in proc.stderr
