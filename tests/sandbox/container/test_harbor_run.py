"""A Harbor task folder end to end through `ledger tasks import harbor` and `ledger run` (skipped
with the probe's reason where no engine runs a container): its `environment/Dockerfile` (FROM the
base image `.ci/run` builds, no network) built once and journaled, each agent in a container of
it, `tests/test.sh` in a fresh one, the reward read from the verifier folder. The oracle passes,
the noop fails, and a `cmd:` cheat that writes reward files wherever it can reach does not pass.
One run holds every agent; each case below reads its own attempt of it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.sandbox.container import engine
from tests.tasks.test_importers import HARBOR

REWARD_CHEAT = """#!/bin/sh
echo "CHEAT-REWARD ran as uid $(id -u) in $(pwd)"
echo 1 > reward.txt && echo "WROTE worktree/reward.txt"
echo 1 > "$HOME/reward.txt" && echo "WROTE home/reward.txt"
mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt && echo "WROTE worktree/logs/verifier/reward.txt"
for d in /logs/verifier /tests /solution; do
  if mkdir -p "$d" 2>/dev/null && echo 1 > "$d/reward.txt" 2>/dev/null; then echo "WROTE $d"; else echo "DENIED $d"; fi
done
for p in /tests/test_outputs.py /tests/test.sh /solution/solve.sh; do
  if cat "$p" >/dev/null 2>&1; then echo "READ $p"; else echo "ABSENT $p"; fi
done
echo "VERIFIER-VAR=${LEDGER_VERIFIER_DIR:-unset}"
"""
# test.sh runs `python -m pytest` in the graded tree: a pytest.py there is what runs.
SHADOW_CHEAT = """#!/bin/sh
echo "CHEAT-SHADOW ran in $(pwd)"
printf 'import sys\\nprint("SHADOW-PYTEST")\\nsys.exit(0)\\n' > pytest.py
"""

# An agent that follows the instruction literally: it edits /app/wordcount.py (the task's workdir).
APP_AGENT = """#!/bin/sh
echo "APP-AGENT in $(pwd)"
printf 'def count_words(text):\\n    return len(text.split())\\n' > /app/wordcount.py
"""

# (case, agent spec or cheat script, outcome wanted, what its own output proves it did)
CASES = [
    ("oracle", "oracle", "passed", ()),
    ("noop", "noop", "failed", ()),
    ("fixes-app-wordcount-as-instructed", APP_AGENT, "passed", ("APP-AGENT in /app",)),
    ("reward-file-written-by-the-agent", REWARD_CHEAT, "failed",
     ("CHEAT-REWARD ran as uid 1000", "WROTE worktree/reward.txt", "WROTE home/reward.txt",
      "WROTE worktree/logs/verifier/reward.txt", "DENIED /logs/verifier", "DENIED /tests", "ABSENT /tests/test_outputs.py",
      "ABSENT /solution/solve.sh", "VERIFIER-VAR=unset")),
    ("pytest-shadowed-in-the-worktree", SHADOW_CHEAT, "failed", ("CHEAT-SHADOW ran",)),
]
# A forged pass the real run cannot tell apart: the canary run (test.sh again over the mutant tests)
# passes too, so the attempt is DIRTY and not passed (reward-file tasks have canaries, issue 20).
CAUGHT_BY_CANARIES = {"pytest-shadowed-in-the-worktree"}


def _ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def harbor_run(podman: engine.Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The fixture's `wordcount` Harbor folder (its Dockerfile FROM the base image) imported into a
    fresh ledger home, then one `ledger run` of every case's agent; the image is removed after."""
    tmp = tmp_path_factory.mktemp("harbor-run")
    src = tmp / "src"
    for rel, text in HARBOR.items():
        if rel.startswith("wordcount/"):
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            body = textwrap.dedent(text)
            if rel.endswith("Dockerfile"):
                body = body.replace("FROM python:3.11-slim", f"FROM {engine.BASE_IMAGE}\nRUN echo {tmp.name} "
                                    "> /etc/ledger-harbor-run")  # a fresh image: this run builds it
            path.write_text(body)
    home = tmp / ".ledger"
    imported = _ledger(home, "tasks", "import", "harbor", str(src), "--json")
    assert imported.exit_code == 0, imported.output
    # cmd: scripts in a folder the container's uid 1000 can reach (pytest's own are 0700)
    agents_dir = Path(tempfile.mkdtemp(prefix="ledger-harbor-agents-"))
    os.chmod(agents_dir, 0o755)
    specs: dict[str, str] = {}
    for case, agent, _want, _proof in CASES:
        if agent.startswith("#!"):
            script = agents_dir / f"{case}.sh"
            script.write_text(agent)
            script.chmod(0o755)
            agent = f"cmd:{script}"
        specs[case] = agent
    args = [a for spec in specs.values() for a in ("--agent", spec)]
    res = _ledger(home, "run", "--task", "wordcount", *args, "--trace", "none", "--json")
    assert res.exit_code in (0, 1), res.output
    summary = json.loads(res.stdout)
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary["run"]))
    yield {"home": home, "summary": summary, "entries": entries, "specs": specs}
    shutil.rmtree(agents_dir, ignore_errors=True)
    for e in entries:
        if e.kind == "environment.ready":
            podman.call(["rmi", "--force", e.data["image_id"]], timeout=120)


def _attempt_of(run: dict[str, Any], case: str) -> tuple[dict[str, Any], list[Any]]:
    """(the summary row of the case's agent, the journal entries of its attempt)."""
    spec = run["specs"][case]
    name = spec if not spec.startswith("cmd:") else "cmd-" + Path(spec[4:]).stem
    [row] = [r for r in run["summary"]["attempts"] if r["agent"] == name]
    return row, [e for e in run["entries"] if e.data.get("attempt") == row["attempt"]]


def test_the_harbor_image_is_built_once_and_every_attempt_runs_and_is_graded_in_it(harbor_run: dict[str, Any]) -> None:
    """One environment.ready (built now, from the Dockerfile FROM the base image) before the first
    attempt; every agent box and grading box of the run names that image id; the run verifies."""
    entries = harbor_run["entries"]
    [ready] = [e for e in entries if e.kind == "environment.ready"]
    assert ready.task == "wordcount" and ready.data["source"] == "build" and ready.data["cached"] is False
    assert "from_image" not in ready.data  # FROM names the base image itself: nothing replaced
    kinds = [e.kind for e in entries]
    assert kinds.index("environment.ready") < kinds.index("attempt.started")
    gradings = [e.data for e in entries if e.kind == "grading"]
    assert len(gradings) == len(CASES)
    assert {(g["sandbox"]["backend"], g["sandbox"]["image"]) for g in gradings} == {
        (ready.data["backend"], ready.data["image_id"])}
    for att in (e.data["attestation"] for e in entries if e.kind == "attestation"):
        assert att["environment"]["digests"] == [ready.data["digest"]]
    assert _ledger(harbor_run["home"], "verify", harbor_run["summary"]["run"]).exit_code == 0


@pytest.mark.parametrize("case,agent,want,proof", CASES, ids=[c[0] for c in CASES])
def test_harbor_attempt_outcome(harbor_run: dict[str, Any], case: str, agent: str, want: str,
                                proof: tuple[str, ...]) -> None:
    """The case's attempt completed (no harness error) with the outcome wanted: the verifier's
    reward decides, and a reward file the agent wrote anywhere it could reach decides nothing.
    A cheat's own output proves it ran and what it reached."""
    row, entries = _attempt_of(harbor_run, case)
    output = "".join(json.dumps(e.data) for e in entries if e.kind == "agent.output")
    for line in proof:
        assert line in output, (line, output[-2000:])
    assert row["status"] == "completed", row
    [result] = [e.data for e in entries if e.kind == "test.result" and e.data.get("suite") == "hidden"]
    assert result["outcomes"] == "reward-file"
    assert row["outcome"] == want, (row, result)
    [canaries] = [e.data["canaries"] for e in entries if e.kind == "canary.result"]
    if case in CAUGHT_BY_CANARIES:  # the real run's forged reward passed; so did the canary run
        assert result["passed"] is True and row["attestation"] == "DIRTY", (row, result)
        assert canaries["passed"] == len(canaries["canaries"]) > 0, canaries
    else:
        assert canaries["passed"] == 0 and row["attestation"] != "DIRTY", (row, canaries)
