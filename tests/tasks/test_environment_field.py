"""The `environment` field of the task format: an image by tag or digest, or a Dockerfile and its
context; each bad value one clear TaskError naming task.md and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.errors import TaskError
from ledger.tasks.loader import load_task, task_summary
from ledger.tasks.model import Environment
from tests.tasks.helpers import make_task

DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /srv\nRUN true\nWORKDIR /srv/app\nCOPY . /srv/app\n"
DIGEST = "sha256:" + "ab" * 32


def task_with(tmp_path: Path, env: Any, files: dict[str, str] | None = None) -> Path:
    return make_task(tmp_path / "smoke", front={"environment": env}, files=files)


def test_image_by_tag_mounts_at_app(tmp_path: Path) -> None:
    """An environment alone does not say the host cannot run the task (``needs`` says that)."""
    task = load_task(task_with(tmp_path, {"image": "localhost/ledger-base:bookworm"}))
    assert task.environment == Environment(image="localhost/ledger-base:bookworm", workdir="/app")
    assert task.needs == ()
    assert task_summary(task)["environment"] == {"image": "localhost/ledger-base:bookworm", "workdir": "/app"}


def test_image_by_digest_and_own_workdir(tmp_path: Path) -> None:
    env = load_task(task_with(tmp_path, {"image": f"registry.example:5000/team/img@{DIGEST}",
                                         "workdir": "/work"})).environment
    assert env is not None and env.image.endswith(DIGEST) and env.workdir == "/work"  # type: ignore[union-attr]


def test_dockerfile_context_defaults_to_its_folder_and_workdir_to_its_last_workdir(tmp_path: Path) -> None:
    task = load_task(task_with(tmp_path, {"dockerfile": "environment/Dockerfile"},
                               {"environment/Dockerfile": DOCKERFILE, "environment/req.txt": "x\n"}))
    assert task.environment == Environment(dockerfile="environment/Dockerfile", context="environment",
                                           workdir="/srv/app")


def test_a_task_without_environment_is_summarised_as_before(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "smoke"))
    assert task.environment is None and task.needs == () and "environment" not in task_summary(task)


BAD = [
    ("both", {"image": "a:1", "dockerfile": "environment/Dockerfile"}, "exactly one of image or dockerfile"),
    ("neither", {"workdir": "/app"}, "exactly one of image or dockerfile"),
    ("not-a-map", "ubuntu:24.04", "expected a map"),
    ("unknown-key", {"image": "a:1", "pull": True}, "unknown key(s) ['pull']"),
    ("bad-reference", {"image": "Ubuntu Latest"}, "environment.image: not an image reference"),
    ("short-digest", {"image": "a@sha256:abc"}, "environment.image: not an image reference"),
    ("context-with-image", {"image": "a:1", "context": "environment"}, "context is only used with dockerfile"),
    ("missing-dockerfile", {"dockerfile": "environment/Nope"}, "environment/Nope does not exist"),
    ("climbing-dockerfile", {"dockerfile": "../Dockerfile"}, "environment.dockerfile"),
    ("context-is-hidden-tests", {"dockerfile": "environment/Dockerfile", "context": "tests"},
     "would put hidden ground truth into the image"),
    ("context-is-task-folder", {"dockerfile": "environment/Dockerfile", "context": "."},
     "would put hidden ground truth into the image"),
    ("relative-workdir", {"image": "a:1", "workdir": "app"}, "environment.workdir: expected an absolute"),
    ("root-workdir", {"image": "a:1", "workdir": "/"}, "environment.workdir: expected an absolute"),
]


@pytest.mark.parametrize("name,env,message", BAD, ids=[b[0] for b in BAD])
def test_bad_environment_is_one_clear_error(tmp_path: Path, name: str, env: Any, message: str) -> None:
    folder = task_with(tmp_path, env, {"environment/Dockerfile": DOCKERFILE})
    with pytest.raises(TaskError) as err:
        load_task(folder)
    text = str(err.value)
    assert message in text and "task.md: environment" in text and "\n" not in text
