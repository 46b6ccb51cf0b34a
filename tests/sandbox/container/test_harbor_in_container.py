"""The Harbor import fixture (tests/tasks/test_importers.py) run the way Harbor runs it, at the
level of the container boxes: the task's image built from its environment/Dockerfile (once), the
agent in a container of it over the worktree, then the verifier (tests/test.sh) in a fresh
container with the tests mounted only then and the reward read from the verifier folder. The
oracle passes, the noop fails, and a cheat that reads /tests (and the task's tests folder) before
grading finds nothing there. The same task through `ledger run`: test_harbor_run.py."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ledger.sandbox.container import engine, images
from ledger.sandbox.container.backend import ContainerSandbox
from ledger.sandbox.port import AgentRequest, GradingRequest
from ledger.tasks.loader import load_task
from ledger.tasks.model import Task
from tests.tasks.test_importers import HARBOR

PATH = "/usr/local/bin:/usr/bin:/bin"
CHEAT = textwrap.dedent("""\
    #!/bin/sh
    for p in /tests/test_outputs.py "$TASK_TESTS/test_outputs.py" /solution/solve.sh /logs/verifier; do
      if cat "$p" >/dev/null 2>&1 || ls "$p" >/dev/null 2>&1; then echo "TRIED $p FOUND"; else echo "TRIED $p ABSENT"; fi
    done
    mkdir -p /logs/verifier 2>/dev/null && echo 1 > /logs/verifier/reward.txt && echo "TRIED reward WROTE" \\
      || echo "TRIED reward DENIED"
    """)


@pytest.fixture(scope="module")
def harbor_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """The fixture's `wordcount` task imported (the importer writes its environment)."""
    from ledger.tasks.importers import import_harbor

    src = tmp_path_factory.mktemp("harbor-src")
    for rel, text in HARBOR.items():
        if rel.startswith("wordcount/"):
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
    out = tmp_path_factory.mktemp("harbor-out")
    report = import_harbor(src / "wordcount", out=out)
    assert report.results[0].accepted, report.results[0].reason
    return load_task(out / "harbor" / "wordcount")


def _attempt(podman: engine.Engine, task: Task, tmp: Path, agent: str) -> dict[str, Any]:
    env = task.environment
    assert env is not None and env.dockerfile and env.context
    ready = images.ensure_image(podman, images.ImageRequest(dockerfile=task.root / env.dockerfile,
                                                            context=task.root / env.context))
    backend = ContainerSandbox(podman.name).for_image(ready.ref)
    folders = {n: tmp / agent / n for n in ("wt", "home", "scratch", "gwt", "ghome", "gscratch")}
    for p in folders.values():
        p.mkdir(parents=True)
    shutil.copytree(task.repo_dir, folders["wt"], dirs_exist_ok=True)
    vars_ = {"PATH": PATH, "HOME": str(folders["home"]), "LEDGER_WORKDIR": str(folders["wt"]),
             "TASK_TESTS": str(task.tests_dir)}
    argv = {"oracle": ["/bin/bash", str(task.solution_dir / "solve.sh")], "noop": ["/bin/true"],
            "cheat": ["/bin/sh", "-c", CHEAT]}[agent]
    readable = (str(task.solution_dir),) if agent == "oracle" else ()  # only the oracle sees its solution
    box = backend.agent_box(AgentRequest(worktree=folders["wt"], home=folders["home"], scratch=folders["scratch"],
                                         argv=tuple(argv), path_env=PATH, hidden=(str(task.root),) if not readable
                                         else (str(task.tests_dir),), extra_readable=readable))
    try:
        cmd = box.command(argv, vars_)
        agent_run = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True, timeout=120,
                                   pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec)
        assert box.failure(agent_run.returncode, agent_run.stderr) is None, agent_run.stderr
    finally:
        box.close()
    # Grading: a fresh tree and a fresh container; the tests mounted only now, the verifier folder empty.
    shutil.copytree(folders["wt"], folders["gwt"], dirs_exist_ok=True)
    verifier = folders["gscratch"] / "verifier"
    verifier.mkdir()
    grading = backend.grading_box(GradingRequest(worktree=folders["gwt"], home=folders["ghome"],
                                                 scratch=folders["gscratch"], path_env=PATH,
                                                 readable=(str(task.tests_dir),)))
    assert task.grading is not None
    try:
        cmd = grading.command(["/bin/sh", "-c", task.grading.command],
                              {"PATH": PATH, "HOME": str(folders["ghome"]), "LEDGER_WORKDIR": str(folders["gwt"]),
                               "LEDGER_TESTS_DIR": str(task.tests_dir), "LEDGER_VERIFIER_DIR": str(verifier)})
        graded = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True, timeout=300,
                                pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec)
        assert grading.failure(graded.returncode, graded.stderr) is None, graded.stderr
    finally:
        grading.close()
    reward = (verifier / "reward.txt").read_text().strip() if (verifier / "reward.txt").is_file() else None
    return {"ready": ready, "agent": agent_run.stdout + agent_run.stderr, "reward": reward,
            "grading": graded.stdout + graded.stderr}


def test_oracle_passes_in_the_task_container(podman: engine.Engine, harbor_task: Task, tmp_path: Path) -> None:
    got = _attempt(podman, harbor_task, tmp_path, "oracle")
    assert got["reward"] == "1", got["grading"]
    assert got["ready"].source == "build" and got["ready"].from_image == engine.BASE_IMAGE


def test_noop_fails_and_the_image_is_cached(podman: engine.Engine, harbor_task: Task, tmp_path: Path) -> None:
    got = _attempt(podman, harbor_task, tmp_path, "noop")
    assert got["reward"] == "0", got["grading"]
    assert got["ready"].cached  # built by the oracle's attempt (or an earlier run): nothing built now


def test_a_cheat_reading_tests_before_grading_is_contained(podman: engine.Engine, harbor_task: Task,
                                                            tmp_path: Path) -> None:
    got = _attempt(podman, harbor_task, tmp_path, "cheat")
    out = got["agent"]
    for path in ("/tests/test_outputs.py", f"{harbor_task.tests_dir}/test_outputs.py", "/solution/solve.sh",
                 "/logs/verifier"):
        assert f"TRIED {path} ABSENT" in out, out
    assert "TRIED reward DENIED" in out and "count_words" not in out
    assert got["reward"] == "0", got["grading"]
