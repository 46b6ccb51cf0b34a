"""The extra rounds through the runner API: tests executed, cross-review, static checks, swap."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from evaluators.leaderboard import leaderboard_from_entries, replay_leaderboard
from ledger.bench import checks
from ledger.bench.inputs import task_from_prompt
from ledger.bench.runner import BenchOptions, run_bench
from ledger.home import LedgerHome
from tests.bench.conftest import BenchEnv, check_documented

RUFF_ONLY = {"ruff": checks.find_tool("ruff"), "mypy": None, "pytest": sys.executable}


def test_tests_review_static_and_swap_rounds(env: BenchEnv) -> None:
    """Every round runs for real: tests execute, reviews never self-review, deltas and flips."""
    env.fakes(claude={"code": "good", "tests": "good", "revised": "solid"},
              codex={"code": "bad", "tests": "failing", "revised": "solid"},
              gemini={"judge": "first_best"})
    lines: list[str] = []
    opts = BenchOptions(agents=("claude", "codex"), judges=("gemini",), with_tests=True,
                        with_review=True, with_test_review=True, with_static=True,
                        swap_check=True, timeout_s=60, seed=3, tools=RUFF_ONLY, project="/p")
    result = run_bench(LedgerHome(env.ledger), task_from_prompt("Write add(a, b) in solution.py"),
                       opts, progress=lines.append)
    assert result.exit_code == 0
    entries = env.entries()
    by_kind: dict[str, list[Any]] = {}
    for e in entries:
        by_kind.setdefault(e.kind, []).append(e.data)

    # reviews: each author reviewed by the other agent only, for code and for tests
    pairs = {(r["round"], r["author"], r["reviewer"]) for r in by_kind["bench.review"]}
    assert pairs == {("code", "claude", "codex"), ("code", "codex", "claude"),
                     ("tests", "claude", "codex"), ("tests", "codex", "claude")}
    rounds = sorted((r["agent"], r["round"]) for r in by_kind["bench.response"])
    assert rounds == [(a, r) for a in ("claude", "codex")
                      for r in ("code", "code_revised", "tests", "tests_revised")]

    # the agents' own tests were executed with pytest: claude's pass, codex's fail
    tests = {(t["agent"], t["round"]): t for t in by_kind["bench.tests"]}
    assert tests[("claude", "tests")]["ran"] and tests[("claude", "tests")]["counts"]["passed"] == 1
    assert tests[("codex", "tests")]["counts"]["failed"] == 1
    assert tests[("codex", "tests")]["exit_code"] == 1

    # static checks: ruff ran on the answer, mypy is reported missing, pytest ran the tests
    static = {s["agent"]: s for s in by_kind["bench.static"]}
    assert static["claude"]["checks"]["ruff"]["exit_code"] in (0, 1)
    assert static["claude"]["checks"]["mypy"] is None
    assert static["claude"]["reasons"]["mypy"] == "mypy is not installed"
    assert static["claude"]["checks"]["pytest"]["ok"] is True
    assert static["codex"]["checks"]["pytest"]["ok"] is False

    view = leaderboard_from_entries(entries)
    rows = {r["provider"]: r for r in view["rows"]}
    assert rows["claude"]["tests_pass"] is True and rows["codex"]["tests_pass"] is False
    assert rows["claude"]["test_score"] is not None
    q = rows["claude"]
    assert q["quality"] == round((q["code_score"] + q["test_score"]) * 2.5 + 1e-9)
    assert rows["codex"]["adversarial_delta"] is not None
    # the first-position judge flips every pair when the order is reversed
    assert view["swap"]["checked"] and view["swap"]["pairs"] == 4 and view["swap"]["flips"] == 4
    assert replay_leaderboard(entries, result.run_id)["reproduced"]
    assert any(line.startswith("tests of codex (tests): 0 passed, 1 failed") for line in lines)
    check_documented(entries)


def test_lone_agent_gets_no_review(env: BenchEnv) -> None:
    """With one agent there is nobody else to review it: the skip is journaled, no self-review."""
    env.fakes(claude={"code": "good"})
    opts = BenchOptions(agents=("claude",), judges=("offline",), with_review=True, timeout_s=30,
                        sandbox="none")  # the fakes' prompt log is outside a box
    run_bench(LedgerHome(env.ledger), task_from_prompt("Write add(a, b)"), opts)
    reviews = [e.data for e in env.entries("bench.review")]
    assert reviews == [{"author": "claude", "reviewer": None, "round": "code",
                        "status": "skipped", "reason": "no other agent answered to review it"}]
    check_documented(env.entries())
    assert not [p for p in env.prompts() if p["prompt"].startswith("You are reviewing")]


def test_agent_that_writes_files_instead_of_answering(env: BenchEnv, tmp_path: Path) -> None:
    """Files an agent leaves in its folder are added to its answer as FILE blocks."""
    script = env.bin / "filebot"
    env.bin.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\nprintf 'def add(a, b):\\n    return a + b\\n' > solution.py\n"
                      "echo done\n")
    script.chmod(0o755)
    opts = BenchOptions(agents=(f"cmd:{script}",), judges=("offline",), timeout_s=30)
    run_bench(LedgerHome(env.ledger), task_from_prompt("Write add(a, b)"), opts)
    resp = env.entries("bench.response")[0].data
    assert resp["files_collected"] == ["solution.py"]
    assert "# FILE: solution.py\ndef add(a, b):" in resp["text"]


@pytest.mark.slow
def test_static_checks_run_mypy_when_installed() -> None:
    """mypy finds a type error in an answer (slow: a cold mypy run)."""
    if checks.find_tool("mypy") is None:
        pytest.skip("mypy is not installed here")
    res = checks.static_checks({"a.py": "def f(x: int) -> str:\n    return x\n"}, {}, "python")
    assert res["checks"]["mypy"]["errors"] == 1 and res["checks"]["mypy"]["ok"] is False


def test_static_checks_for_unknown_and_typescript_without_tools() -> None:
    """Missing checkers are null with a reason, never a pass."""
    res = checks.static_checks({"a.ts": "let x: number = 1\n"}, {}, "typescript",
                               tools={"tsc": None, "jest": None})
    assert res["checks"]["tsc"] is None and res["reasons"]["tsc"] == "tsc is not installed"
    assert res["checks"]["jest"] is None
    other = checks.static_checks({"a.rb": "x"}, {}, "ruby", tools={})
    assert other["checks"] == {} and "ruby" in other["reasons"]["all"]


def test_sandbox_refuses_names_that_escape(tmp_path: Path) -> None:
    """An answer cannot write outside the check folder."""
    with checks.CheckFolder() as box:
        written = box.write({"ok.py": "x = 1\n", "../../escape.py": "x"})
        assert written == ["ok.py"]
        assert not (box.root.parent / "escape.py").exists()


def test_kill_run_processes_kills_only_that_run() -> None:
    """On Ctrl-C the bench kills the processes marked with its run id, and no others."""
    import os
    import subprocess

    from ledger.bench.calls import kill_run_processes

    mine = subprocess.Popen(["sleep", "30"], env={**os.environ, "LEDGER_ATTEMPT": "b-x/bench-code/a/1/1#n"})
    other = subprocess.Popen(["sleep", "30"], env={**os.environ, "LEDGER_ATTEMPT": "b-y/bench-code/a/1/1#n"})
    try:
        assert kill_run_processes("b-x") == 1
        assert mine.wait(timeout=5) == -9
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
