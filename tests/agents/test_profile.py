"""The Agent port: every agent declares what it is (``AgentProfile``), and specs resolve through
a registry of names, schemes and table kinds; the run never probes an agent's class."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from ledger.agents import AgentProfile, register_scheme, resolve_agent
from ledger.agents.contracts import AttemptContext, Invocation
from ledger.agents.registry import SCHEMES
from ledger.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_the_oracle_alone_sees_the_solution() -> None:
    """The oracle's profile says it reads the solution (and the task root is handed to it); the
    other built-ins say they do not, and all run harness code without a model."""
    for spec in ("noop", "oracle", "demo", "replay:r1"):
        p = resolve_agent(spec).profile()
        assert (p.kind, p.runs_harness_code, p.uses_model) == ("builtin", True, False)
        assert p.sees_solution is (spec == "oracle")
        assert p.sandbox_argv == (sys.executable,) and p.endpoints == ()
    assert resolve_agent("oracle").profile().inputs == {"task_root"}
    assert resolve_agent("demo").profile().inputs == {"demo_steps"}
    assert resolve_agent("replay:r1").profile().inputs == {"replay_files"}
    assert resolve_agent("noop").profile().inputs == frozenset()


def test_replay_declares_the_run_it_replays() -> None:
    """``replay:RUN`` says which run it replays (the plan reads that run's files from the
    profile, not from the spec string); no other agent replays anything."""
    assert resolve_agent("replay:r-20261129T203000Z-1a2b3c").profile().replays == \
        "r-20261129T203000Z-1a2b3c"
    for spec in ("noop", "oracle", "demo", "cmd:/bin/echo replay:r1", "claude"):
        assert resolve_agent(spec).profile().replays is None


def test_a_cli_preset_uses_a_model_and_is_watched() -> None:
    """A CLI preset declares its model, its vendor's endpoints, its transcript parser and the
    live reach watch; it runs no harness code and tries no sandbox ahead."""
    p = resolve_agent("claude:claude-sonnet-4-5").profile()
    assert (p.kind, p.uses_model, p.watch_reach, p.runs_harness_code) == ("cli", True, True, False)
    assert p.model == "claude-sonnet-4-5" and p.transcript == "ClaudeParser"
    assert "api.anthropic.com" in p.endpoints and p.sandbox_argv == ()
    assert resolve_agent("codex").profile().transcript == "CodexParser"


def test_the_http_agent_stops_at_its_budgets() -> None:
    p = resolve_agent("http:m1@http://127.0.0.1:8000/v1").profile()
    assert (p.kind, p.uses_model, p.runs_harness_code, p.watch_reach) == ("http", True, True, False)
    assert p.inputs == {"budgets"} and p.model == "m1" and p.endpoints == ("127.0.0.1:8000",)


def test_a_command_declares_only_its_table_endpoints(tmp_path: Path) -> None:
    prog = tmp_path / "agent.sh"
    prog.write_text("#!/bin/sh\n", encoding="utf-8")
    prog.chmod(0o755)
    p = resolve_agent(f"cmd:{prog} --prompt-file {{prompt_file}}").profile()
    assert (p.kind, p.uses_model, p.runs_harness_code, p.model) == ("cmd", False, False, None)
    assert p.sandbox_argv == (str(prog), "--prompt-file", "{prompt_file}") and p.endpoints == ()
    table = {"mine": {"command": [str(prog)], "endpoints": ["llm.example:8443"]}}
    assert resolve_agent("mine", config=table).profile().endpoints == ("llm.example:8443",)


def test_a_profile_refuses_an_unknown_kind_or_input() -> None:
    with pytest.raises(ValueError, match="agent kind 'robot'"):
        AgentProfile(kind="robot")
    with pytest.raises(ValueError, match="secret_answers"):
        AgentProfile(kind="cmd", inputs=frozenset({"secret_answers"}))


class _EchoAgent:
    """A new kind of agent, plugged in by its scheme only."""

    def __init__(self, spec: str, rest: str) -> None:
        self.name, self.spec, self.rest = f"echo-{rest}", spec, rest

    def profile(self) -> AgentProfile:
        return AgentProfile(kind="cmd", sandbox_argv=("/bin/echo",))

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str | None:
        return None

    def invocation(self, ctx: AttemptContext) -> Invocation:
        return Invocation(argv=("/bin/echo", self.rest), env={})


def test_a_registered_scheme_resolves_and_is_listed() -> None:
    """``register_scheme`` plugs a new spec form in: it resolves, and an unknown spec's error
    names it among the known forms; a scheme registered twice is refused."""
    with pytest.raises(UsageError) as before:
        resolve_agent("echo:hi")
    assert "echo:WORD" not in str(before.value)
    register_scheme("echo", lambda spec, rest, table: _EchoAgent(spec, rest), "echo:WORD")
    try:
        agent = resolve_agent("echo:hi")
        assert isinstance(agent, _EchoAgent) and agent.name == "echo-hi"
        with pytest.raises(UsageError, match="echo:WORD"):
            resolve_agent("nonesuch")
        with pytest.raises(ValueError, match="twice"):
            register_scheme("echo", lambda spec, rest, table: _EchoAgent(spec, rest), "echo:X")
    finally:
        del SCHEMES["echo"]


def test_a_table_wins_over_a_scheme_and_a_preset_table_stays_a_preset() -> None:
    """``[agents.claude]`` without a command configures the preset; ``kind = "http"`` tables are
    the HTTP agent; a table with a command is a command, even if named after a preset."""
    cfg = {"agents": {"claude": {"model": "m2"},
                      "local": {"kind": "http", "model": "q", "base_url": "http://127.0.0.1:9/v1"},
                      "codex": {"command": ["/bin/true"]}}}
    assert resolve_agent("claude", config=cfg).profile().model == "m2"
    assert resolve_agent("local", config=cfg).profile().kind == "http"
    assert resolve_agent("codex", config=cfg).profile().kind == "cmd"


def test_no_code_probes_an_agent_for_its_kind() -> None:
    """Zero ``getattr(agent, "kind")`` (or ``agent.kind``) in the product: decisions read the
    profile. Found by walking the syntax tree of every module."""
    offenders = []
    for pkg in ("ledger", "cli", "evaluators", "attest"):
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" \
                        and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) \
                        and "agent" in node.args[0].id and isinstance(node.args[1], ast.Constant):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                if isinstance(node, ast.Attribute) and node.attr == "kind" \
                        and isinstance(node.value, ast.Name) and node.value.id == "agent":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_agent_port_imports_nothing_of_the_run() -> None:
    for path in (ROOT / "ledger/agents").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n == "ledger.run" or n.startswith("ledger.run.")]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
