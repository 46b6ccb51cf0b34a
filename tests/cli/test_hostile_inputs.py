"""Hostile inputs end in one line: deeply nested JSON, msgpack, YAML and TOML in bundles, task
files and ``ledger.toml`` give exit 2 and one line on stderr, never a traceback.

The corpus is data: one named case per input, each run through the real CLI in a fresh
interpreter (a RecursionError surfaces there exactly as a user sees it)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

LEDGER = [sys.executable, "-P", "-c", "from cli.main import main; main()"]
DEPTH = 200_000


def _deep_json() -> str:
    return "[" * DEPTH + "]" * DEPTH


def _deep_toml() -> str:
    return "a = " + "[" * DEPTH + "]" * DEPTH + "\n"


def _task_folder(root: Path, *, md: str | None = None) -> Path:
    task = root / ".ledger" / "golden" / "mini" / "deep"
    (task / "repo").mkdir(parents=True)
    (task / "repo" / "x.py").write_text("X = 1\n")
    (task / "tests").mkdir()
    (task / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n")
    (task / "task.md").write_text(md or "---\nid: deep\ntitle: Deep\ntier: mini\n---\nDo it.\n")
    return task


def _vkey(root: Path) -> str:
    home = root / "publisher"
    subprocess.run([*LEDGER, "--ledger", str(home), "keys", "init"], check=True, capture_output=True,
                   timeout=120)
    return subprocess.run([*LEDGER, "--ledger", str(home), "keys", "show", "--public"], check=True,
                          capture_output=True, text=True, timeout=120).stdout.strip()


def _exported(root: Path) -> Path:
    home = root / ".ledger"
    for args in (["keys", "init"], ["append", "ext.ev", "--data", '{"i": 1}', "--run", "r-1"]):
        subprocess.run([*LEDGER, "--ledger", str(home), *args], check=True, capture_output=True,
                       timeout=120)
    out = root / "good.json"
    subprocess.run([*LEDGER, "--ledger", str(home), "export", "-o", str(out)], check=True,
                   capture_output=True, timeout=120)
    return out


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], list[str]]  # writes the input under the folder, returns the CLI args
    needle: str  # a word the one line must hold
    code: int = 2  # bad input; 1 where the input is a journal's own bytes (a failed check)
    one_line: bool = True  # False: a per-task import report, each skipped task on its own line


def _bundle_deep_json(root: Path) -> list[str]:
    (root / "b.json").write_text(_deep_json())
    return ["verify", "--bundle", str(root / "b.json"), "--vkey", _vkey(root)]


def _bundle_deep_json_field(root: Path) -> list[str]:
    (root / "b.json").write_text('{"format": "eval-ledger-bundle", "x": ' + _deep_json() + "}")
    return ["verify", "--bundle", str(root / "b.json"), "--vkey", _vkey(root)]


def _bundle_deep_msgpack_entry(root: Path) -> list[str]:
    bundle = json.loads(_exported(root).read_text())
    bundle["entries"][0]["bytes"] = base64.b64encode(b"\x91" * DEPTH + b"\xc0").decode()
    (root / "b.json").write_text(json.dumps(bundle))
    vkey = subprocess.run([*LEDGER, "--ledger", str(root / ".ledger"), "keys", "show", "--public"],
                          check=True, capture_output=True, text=True, timeout=120).stdout.strip()
    return ["verify", "--bundle", str(root / "b.json"), "--vkey", vkey]


def _task_md_deep_yaml(root: Path) -> list[str]:
    _task_folder(root, md="---\nid: deep\ntitle: Deep\ntier: mini\nlabels: "
                 + "[" * DEPTH + "]" * DEPTH + "\n---\nDo it.\n")
    return ["tasks", "list"]


def _task_md_deep_block_yaml(root: Path) -> list[str]:
    nested = "".join(" " * i + "- \n" for i in range(0, 6000, 1))
    _task_folder(root, md="---\nid: deep\ntitle: Deep\ntier: mini\nlabels:\n" + nested + "---\nDo it.\n")
    return ["tasks", "list"]


def _ledger_toml_deep(root: Path) -> list[str]:
    (root / "ledger.toml").write_text(_deep_toml())
    return ["run", "--task", "nothing"]


def _harbor_task_toml_deep(root: Path) -> list[str]:
    task = root / "harbor" / "deep"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text(_deep_toml())
    (task / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11\nWORKDIR /app\n")
    return ["tasks", "import", "harbor", str(root / "harbor"), "--out", str(root / "out")]


def _swebench_deep_json(root: Path) -> list[str]:
    (root / "repos").mkdir()
    (root / "sb.jsonl").write_text(_deep_json() + "\n")
    return ["tasks", "import", "swebench", str(root / "sb.jsonl"), "--repos", str(root / "repos"),
            "--out", str(root / "out")]


def _pricing_deep_json(root: Path) -> list[str]:
    (root / "prices.json").write_text(_deep_json())
    return ["costs", "--pricing", str(root / "prices.json")]


CASES = (
    Case("bundle-deep-json-200k", _bundle_deep_json, "bundle"),
    Case("bundle-deep-json-in-a-field", _bundle_deep_json_field, "bundle"),
    Case("bundle-deep-msgpack-entry", _bundle_deep_msgpack_entry, "entry-envelope", code=1),
    Case("task-md-deep-flow-yaml", _task_md_deep_yaml, "task.md"),
    Case("task-md-deep-block-yaml", _task_md_deep_block_yaml, "task.md"),
    Case("ledger-toml-deep", _ledger_toml_deep, "ledger.toml"),
    # an import skips the task with its reason (and exits 1: nothing imported)
    Case("harbor-task-toml-deep", _harbor_task_toml_deep, "nested too deeply", code=1, one_line=False),
    Case("swebench-jsonl-deep", _swebench_deep_json, "sb.jsonl"),
    Case("pricing-deep-json", _pricing_deep_json, "prices.json"),
)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_deeply_nested_input_is_one_line_and_exit_2(tmp_path: Path, case: Case) -> None:
    """The input is refused with exit 2 (an entry of a bundle: the failed check, exit 1) and one
    line naming it; no traceback."""
    args = case.make(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    proc = subprocess.run([*LEDGER, "--ledger", str(tmp_path / ".ledger"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == case.code, (proc.returncode, proc.stderr[-2000:])
    if case.one_line:
        assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert case.needle in proc.stderr, lines


def test_deep_pyproject_written_by_the_agent_is_unparsable_not_a_crash(tmp_path: Path) -> None:
    """Grading compares the agent's pyproject.toml pytest tables: one nested 200,000 levels deep
    is unparsable (and so a change), never a RecursionError in the harness."""
    from ledger.sandbox.grading import graded_changes

    (tmp_path / "repo").mkdir()
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / "pyproject.toml").write_text(_deep_toml())
    graded, dropped = graded_changes([{"path": "pyproject.toml", "status": "added"}], owned=(),
                                     hidden_dir="tests_hidden", repo_dir=tmp_path / "repo",
                                     worktree=tmp_path / "wt")
    assert graded == [] and dropped == [{"path": "pyproject.toml",
                                         "reason": "pyproject.toml [tool.pytest] changed"}]


def test_deep_json_line_from_an_agent_is_no_event_and_no_crash() -> None:
    """A transcript line nested 200,000 levels deep is not an event (the parser survives)."""
    from ledger.agents.parsers import BuiltinParser

    parser = BuiltinParser()
    assert parser.feed_line("[" + _deep_json() + "]") == []
    assert parser.feed_line('{"type": "agent.output", "text": "hi"}') == [
        ("agent.output", {"stream": "stdout", "text": "hi"})]


def test_deep_tool_input_from_an_agent_is_recorded_as_text() -> None:
    """A model's tool call whose input nests 500 levels (the codec refuses 64) is kept as its JSON
    text, so the event can be journaled instead of failing the run at append time."""
    from ledger.agents.capture import sanitize_event
    from ledger.agents.parsers import BuiltinParser
    from ledger.journal.codec import canonical_bytes

    deep = "[" * 500 + "]" * 500
    (event,) = BuiltinParser().feed_line('{"type": "tool.call", "tool": "bash", "input": ' + deep + "}")
    kind, data = sanitize_event(event, lambda s: s)
    assert kind == "tool.call" and isinstance(data["input"], str) and data["input"].startswith("[[[")
    canonical_bytes({"data": data})  # journalable
    shallow = sanitize_event(("tool.call", {"tool": "t", "input": {"a": [1, {"b": 2}]}}), lambda s: s)
    assert shallow[1]["input"] == {"a": [1, {"b": 2}]}
