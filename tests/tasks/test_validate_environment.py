"""`ledger tasks validate` inside a task's environment: the oracle and the noop check run in
containers of the task's image (built once, cached), the image's digest goes into the task's
validation record; a Dockerfile that does not build fails that task only (its log's tail shown);
no engine where a task needs one is exit 3 with how to install one.

The container tests skip with the engine probe's reason where no container can run (as
tests/sandbox/container/ do); the no-engine and record tests run everywhere."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError
from ledger.tasks.loader import load_task
from ledger.tasks.validate import Check, ValidationResult
from ledger.tasks.validations import read_record, validated_image, write_records
from tests.tasks.test_importers import HARBOR, ledger

# Harbor tasks of the fixture's shape whose verifier needs a program only their image has: on
# this host the oracle cannot pass (so the import marks them `needs: container`), in the image it does.
IMAGE_ONLY = {
    "frob/task.toml": "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n",
    "frob/instruction.md": "# Make frob report ok\n\n`/app/state.txt` must say what the frob tool accepts.\n",
    "frob/environment/Dockerfile": (
        "FROM python:3.11-slim\nWORKDIR /app\n"
        "RUN mkdir -p /opt/frob && printf '#!/bin/sh\\ntest \"$(cat \"$1\")\" = accepted\\n' > /opt/frob/check"
        " && chmod 755 /opt/frob/check\nCOPY state.txt /app/\n"),
    "frob/environment/state.txt": "rejected\n",
    "frob/tests/test.sh": """\
        #!/bin/bash
        cd /app
        if /opt/frob/check /app/state.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
        """,
    "frob/solution/solve.sh": "#!/bin/bash\necho accepted > /app/state.txt\n",
    # A Dockerfile that cannot build: the task is marked, the others validate.
    "broken/task.toml": "version = \"1.0\"\n",
    "broken/instruction.md": "# Anything\n\nThe image of this task does not build.\n",
    "broken/environment/Dockerfile": "FROM python:3.11-slim\nRUN echo BUILD-STEP-RAN && exit 7\n",
    "broken/tests/test.sh": "#!/bin/bash\n/opt/never/there && echo 1 > /logs/verifier/reward.txt\n",
    "broken/solution/solve.sh": "#!/bin/bash\n/opt/never/there --fix\n",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def podman() -> Any:
    from ledger.sandbox.container import engine

    result = engine.probe()
    if not result.runs:
        pytest.skip(result.reason)
    return engine.find_engine(result.engine)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Harbor fixture's `wordcount`, `frob` and `broken` imported into a ledger home."""
    tmp = tmp_path_factory.mktemp("harbor-env")
    src = _write(tmp / "src", {**{k: v for k, v in HARBOR.items() if k.startswith("wordcount/")}, **IMAGE_ONLY})
    home = tmp / ".ledger"
    result = ledger(home, "tasks", "import", "harbor", str(src), "--json")
    assert result.exit_code == 0, result.output
    got = {r["name"]: r for r in json.loads(result.stdout)["results"]}
    assert got["frob"]["needs"] == ["container"] and got["broken"]["needs"] == ["container"], got
    assert got["wordcount"]["needs"] == []
    from ledger.sandbox.container import engine

    if engine.probe().runs:  # the import tried each in its container: frob is fair there, broken does not build
        assert got["frob"]["reason"].endswith("the oracle passes and the noop fails"), got["frob"]
        assert "in its environment too: environment (" in got["broken"]["reason"], got["broken"]
    return home


def _validate(home: Path, *tasks: str) -> tuple[Any, dict[str, Any]]:
    args = [a for t in tasks for a in ("--task", t)]
    result = ledger(home, "tasks", "validate", "--tier", "harbor", *args, "--json")
    return result, {t["task_id"]: t for t in json.loads(result.stdout)["tasks"]} if result.stdout else {}


def test_a_task_needing_its_image_validates_in_a_container_of_it(podman: Any, imported: Path) -> None:
    """The oracle passes and the noop fails only where /opt/frob/check exists: in the image."""
    result, got = _validate(imported, "frob")
    assert result.exit_code == 0, result.output
    frob = got["frob"]
    checks = {c["name"]: (c["passed"], c["detail"]) for c in frob["checks"]}
    assert checks["hidden-fails-before"][0] and checks["noop-agent-fails"][0]
    assert checks["hidden-passes-after"] == (True, "exit 0: reward 1 (outcomes: reward-file)")
    assert "host" not in checks  # needs: container is satisfied by the container
    env = frob["environment"]
    assert frob["sandbox"] == podman.name and env["source"] == "build"
    assert env["from_image"] == "localhost/ledger-base:bookworm"  # FROM python:3.11-slim replaced here
    assert env["digest"].startswith("sha256:") and env["image"].startswith("localhost/ledger-env:")


def test_the_same_task_on_this_host_cannot_pass(imported: Path) -> None:
    """Without its environment (--sandbox none) the task is refused on this host: proof the
    container test above ran in the image, not here."""
    result = ledger(imported, "tasks", "validate", "--tier", "harbor", "--task", "frob", "--sandbox", "none",
                    "--json")
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["tasks"][0]["checks"]}
    assert not checks["host"]["passed"] and "needs container" in checks["host"]["detail"]


def test_the_harbor_fixture_validates_in_its_container_and_records_the_digest(podman: Any, imported: Path) -> None:
    result, got = _validate(imported, "wordcount")
    assert result.exit_code == 0, result.output
    checks = {c["name"]: c for c in got["wordcount"]["checks"]}
    assert checks["hidden-fails-before"]["passed"] and "reward 0" in checks["hidden-fails-before"]["detail"]
    assert checks["hidden-passes-after"]["detail"] == "exit 0: reward 1 (outcomes: reward-file)"
    task = load_task(imported / "golden" / "harbor" / "wordcount")
    record = read_record(imported / "validated", task)
    assert record is not None and record.ok and record.task_hash == task.hash
    assert record.image_digest == got["wordcount"]["environment"]["digest"]
    assert validated_image(imported / "validated", task) == record.environment
    assert "build_log_tail" not in (record.environment or {})
    again, second = _validate(imported, "wordcount")  # the cache: nothing built the second time
    assert again.exit_code == 0 and second["wordcount"]["environment"]["cached"] is True
    assert second["wordcount"]["environment"]["digest"] == record.image_digest


def test_a_dockerfile_that_does_not_build_marks_its_task_and_the_others_validate(podman: Any,
                                                                                 imported: Path) -> None:
    result, got = _validate(imported, "broken", "wordcount")
    assert result.exit_code == 1 and "1 of 2 task(s) failed: broken" in result.stderr
    assert got["wordcount"]["ok"]
    broken = got["broken"]
    assert [c["name"] for c in broken["checks"]] == ["environment"]
    assert "build of Dockerfile failed" in broken["checks"][0]["detail"]
    assert "BUILD-STEP-RAN" in broken["build_log_tail"]  # the build ran, and its log's tail is shown
    text = ledger(imported, "tasks", "validate", "--tier", "harbor", "--task", "broken")
    assert text.exit_code == 1 and "build log (tail):" in text.stdout and "Traceback" not in text.output
    record = read_record(imported / "validated", load_task(imported / "golden" / "harbor" / "broken"))
    assert record is not None and not record.ok and record.environment is None


def test_no_engine_where_a_task_needs_one_is_exit_3_with_how_to_install(imported: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    empty = imported.parent / "no-engine-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))  # no podman, no docker
    result = ledger(imported, "tasks", "validate", "--tier", "harbor", "--task", "frob")
    assert result.exit_code == 3, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "frob needs a container" in lines[0] and "apt-get install podman" in lines[0]
    assert "Traceback" not in result.output


def _result(task_id: str, ok: bool, env: dict[str, Any] | None) -> ValidationResult:
    return ValidationResult(task_id, "harbor", ok, [Check("hidden-passes-after", ok, "x")], sandbox="podman",
                            environment=env)


def test_the_validated_image_is_that_of_the_last_passing_validation_of_this_exact_task(
        imported: Path, tmp_path: Path) -> None:
    task = load_task(imported / "golden" / "harbor" / "wordcount")
    env = {"image": "localhost/ledger-env:x", "digest": "sha256:" + "ab" * 32, "build_log_tail": "noise"}
    write_records(tmp_path, [_result(task.id, True, env)], [task], at="2026-12-02T00:00:00+00:00")
    assert validated_image(tmp_path, task) == {"image": "localhost/ledger-env:x", "digest": "sha256:" + "ab" * 32}
    changed = load_task(imported / "golden" / "harbor" / "wordcount")
    object.__setattr__(changed, "hash", "0" * 64)  # the task changed since it was validated
    assert validated_image(tmp_path, changed) is None
    write_records(tmp_path, [_result(task.id, False, env)], [task], at="2026-12-02T00:00:01+00:00")
    assert validated_image(tmp_path, task) is None  # a failed validation vouches for no image
    (tmp_path / "harbor" / "wordcount.json").write_text("[1, 2]")
    with pytest.raises(LedgerError, match="not a validation record"):
        read_record(tmp_path, task)


# --------------------------------------------------------------------------- SWE-bench in its environment


def test_a_swebench_record_validates_in_its_built_environment_and_not_without(
        podman: Any, swebench_task: tuple[Any, str], tmp_path: Path) -> None:
    """The instance's dependency (a wheel the repository vendors, installed by pip in the image's
    build from its requirements.txt) is not installed next to eval-ledger: in its environment the
    oracle passes and the noop fails; on this host, without it, the tests cannot import it."""
    import dataclasses
    import importlib.util

    from ledger.run.task_runner import task_confinement
    from ledger.tasks.runner import PLAIN
    from ledger.tasks.validate import run_command, validate_task
    from tests.sandbox.container.test_swebench_in_container import DEP

    task, _reason = swebench_task
    assert importlib.util.find_spec(DEP) is None  # not next to eval-ledger
    inside = validate_task(task, confinement=task_confinement("auto", [task]))
    checks = {c.name: c for c in inside.checks}
    assert inside.ok, [(c.name, c.detail) for c in inside.failed]
    assert checks["required-outcomes"].passed and checks["hidden-fails-before"].passed
    assert inside.environment is not None and inside.environment["source"] == "build"
    outside = validate_task(dataclasses.replace(task, needs=(), environment=None), confinement=PLAIN)
    failed = {c.name: c.detail for c in outside.failed}
    assert "required-outcomes" in failed and "PASS_TO_PASS tests/test_twice.py::test_zero" in failed["required-outcomes"]
    repo = tmp_path / "repo"
    import shutil

    shutil.copytree(task.repo_dir, repo)
    res = run_command(["python", "-c", f"import {DEP}"], repo)
    assert res.exit_code == 1 and f"No module named '{DEP}'" in res.output


@pytest.fixture(scope="module")
def swebench_task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    from tests.sandbox.container import test_swebench_in_container as swe

    return swe.imported.__wrapped__(tmp_path_factory)  # type: ignore[attr-defined]


def _swebench_records(tmp: Path) -> Path:
    """Two records of a repository whose dependency is a wheel it vendors: a fair one, and one whose
    reference patch does not fix the bug (fair nowhere)."""
    from tests.sandbox.container.test_swebench_in_container import DEP, wheel
    from tests.tasks.gitrepos import commit, git, init

    clone = init(tmp / "repos" / "acme__dep")
    uses = f"from {DEP} import double\n\n\ndef twice(x):\n    return double(x)\n"
    (clone / "vendor").mkdir()
    (clone / f"vendor/{DEP}-0.1-py3-none-any.whl").write_bytes(wheel())
    git(clone, "add", "vendor")
    base = commit(clone, "start", {"twice.py": uses.replace("double(x)", "x + x + 1"),
                                   "requirements.txt": f"vendor/{DEP}-0.1-py3-none-any.whl\n",
                                   "tests/test_twice.py": f"import {DEP}\n\n\ndef test_zero():\n    pass\n"})
    fix = commit(clone, "fix", {"twice.py": uses, "tests/test_twice.py": f"import {DEP}\nfrom twice import twice"
                                "\n\n\ndef test_zero():\n    pass\n\n\ndef test_twice():\n    assert twice(4) == 8\n"})
    wrong = commit(clone, "a wrong fix", {"twice.py": uses.replace("double(x)", "double(x) + 1")})
    common = {"repo": "acme/dep", "base_commit": base, "problem_statement": "twice(4) is 9\n",
              "test_patch": git(clone, "diff", base, fix, "--", "tests") + "\n",
              "FAIL_TO_PASS": ["tests/test_twice.py::test_twice"], "PASS_TO_PASS": ["tests/test_twice.py::test_zero"]}
    records = [{**common, "instance_id": "acme__dep-1", "patch": git(clone, "diff", base, fix, "--", "twice.py") + "\n"},
               {**common, "instance_id": "acme__dep-2", "patch": git(clone, "diff", base, wrong, "--", "twice.py") + "\n"}]
    data = tmp / "instances.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    return data


def test_swebench_import_with_environment_proves_each_record_in_its_environment(podman: Any, tmp_path: Path) -> None:
    data = _swebench_records(tmp_path)
    result = ledger(tmp_path / ".ledger", "tasks", "import", "swebench", str(data), "--repos",
                    str(tmp_path / "repos"), "--environment", "--json")
    assert result.exit_code == 0, result.output
    got = {r["name"]: r for r in json.loads(result.stdout)["results"]}
    fair = got["acme__dep-1"]
    assert fair["accepted"] and fair["needs"] == ["container"]
    assert "in its environment (localhost/ledger-env:" in fair["reason"]
    assert "the oracle passes and the noop fails" in fair["reason"]
    wrong = got["acme__dep-2"]  # on this host it fails for want of its dependency; in its image, on its merits
    assert not wrong["accepted"] and wrong["reason"].startswith("not fair in its environment: ")
    assert "FAIL_TO_PASS tests/test_twice.py::test_twice" in wrong["reason"]
