"""`ledger run` on tasks with an `environment`, in podman (skipped with the probe's reason where no
engine runs a container): `--sandbox auto` picks the engine for them and bubblewrap (or none) for
the others; each image is made ready once per run, before any attempt, and journaled as
`environment.ready`; the attestation binds the image digest and `ledger verify` checks it is the
run's; a Dockerfile that does not build marks its task only; no engine is exit 3 before anything
runs; an image that changed since validation is refused unless `--allow-image-change`."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.sandbox.container import engine
from tests.tasks.helpers import make_task

# The hidden test passes only in the task's image (the marker its Dockerfile wrote) and with the
# fix: grading ran in a container of that image.
HIDDEN = ("from calc import add\n\n\ndef test_add_in_the_image():\n"
          "    assert open('/etc/ledger-env-marker').read().strip() == 'ENV-MARKER'\n"
          "    assert add(2, 3) == 5\n")
FIX_SH = """#!/bin/sh
echo "FIX-AGENT ran in $(pwd)"
printf 'def add(a, b):\\n    return a + b\\n\\n\\ndef neg(a):\\n    return -a\\n' > calc.py
"""
DEMO = [{"replace": "calc.py", "old": "return a - b", "new": "return a + b"}]


def _ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def _entries(home: Path, run: str) -> list[Any]:
    with Journal.open(home / "journal.db", readonly=True) as j:
        return list(j.entries(run=run))


def _runs(home: Path) -> list[str]:
    if not (home / "journal.db").exists():
        return []
    with Journal.open(home / "journal.db", readonly=True) as j:
        return [e.run for e in j.entries(kind="run.started")]


def _env_task(home: Path, task_id: str, dockerfile: str, **front: Any) -> Path:
    folder = make_task(home / "golden" / "smoke", task_id, front={
        "environment": {"dockerfile": "environment/Dockerfile", **front.pop("environment", {})},
        "completion_signals": [{"command": ["python", "-c", "from calc import add; assert add(1, 1) == 2"],
                                "expect_exit": 0}], **front},
        files={"environment/Dockerfile": dockerfile, "tests/test_add_hidden.py": HIDDEN})
    (folder / "demo.yaml").write_text(json.dumps(DEMO), encoding="utf-8")
    return folder


@pytest.fixture
def nonce() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def env_home(podman: engine.Engine, tmp_path: Path, nonce: str) -> Iterator[Path]:
    """A ledger home with one task, ``t-env``, whose Dockerfile builds a fresh image (the nonce
    makes its content new, so the first run builds it); the image is removed afterwards."""
    home = tmp_path / ".ledger"
    _env_task(home, "t-env", f"FROM {engine.BASE_IMAGE}\nRUN echo ENV-MARKER > /etc/ledger-env-marker "
                             f"&& echo {nonce} > /etc/ledger-env-nonce\n")
    yield home
    ids = {e.data["image_id"] for run in _runs(home) for e in _entries(home, run) if e.kind == "environment.ready"}
    for image_id in ids:
        podman.call(["rmi", "--force", image_id], timeout=120)


def _agent(tmp: Path) -> str:
    """The fixing agent in a folder the container's unprivileged user can reach (pytest's own
    temporary folders are 0700)."""
    import os
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="ledger-env-agent-"))
    os.chmod(tmp, 0o755)
    path = tmp / "fix.sh"
    path.write_text(FIX_SH)
    path.chmod(0o755)
    return f"cmd:{path}"


def _containers_of(podman: engine.Engine, image_id: str) -> list[str]:
    out = podman.call(["ps", "--all", "--filter", f"ancestor={image_id}", "--format", "{{.Names}}"]).stdout
    return [line for line in out.splitlines() if line.strip()]


def _run(home: Path, *args: str) -> tuple[Any, dict[str, Any], list[Any]]:
    res = _ledger(home, "run", "--json", "--task", *args)
    assert res.exit_code in (0, 1), res.output
    summary = json.loads(res.stdout)
    return res, summary, _entries(home, summary["run"])


def test_auto_runs_the_task_in_its_image_binds_the_digest_and_verifies(
        podman: engine.Engine, env_home: Path, tmp_path: Path) -> None:
    """A `cmd:` agent and the demo agent on a task with an environment under `--sandbox auto`: the
    image is built once (environment.ready, before the first attempt), both attempts pass (the
    hidden test reads the image's marker: graded in its container), each attestation binds the
    journaled digest, verify and replay are green, and no container of the image is left."""
    res, summary, entries = _run(env_home, "t-env", "--agent", _agent(tmp_path), "--agent", "demo")
    assert res.exit_code == 0, res.output
    kinds = [e.kind for e in entries]
    [ready] = [e for e in entries if e.kind == "environment.ready"]
    assert kinds.index("environment.ready") < kinds.index("attempt.started")
    assert ready.task == "t-env" and ready.data["backend"] == "podman" and ready.data["cached"] is False
    assert ready.data["source"] == "build" and ready.data["digest"].startswith("sha256:")
    assert "ENV-MARKER" in ready.data["build_log_tail"] and ready.data["build_s"] > 0
    started = next(e for e in entries if e.kind == "run.started")
    assert started.data["config"]["sandbox"] == "podman"
    rows = summary["attempts"]
    assert len(rows) == 2 and all(r["outcome"] == "passed" for r in rows), rows
    assert any("FIX-AGENT ran" in json.dumps(e.data) for e in entries if e.kind == "agent.output")
    atts = [e.data["attestation"] for e in entries if e.kind == "attestation"]
    assert len(atts) == 2
    for att in atts:
        assert att["environment"] == {"digests": [ready.data["digest"]], "image_ids": [ready.data["image_id"]]}
    grading = [e.data for e in entries if e.kind == "grading"]
    assert all(g["sandbox"]["backend"] == "podman" and g["sandbox"]["image"] == ready.data["image_id"]
               for g in grading)
    assert _ledger(env_home, "verify", summary["run"]).exit_code == 0
    assert _ledger(env_home, "replay", summary["run"]).exit_code == 0
    assert _containers_of(podman, ready.data["image_id"]) == []


def test_a_second_run_builds_nothing(podman: engine.Engine, env_home: Path, tmp_path: Path) -> None:
    """The same environment in a second run: found by its build digest, nothing built (cached,
    0 s, no build log), the same image id and digest; the attempt runs in it."""
    _res, _s, first = _run(env_home, "t-env", "--agent", _agent(tmp_path))
    res, summary, second = _run(env_home, "t-env", "--agent", _agent(tmp_path))
    [a] = [e.data for e in first if e.kind == "environment.ready"]
    [b] = [e.data for e in second if e.kind == "environment.ready"]
    assert a["cached"] is False and b["cached"] is True and b["build_s"] == 0
    assert "build_log_tail" not in b
    assert (b["image_id"], b["digest"], b["build_digest"]) == (a["image_id"], a["digest"], a["build_digest"])
    assert summary["attempts"][0]["outcome"] == "passed", res.output


def test_a_dockerfile_that_fails_to_build_marks_its_task_and_the_others_run(
        podman: engine.Engine, env_home: Path, tmp_path: Path) -> None:
    """A task whose Dockerfile fails: environment.failed with the build log's tail (the failing
    step's own output), its attempt a harness error (an infra failure), nothing of it run; the
    task with a good environment runs and passes."""
    _env_task(env_home, "t-broken", f"FROM {engine.BASE_IMAGE}\nRUN echo BUILD-BROKE-HERE && exit 7\n")
    _res, summary, entries = _run(env_home, "t-env", "--task", "t-broken", "--agent", _agent(tmp_path))
    [failed] = [e for e in entries if e.kind == "environment.failed"]
    assert failed.task == "t-broken" and "BUILD-BROKE-HERE" in failed.data["build_log_tail"]
    assert "build of Dockerfile failed" in failed.data["error"]
    rows = {r["task"]: r for r in summary["attempts"]}
    assert rows["t-env"]["outcome"] == "passed" and rows["t-broken"]["outcome"] == "error", rows
    [fin] = [e.data for e in entries if e.kind == "attempt.finished" and e.task == "t-broken"]
    assert fin["status"] == "error" and "environment is not ready" in fin["error"]
    assert not [e for e in entries if e.kind == "agent.started" and e.task == "t-broken"]
    from evaluators.stats_view import stats_of

    assert stats_of(entries, summary["run"])["infra"]["by_kind"]["harness"] == 1


def test_no_engine_refuses_before_anything_runs_exit_3(env_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No podman or docker on PATH: `ledger run` on a task with an environment is exit 3, one
    line saying how to install, and no run is journaled."""
    from ledger.sandbox import registry

    bare = env_home.parent / "bin"
    bare.mkdir()
    for tool in ("git", "strace", "bwrap"):
        if shutil.which(tool):
            (bare / tool).symlink_to(shutil.which(tool))  # type: ignore[arg-type]
    monkeypatch.setenv("PATH", str(bare))
    for name in registry.ENGINES:
        monkeypatch.setattr(registry.get(name), "_available", None)
    res = _ledger(env_home, "run", "--task", "t-env", "--agent", "demo")
    assert res.exit_code == 3, res.output
    line = res.stderr.strip()
    assert "\n" not in line and "t-env" in line and "apt-get install podman" in line
    assert _runs(env_home) == []


def test_an_image_changed_since_validation_is_refused_unless_allowed(
        podman: engine.Engine, env_home: Path, tmp_path: Path) -> None:
    """The task's last passing validation (`ledger tasks validate`'s record) ran in an image with
    another digest than the one built now (its base was rebuilt since, say): refused (exit 2, one
    line, no run); with --allow-image-change it runs and environment.ready records that."""
    from ledger.home import LedgerHome
    from ledger.tasks.loader import load_task
    from ledger.tasks.validations import ValidationRecord, record_path

    validated = "sha256:" + "0" * 64
    task = load_task(env_home / "golden" / "smoke" / "t-env")
    path = record_path(LedgerHome(env_home).validated_dir, task.tier, task.id)
    path.parent.mkdir(parents=True)
    record = ValidationRecord(task.id, task.tier, task.hash, True, "podman", "2026-12-01T00:00:00Z",
                              {"oracle": True}, {"digest": validated, "image_id": "sha256:" + "1" * 64})
    path.write_text(json.dumps(record.as_dict()), encoding="utf-8")
    res = _ledger(env_home, "run", "--task", "t-env", "--agent", _agent(tmp_path))
    assert res.exit_code == 2, res.output
    assert "--allow-image-change" in res.stderr and validated in res.stderr and "\n" not in res.stderr.strip()
    assert _runs(env_home) == []
    res, summary, entries = _run(env_home, "t-env", "--agent", _agent(tmp_path), "--allow-image-change")
    [ready] = [e.data for e in entries if e.kind == "environment.ready"]
    assert ready["image_changed"] == {"validated": validated, "allowed": True}
    assert ready["digest"] != validated and summary["attempts"][0]["outcome"] == "passed", res.output
    record = ValidationRecord(task.id, task.tier, task.hash, True, "podman", "2026-12-01T00:00:00Z",
                              {"oracle": True}, {"digest": ready["digest"], "image_id": ready["image_id"]})
    path.write_text(json.dumps(record.as_dict()), encoding="utf-8")  # validated with this very image
    res, _summary, entries = _run(env_home, "t-env", "--agent", _agent(tmp_path))
    assert res.exit_code == 0 and "image_changed" not in next(e.data for e in entries if e.kind == "environment.ready")


def test_a_tampered_environment_digest_is_a_verify_finding(
        podman: engine.Engine, env_home: Path, tmp_path: Path) -> None:
    """Tamper case: someone with write access rewrites environment.ready's digest (as if another
    image had been made ready) and rebuilds the Merkle tree. verify fails, and the audit of the
    entries as they now stand names the attestation whose bound digest is not the run's."""
    from evaluators.audit import audit_runs
    from ledger.journal.keys import load_verifier
    from tests.journal.tamper_cases import drop_triggers, raw_db, rebuild_tree, rewrite_entry

    _res, summary, entries = _run(env_home, "t-env", "--agent", _agent(tmp_path))
    [ready] = [e for e in entries if e.kind == "environment.ready"]
    forged = {**ready.data, "digest": "sha256:" + "f" * 64}
    with raw_db(env_home / "journal.db") as conn:
        drop_triggers(conn)
        rewrite_entry(conn, ready.seq, forged)
        rebuild_tree(conn)
    assert _ledger(env_home, "verify", summary["run"]).exit_code == 1
    tampered = _entries(env_home, summary["run"])
    with Journal.open(env_home / "journal.db", readonly=True) as j:
        report = audit_runs(tampered, public_key=load_verifier(env_home / "keys"),
                            root_at=lambda size: j.root_at(size))
    assert [f.check for f in report.findings if f.check == "environment-binding"] == ["environment-binding"]
    assert "sha256:" + "f" * 64 in next(f.message for f in report.findings if f.check == "environment-binding")

