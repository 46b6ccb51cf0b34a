"""The engine probe (which engine, its version, does a container run, and why not) and the engine
configuration this machine class needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.errors import EngineFailed, EngineUnavailable
from ledger.sandbox.container import engine


def test_a_container_runs_here_and_the_probe_says_which_engine(podman: engine.Engine) -> None:
    found = engine.probe()
    assert found.runs and found.engine == podman.name and found.version and found.version[0].isdigit()
    assert found.base_image == engine.BASE_IMAGE and found.run_s is not None and found.run_s < 30


def test_no_engine_on_path_is_the_reason_and_an_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    found = engine.probe()
    assert not found.runs and found.engine is None
    assert "no container engine: podman or docker is not on PATH" in found.reason and "apt-get install" in found.reason
    with pytest.raises(EngineUnavailable) as err:
        engine.require()
    assert err.value.exit_code == 3 and "no container can run here" in str(err.value)


def test_a_missing_base_image_is_the_reason(podman: engine.Engine) -> None:
    found = engine.probe(image="localhost/ledger-no-such-image:1")
    assert not found.runs and found.version and "no base image localhost/ledger-no-such-image:1" in found.reason


def test_a_runtime_that_cannot_start_containers_is_the_reason(
        podman: engine.Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The engine works but its runtime fails every container: the probe quotes the runtime's error."""
    if podman.name != "podman":
        pytest.skip("containers.conf is podman's")
    conf = tmp_path / "containers.conf"
    conf.write_text('[engine]\nruntime = "ledger-no-such-runtime"\n')
    monkeypatch.setenv("LEDGER_CONTAINERS_CONF", str(conf))
    found = engine.probe()
    assert not found.runs and "ledger-no-such-runtime" in found.reason and "\n" not in found.reason


def test_an_engine_command_that_hangs_is_a_one_line_error(tmp_path: Path) -> None:
    fake = tmp_path / "podman"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    with pytest.raises(EngineFailed) as err:
        engine.Engine("podman", str(fake)).call(["info"], timeout=0.5)
    assert str(err.value) == "podman info did not finish in 0.5 s" and err.value.exit_code == 3


def test_configure_writes_the_settings_once_and_keeps_the_old_file(tmp_path: Path) -> None:
    conf = tmp_path / "containers" / "containers.conf"
    assert "written" in engine.configure(conf)
    text = conf.read_text()
    assert 'runtime = "runc"' in text and 'cgroup_manager = "cgroupfs"' in text and "default_ulimits = []" in text
    assert "already configured" in engine.configure(conf)
    conf.write_text('[engine]\nruntime = "crun"\n')
    assert "written" in engine.configure(conf)
    assert conf.read_text() == engine.CONTAINERS_CONF_TEXT
    assert conf.with_name("containers.conf.orig").read_text() == '[engine]\nruntime = "crun"\n'


def test_the_module_command_probes_with_exit_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`python -m ledger.sandbox.container probe`: exit 3 and one line when nothing runs."""
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = subprocess.run([sys.executable, "-m", "ledger.sandbox.container", "probe", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 3, out.stderr
    assert json.loads(out.stdout)["probe"]["runs"] is False
