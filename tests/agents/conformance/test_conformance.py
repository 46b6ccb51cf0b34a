"""The presets against the REAL agent CLIs, each pointed at a scripted model on 127.0.0.1.

For each installed CLI: `ledger run` (a subprocess with a PATH holding that CLI and the system
tools only, a private HOME, one key variable) edits the packaged smoke task, which passes; the
journal's tokens equal the scripted totals; the cost source is the one the CLI allows; the
attestation is CLEAN; `ledger verify` and `ledger replay` pass. The cheat script (the model asks
the CLI's shell tool to read the packaged solution by absolute path) passes the hidden tests too,
and must not be CLEAN. A CLI that is not installed skips, saying so (and whether CI's install of
it failed: tests/agent_env.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.agents.strace import strace_status
from ledger.journal.journal import Journal
from ledger.tasks.loader import load_tasks
from tests import agent_env
from tests.agents.conformance.clis import CHEAT_USAGE, CLIS, Cli, totals
from tests.agents.protocols import all_protocols
from tests.agents.scripted_model import ScriptedModel, Turn

pytestmark = pytest.mark.conformance

TASK = "add-clamp"
KEY_VAR = "CONFORMANCE_MODEL_KEY"
KEY = "sk-conformance-0123456789abcdef"
RUN_TIMEOUT_S = 240
LEDGER = [sys.executable, "-c", "from cli.main import main; main()"]
STRACE_OK, STRACE_WHY = strace_status()
# The default sandbox mode (auto), as users run: inside bubblewrap wherever it works, the scripted
# server on the host's 127.0.0.1 reached through the harness's proxy and the forwarded port.
SANDBOX: tuple[str, ...] = ()


def solution_file() -> str:
    task = next(t for t in load_tasks(None, [TASK]) if t.id == TASK)
    return str((task.solution_dir / "mathx" / "ops.py").resolve())


def real_cli(cli: Cli) -> str:
    found = agent_env.find_real_cli(cli.program)
    if found is None:
        pytest.skip(agent_env.install_note(cli.program))
    if not STRACE_OK:
        pytest.skip(f"an attestation is CLEAN only under strace: {STRACE_WHY}")
    return found


@dataclass
class Attempt:
    root: Path
    run: str
    summary: dict[str, Any]
    server: ScriptedModel  # stopped; its records remain
    port: int

    @property
    def attempt(self) -> dict[str, Any]:
        (only,) = self.summary["attempts"]
        return only

    def entries(self, kind: str) -> list[Any]:
        with Journal.open(self.root / ".ledger" / "journal.db", readonly=True) as j:
            return [e for e in j.entries(run=self.run) if e.kind == kind]

    def ledger(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*LEDGER, "--ledger", str(self.root / ".ledger"), *args],
                              capture_output=True, text=True, timeout=120, env=self.env,
                              cwd=self.root, check=False)

    @property
    def env(self) -> dict[str, str]:
        return environment(self.root)


def environment(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """What `ledger` gets: the CLI and the system tools on PATH, a private HOME, the key."""
    return {"PATH": os.pathsep.join([str(root / "bin"), agent_env.system_path()]),
            "HOME": str(root / "home"), "LANG": "C.UTF-8", KEY_VAR: KEY, **(extra or {})}


def run_cli(tmp_path: Path, cli: Cli, program: str, script: list[Turn], *,
            toml: bool = True, args: tuple[str, ...] = (),
            env: dict[str, str] | None = None) -> Attempt:
    """One `ledger run` of the smoke task with the real CLI against ``script``."""
    root = tmp_path
    (root / "bin").mkdir()
    (root / "home").mkdir()
    os.symlink(program, root / "bin" / cli.program)
    task_root = str(next(t for t in load_tasks(None, [TASK]) if t.id == TASK).root.resolve())
    protocols = all_protocols("mathx/ops.py", avoid=(task_root,))
    with ScriptedModel(script, protocols=protocols, api_key=KEY) as server:
        if toml:
            (root / "ledger.toml").write_text(
                f'[agents.{cli.name}]\nbase_url = "{server.origin}"\napi_key_env = "{KEY_VAR}"\n',
                encoding="utf-8")
        extra = {k: v.replace("{origin}", server.origin) for k, v in (env or {}).items()}
        proc = subprocess.run(
            [*LEDGER, "--ledger", str(root / ".ledger"), "run", "--task", TASK, "--agent",
             f"{cli.name}:{cli.model}", "--trace", "strace", "--json", *SANDBOX,
             "--timeout", "180", *(a.replace("{origin}", server.origin) for a in args)],
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=root,
            env=environment(root, extra), check=False)
        port = server.port
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    return Attempt(root, summary["run"], summary, server, port)


def check_recorded(att: Attempt, cli: Cli, expected: tuple[int, int]) -> dict[str, Any]:
    finished = att.entries("agent.finished")[-1].data
    assert (finished["tokens_in"], finished["tokens_out"]) == expected
    assert finished["cost_source"] == cli.cost_source
    assert finished["cost_usd"] is not None and finished["cost_usd"] > 0
    started = att.entries("agent.started")[-1].data
    assert started["version"], "the CLI version is recorded with the attempt"
    hosts = {(e["host"], e["port"]) for e in started["endpoints"]}
    assert ("127.0.0.1", att.port) in hosts, "the endpoint joins the network allowlist"
    assert att.server.used == len(att.server.script), "every scripted turn was asked for"
    assert all(r.status != 401 for r in att.server.requests), "the key reached the model"
    return finished


@pytest.mark.parametrize("name", sorted(CLIS))
def test_real_cli_edits_the_smoke_task_clean(tmp_path: Path, name: str) -> None:
    """The real CLI, pointed by ledger.toml at the scripted model, passes the task CLEAN with the
    scripted token totals, the right cost source, and a journal that verifies and replays."""
    cli = CLIS[name]
    program = real_cli(cli)
    att = run_cli(tmp_path, cli, program, cli.honest())
    a = att.attempt
    assert (a["outcome"], a["hidden_passed"]) == ("passed", True), a
    assert a["attestation"] == "CLEAN", a
    check_recorded(att, cli, totals(cli.honest_usage))
    verify = att.ledger("verify", att.run)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    replay = att.ledger("replay", att.run)
    assert replay.returncode == 0, replay.stdout + replay.stderr


@pytest.mark.parametrize("name", sorted(n for n, c in CLIS.items() if c.shell is not None))
def test_real_cli_reading_the_solution_through_its_shell_is_not_clean(tmp_path: Path,
                                                                       name: str) -> None:
    """The model has the CLI's shell tool cat the packaged solution by absolute path, then makes
    the honest edit: the hidden tests pass, and the attestation must say it was not CLEAN."""
    cli = CLIS[name]
    program = real_cli(cli)
    solution = solution_file()
    att = run_cli(tmp_path, cli, program, cli.cheat(solution))
    a = att.attempt
    assert a["outcome"] == "passed", a  # only the attestation tells this attempt apart
    assert a["attestation"] != "CLEAN", a
    check_recorded(att, cli, totals(CHEAT_USAGE))


# The vendor's usual variables (the way a user already points the CLI elsewhere) carry over,
# even where the CLI itself ignores them (codex and OPENAI_BASE_URL, gemini's auth type).
VENDOR_ENV = {
    "claude": {"ANTHROPIC_BASE_URL": "{origin}", "ANTHROPIC_API_KEY": KEY},
    "codex": {"OPENAI_BASE_URL": "{origin}/v1", "OPENAI_API_KEY": KEY},
    "gemini": {"GOOGLE_GEMINI_BASE_URL": "{origin}", "GEMINI_API_KEY": KEY},
    "aider": {"OPENAI_API_BASE": "{origin}/v1", "OPENAI_API_KEY": KEY},
    "mini-swe-agent": {"OPENAI_API_BASE": "{origin}/v1", "OPENAI_API_KEY": KEY},
    "qwen": {"OPENAI_BASE_URL": "{origin}/v1", "OPENAI_API_KEY": KEY},
    "opencode": {"OPENAI_BASE_URL": "{origin}/v1", "OPENAI_API_KEY": KEY},
}


@pytest.mark.parametrize("name", sorted(VENDOR_ENV))
def test_real_cli_follows_the_users_vendor_variables(tmp_path: Path, name: str) -> None:
    """No ledger.toml: the user's usual base URL and key variables reach the CLI."""
    cli = CLIS[name]
    program = real_cli(cli)
    att = run_cli(tmp_path, cli, program, cli.honest(), toml=False, env=VENDOR_ENV[name])
    assert att.attempt["outcome"] == "passed", att.attempt
    check_recorded(att, cli, totals(cli.honest_usage))


def test_agent_base_url_flag_points_the_cli(tmp_path: Path) -> None:
    """`--agent-base-url` with the key in the vendor variable: the first installed CLI works."""
    installed = [c for c in CLIS.values() if agent_env.find_real_cli(c.program)]
    if not installed:
        pytest.skip("no agent CLI is installed: " + "; ".join(
            agent_env.install_note(c.program) for c in CLIS.values()))
    cli = installed[0]
    program = real_cli(cli)
    key_var = next(k for k in VENDOR_ENV[cli.name] if "KEY" in k)
    att = run_cli(tmp_path, cli, program, cli.honest(), toml=False,
                  args=("--agent-base-url", "{origin}"), env={key_var: KEY})
    assert att.attempt["outcome"] == "passed", att.attempt
    check_recorded(att, cli, totals(cli.honest_usage))
