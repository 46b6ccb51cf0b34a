"""A SWE-bench-style record whose dependency is not installed next to eval-ledger: imported with
``--environment`` it is marked `needs: container` (its tests cannot pass on this host), and in its
built environment (the repository's requirements.txt installed with pip, here a wheel the
repository vendors so no network is used) the reference patch passes the FAIL_TO_PASS and
PASS_TO_PASS ids and the unfixed tree does not. Run at the level of the container boxes (`ledger
run` does not use the container backend yet)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from ledger.sandbox.container import engine, images
from ledger.sandbox.container.backend import ContainerSandbox
from ledger.sandbox.port import GradingRequest
from ledger.tasks.importers import import_swebench
from ledger.tasks.loader import load_task
from ledger.tasks.model import Task
from tests.tasks.gitrepos import commit, git, init

PATH = "/usr/local/bin:/usr/bin:/bin"
DEP = "ledgerdep_not_on_this_host"


def wheel() -> bytes:
    """A minimal pure-Python wheel of ``DEP`` (pip installs it without an index)."""
    files = {f"{DEP}.py": b"def double(x):\n    return 2 * x\n",
             f"{DEP}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {DEP}\nVersion: 0.1\n".encode(),
             f"{DEP}-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            b"Tag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for name, data in files.items()) + f"{DEP}-0.1.dist-info/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in {**files, f"{DEP}-0.1.dist-info/RECORD": record.encode()}.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, str]:
    tmp = tmp_path_factory.mktemp("swe-env")
    clone = init(tmp / "repos" / "acme__dep")
    uses = f"from {DEP} import double\n\n\ndef twice(x):\n    return double(x)\n"
    wheel_name = f"vendor/{DEP}-0.1-py3-none-any.whl"
    (clone / "vendor").mkdir()
    (clone / wheel_name).write_bytes(wheel())
    git(clone, "add", wheel_name)
    base = commit(clone, "start", {"twice.py": uses.replace("double(x)", "x + x + 1"), "requirements.txt":
                                   f"{wheel_name}\n", "tests/test_twice.py":
                                   f"import {DEP}\n\n\ndef test_zero():\n    pass\n"})
    fix = commit(clone, "fix", {"twice.py": uses, "tests/test_twice.py": f"import {DEP}\nfrom twice import twice"
                                "\n\n\ndef test_zero():\n    pass\n\n\ndef test_twice():\n    assert twice(4) == 8\n"})
    record = {"repo": "acme/dep", "instance_id": "acme__dep-2", "base_commit": base,
              "patch": git(clone, "diff", base, fix, "--", "twice.py") + "\n",
              "test_patch": git(clone, "diff", base, fix, "--", "tests") + "\n",
              "problem_statement": "twice(4) is 9\n", "FAIL_TO_PASS": ["tests/test_twice.py::test_twice"],
              "PASS_TO_PASS": ["tests/test_twice.py::test_zero"], "python": "3.11"}
    data = tmp / "i.jsonl"
    data.write_text(json.dumps(record) + "\n")
    report = import_swebench(data, tmp / "repos", out=tmp / "out", environment=True)
    result = report.results[0]
    assert result.accepted, result.reason
    return load_task(tmp / "out" / "swebench" / "acme__dep-2"), result.reason


def test_the_record_needs_its_container_on_this_host(imported: tuple[Task, str]) -> None:
    task, reason = imported
    assert task.needs == ("container",) and reason.startswith("needs its container: on this host")
    assert task.environment is not None and task.environment.context == "repo"
    dockerfile = (task.root / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM python:3.11-slim\n") and "pip install" in dockerfile and "requirements.txt" in dockerfile


def _grade(podman: engine.Engine, task: Task, tmp: Path, *, solved: bool) -> subprocess.CompletedProcess[str]:
    env = task.environment
    assert env is not None and env.dockerfile and env.context
    ready = images.ensure_image(podman, images.ImageRequest(dockerfile=task.root / env.dockerfile,
                                                            context=task.root / env.context))
    f = {n: tmp / n for n in ("wt", "home", "scratch")}
    shutil.copytree(task.repo_dir, f["wt"])
    f["home"].mkdir()
    f["scratch"].mkdir()
    if solved:
        subprocess.run(["git", "apply", str(task.root / task.solution.patch)], cwd=f["wt"], check=True)  # type: ignore[operator]
    subprocess.run(["git", "apply", str(task.root / task.hidden_tests_patch)], cwd=f["wt"], check=True)  # type: ignore[operator]
    box = ContainerSandbox(podman.name).for_image(ready.ref).grading_box(
        GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"], path_env=PATH))
    try:
        argv = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", *task.fail_to_pass, *task.pass_to_pass]
        cmd = box.command(argv, {"PATH": PATH, "HOME": str(f["home"])})
        proc = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True, timeout=300,
                              pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec)
        assert box.failure(proc.returncode, proc.stderr) is None, proc.stderr
    finally:
        box.close()
    return proc


def test_the_reference_patch_passes_in_the_built_environment(podman: engine.Engine, imported: tuple[Task, str],
                                                             tmp_path: Path) -> None:
    task, _ = imported
    proc = _grade(podman, task, tmp_path, solved=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "PASSED tests/test_twice.py::test_twice" in proc.stdout and "PASSED tests/test_twice.py::test_zero" in proc.stdout


def test_the_unfixed_tree_fails_there(podman: engine.Engine, imported: tuple[Task, str], tmp_path: Path) -> None:
    task, _ = imported
    proc = _grade(podman, task, tmp_path, solved=False)
    assert proc.returncode == 1 and "FAILED tests/test_twice.py::test_twice" in proc.stdout, proc.stdout[-2000:]
    assert "PASSED tests/test_twice.py::test_zero" in proc.stdout  # the dependency imports: only the bug fails
