"""The test session hides the machine's agent CLIs and keys (tests/agent_env.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests import agent_env


def test_no_agent_cli_on_the_tests_path() -> None:
    """No agent CLI is found on the PATH the tests (and the ledger they run) inherit."""
    found = {name: shutil.which(name) for name in agent_env.AGENT_PROGRAMS}
    assert {k: v for k, v in found.items() if v} == {}
    assert shutil.which("python3") and shutil.which("sh")  # the tools the tests need remain


def test_no_agent_variable_in_the_tests_environment() -> None:
    """No model key, base URL or CLI setting of the machine reaches the tests."""
    assert agent_env.agent_vars(os.environ) == []


def test_system_path_hides_an_installed_cli(tmp_path: Path) -> None:
    """A folder holding an agent CLI is mirrored without it; its other programs stay."""
    folder = tmp_path / "usr-bin"
    folder.mkdir()
    for name in ("codex", "claude", "git-like"):
        (folder / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (folder / name).chmod(0o755)
    path = agent_env.clean_path(str(folder), tmp_path / "mirrors")
    assert path != str(folder)
    assert shutil.which("codex", path=path) is None and shutil.which("claude", path=path) is None
    assert shutil.which("git-like", path=path)


def test_agent_vars_names_keys_and_endpoints() -> None:
    """Keys, base URLs and CLI settings are agent variables; ordinary ones are not."""
    env = {"ANTHROPIC_BASE_URL": "x", "OPENAI_API_KEY": "x", "GEMINI_API_KEY": "x",
           "OPENAI_API_BASE": "x", "CODEX_HOME": "x", "MY_SERVICE_API_KEY": "x",
           "GITHUB_TOKEN": "x", "HOME": "/root", "LANG": "C", "PATH": "/bin"}
    assert agent_env.agent_vars(env) == ["ANTHROPIC_BASE_URL", "CODEX_HOME", "GEMINI_API_KEY",
                                         "GITHUB_TOKEN", "MY_SERVICE_API_KEY", "OPENAI_API_BASE",
                                         "OPENAI_API_KEY"]
