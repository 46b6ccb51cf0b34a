"""A task's environment made ready: built once and cached by the content digest of its Dockerfile
and context, images found by tag, the `environment.ready` record, and one clear error per bad
input (a Dockerfile that fails to build, a pull that fails, a context with a link)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ledger.errors import EngineFailed, MalformedInput
from ledger.sandbox.container import engine, images

DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\nCOPY tool.py /app/\n"


def context(tmp_path: Path, dockerfile: str = DOCKERFILE, tool: str = "print('tool v1')\n") -> images.ImageRequest:
    ctx = tmp_path / "environment"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    (ctx / "tool.py").write_text(tool)
    return images.ImageRequest(dockerfile=ctx / "Dockerfile", context=ctx)


def run_in(podman: engine.Engine, ref: str, *argv: str) -> str:
    res = podman.call(["run", "--rm", "--network=none", ref, *argv], timeout=120, check=True)
    return res.stdout


def test_a_build_is_made_once_then_cached_by_content_digest(podman: engine.Engine, tmp_path: Path) -> None:
    request = context(tmp_path, tool=f"print('tool {time.time_ns()}')\n")  # a context no earlier run built
    first = images.ensure_image(podman, request)
    assert not first.cached and first.source == "build" and first.seconds > 0
    assert first.from_image == engine.BASE_IMAGE  # python:3.11-slim is not on this machine
    assert first.image_id.startswith("sha256:") and first.digest and first.build_digest
    assert "COPY tool.py" in first.log_tail and len(first.log_tail) <= images.LOG_LIMIT + 64
    assert run_in(podman, first.ref, "python", "/app/tool.py").startswith("tool ")
    start = time.monotonic()
    second = images.ensure_image(podman, request)
    took = time.monotonic() - start
    assert second.cached and second.seconds == 0.0 and second.image_id == first.image_id and took < 5
    data = second.as_data()
    assert data["cached"] is True and data["engine"] == podman.name and data["engine_version"] == podman.version()
    assert data["image_id"] == first.image_id and "build_log_tail" not in data


def test_a_changed_context_file_is_a_new_build(podman: engine.Engine, tmp_path: Path) -> None:
    one = images.ensure_image(podman, context(tmp_path / "a", tool="print('a')\n"))
    two = images.ensure_image(podman, context(tmp_path / "b", tool="print('b')\n"))
    assert one.build_digest != two.build_digest and one.image_id != two.image_id
    assert run_in(podman, two.ref, "python", "/app/tool.py") == "b\n"


def test_the_digest_covers_dockerfile_context_and_base(tmp_path: Path) -> None:
    request = context(tmp_path)
    assert request.dockerfile is not None and request.context is not None
    key = images.build_digest("podman", "sha256:1", request.dockerfile, request.context)
    assert key == images.build_digest("podman", "sha256:1", request.dockerfile, request.context)
    assert key != images.build_digest("podman", "sha256:2", request.dockerfile, request.context)
    assert key != images.build_digest("docker", "sha256:1", request.dockerfile, request.context)
    (request.context / "tool.py").chmod(0o755)
    assert key != images.build_digest("podman", "sha256:1", request.dockerfile, request.context)


def test_a_dockerfile_that_fails_to_build_says_so_with_its_log(podman: engine.Engine, tmp_path: Path) -> None:
    request = context(tmp_path, DOCKERFILE + "RUN echo ledger-build-attacker-ran && exit 7\n")
    with pytest.raises(images.ImageBuildFailed) as err:
        images.ensure_image(podman, request)
    assert str(err.value).startswith("build of Dockerfile failed:") and "\n" not in str(err.value)
    assert err.value.exit_code == 3 and "ledger-build-attacker-ran" in err.value.log_tail


def test_an_image_by_tag_is_used_as_found(podman: engine.Engine) -> None:
    ready = images.ensure_image(podman, images.ImageRequest(image=engine.BASE_IMAGE))
    assert ready.cached and ready.source == "image" and ready.ref == engine.BASE_IMAGE
    assert ready.image_id == podman.inspect_image(engine.BASE_IMAGE)["id"]


def test_a_pull_that_fails_is_one_line(podman: engine.Engine) -> None:
    with pytest.raises(EngineFailed) as err:
        images.ensure_image(podman, images.ImageRequest(image="127.0.0.1:9/ledger/none:1"), timeout=60)
    assert str(err.value).startswith("pull of 127.0.0.1:9/ledger/none:1 failed:") and "\n" not in str(err.value)


def test_a_link_in_the_context_is_refused(tmp_path: Path) -> None:
    request = context(tmp_path)
    assert request.context is not None
    (request.context / "keys").symlink_to("/etc/shadow")
    with pytest.raises(MalformedInput) as err:
        images.build_digest("podman", "x", request.context / "Dockerfile", request.context)
    assert "keys is a symbolic link" in str(err.value)


def test_a_request_names_one_thing() -> None:
    with pytest.raises(MalformedInput):
        images.ImageRequest()
    with pytest.raises(MalformedInput):
        images.ImageRequest(image="a:1", dockerfile=Path("Dockerfile"))
