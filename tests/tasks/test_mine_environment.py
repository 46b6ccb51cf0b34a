"""`ledger tasks mine --environment DOCKERFILE|requirements.txt`: a repository whose tests import a
dependency that is not installed next to eval-ledger is mined in containers of the named
environment; the mined tasks name it (and `needs: container`) and validate in it. Without the
environment the same commit is rejected: its tests cannot import the dependency here.

The container tests skip with the engine probe's reason where no container can run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.tasks.environments import kind_of, write_environment
from ledger.tasks.loader import load_task
from tests.sandbox.container.test_swebench_in_container import DEP, wheel
from tests.tasks.gitrepos import commit, init
from tests.tasks.test_importers import ledger

USES = f"from {DEP} import double\n\n\ndef twice(x):\n    return {{body}}\n"
TEST_ZERO = "from twice import twice\n\n\ndef test_zero():\n    assert twice(0) == 0\n"
TEST_FOUR = TEST_ZERO + "\n\ndef test_four():\n    assert twice(4) == 8\n"


@pytest.fixture(scope="module")
def podman() -> Any:
    from ledger.sandbox.container import engine

    result = engine.probe()
    if not result.runs:
        pytest.skip(result.reason)
    return engine.find_engine(result.engine)


def _repo(root: Path) -> tuple[Path, str]:
    """A repository whose code needs ``DEP``; its second commit fixes ``twice`` and adds a test."""
    repo = init(root / "repo")
    commit(repo, "start: twice() and its first test", {"twice.py": USES.format(body="double(x) + 1 - 1 + (x == 4)"),
                                                       "tests/test_twice.py": TEST_ZERO})
    fix = commit(repo, "fix twice(4): twice() must return double(x)",
                 {"twice.py": USES.format(body="double(x)"), "tests/test_twice.py": TEST_FOUR})
    return repo, fix


def _requirements(root: Path) -> Path:
    (root / "env").mkdir(parents=True)
    name = f"wheels/{DEP}-0.1-py3-none-any.whl"
    (root / "env" / "wheels").mkdir()
    (root / "env" / name).write_bytes(wheel())
    (root / "env" / "requirements.txt").write_text(f"# the repository's one dependency\n{name}\n")
    return root / "env" / "requirements.txt"


def _mine(home: Path, repo: Path, fix: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    result = ledger(home, "tasks", "mine", str(repo), "--commit", fix, "--allow-thin", *extra, "--json")
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def test_without_its_environment_the_commit_is_rejected(tmp_path: Path) -> None:
    assert importlib.util.find_spec(DEP) is None  # not next to eval-ledger
    repo, fix = _repo(tmp_path)
    result, report = _mine(tmp_path / ".ledger", repo, fix)
    assert result.exit_code == 1
    got = report["results"][0]
    # every test errors on import, before and after the fix: nothing passes, so nothing is mined
    assert not got["accepted"] and got["reason"].startswith("no test fails before and passes after"), got


def test_mined_with_requirements_the_task_names_its_environment_and_validates_in_it(
        podman: Any, tmp_path: Path) -> None:
    repo, fix = _repo(tmp_path)
    home = tmp_path / ".ledger"
    req = _requirements(tmp_path)
    result, report = _mine(home, repo, fix, "--environment", str(req))
    assert result.exit_code == 0, result.output
    got = report["results"][0]
    assert got["accepted"], got
    task = load_task(Path(got["folder"]))
    assert task.fail_to_pass == ("tests/test_twice.py::test_four",)
    assert task.pass_to_pass == ("tests/test_twice.py::test_zero",)
    assert task.needs == ("container",) and task.environment is not None
    assert task.environment.dockerfile == "environment/Dockerfile"
    name = f"wheels/{DEP}-0.1-py3-none-any.whl"
    assert (task.root / "environment" / name).read_bytes() == (req.parent / name).read_bytes()
    valid = ledger(home, "tasks", "validate", "--tier", "mined", "--json")
    assert valid.exit_code == 0, valid.output
    checked = json.loads(valid.stdout)["tasks"][0]
    assert checked["ok"] and checked["environment"]["source"] == "build"
    assert checked["environment"]["cached"] is True  # built once, while mining


def test_mined_with_a_dockerfile(podman: Any, tmp_path: Path) -> None:
    repo, fix = _repo(tmp_path)
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nRUN mkdir -p /usr/lib/python3/dist-packages && printf "
                          f"'def double(x):\\n    return 2 * x\\n' > /usr/lib/python3/dist-packages/{DEP}.py\n")
    result, report = _mine(tmp_path / ".ledger", repo, fix, "--environment", str(dockerfile))
    assert result.exit_code == 0, result.output
    task = load_task(Path(report["results"][0]["folder"]))
    assert (task.root / "environment" / "Dockerfile").read_text() == dockerfile.read_text()
    assert task.environment is not None and task.environment.context == "environment"


def test_environment_without_an_engine_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, fix = _repo(tmp_path)
    req = _requirements(tmp_path)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = ledger(tmp_path / ".ledger", "tasks", "mine", str(repo), "--commit", fix, "--environment", str(req))
    assert result.exit_code == 3, result.output
    assert "no container can run here" in result.stderr and "apt-get install podman" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name,kind", [("Dockerfile", "dockerfile"), ("app.dockerfile", "dockerfile"),
                                       ("Dockerfile.dev", "dockerfile"), ("requirements-dev.txt", "requirements")])
def test_environment_kinds(name: str, kind: str) -> None:
    assert kind_of(Path(name)) == kind


def test_bad_environment_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="neither a Dockerfile nor a requirements"):
        kind_of(tmp_path / "setup.cfg")
    req = tmp_path / "requirements.txt"
    req.write_text("../outside.whl\n")
    with pytest.raises(UsageError, match="leaves its folder"):
        write_environment(tmp_path / "task", req)
    req.write_text("missing-0.1-py3-none-any.whl\n")
    with pytest.raises(UsageError, match="is not a file beside it"):
        write_environment(tmp_path / "task", req)
