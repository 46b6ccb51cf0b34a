"""Pointing the CLI presets at an endpoint: base_url / api_key_env / vendor variables, turned into
what each CLI really honours; exact usage sources; the agent's virtualenv as its readable scope."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ledger.agents import resolve_agent
from ledger.agents.file_parsers import AiderParser, aider_analytics_usage
from ledger.agents.parsers import CodexParser, codex_rollout_model
from ledger.agents.presets import api_base
from ledger.errors import MalformedInput, UsageError
from ledger.run.config import parse_config
from tests.run.test_agents import fake_bin, make_ctx

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake claude/codex/gemini/aider/cursor-agent on PATH."""
    bindir = fake_bin(tmp_path, "claude", "codex", "gemini", "aider", "cursor-agent")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bindir


def invocation(tmp_path: Path, spec: str, table: dict | None = None):  # type: ignore[no-untyped-def]
    agent = resolve_agent(spec, config=table or {})
    return agent, agent.invocation(make_ctx(tmp_path))


@pytest.mark.parametrize("url,style,want", [
    ("http://127.0.0.1:8000", "openai", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000/v1/", "openai", "http://127.0.0.1:8000/v1"),
    ("https://gw.example/openai/v1", "openai", "https://gw.example/openai/v1"),
    ("http://127.0.0.1:8000/v1", "anthropic", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000", "anthropic", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1beta", "gemini", "http://127.0.0.1:8000"),
])
def test_base_url_is_completed_for_each_sdk(url: str, style: str, want: str) -> None:
    """A server root gets /v1 for OpenAI-style clients; Anthropic/Gemini SDKs add their own."""
    assert api_base(url, style) == want


@pytest.mark.parametrize("bad", ["ftp://x", "127.0.0.1:8000", "http://", "not a url"])
def test_a_base_url_that_is_not_http_is_refused(bad: str) -> None:
    """Only http(s)://HOST[:PORT][/PATH] is a base URL."""
    with pytest.raises(UsageError, match="base URL"):
        api_base(bad, "openai")


def test_codex_gets_the_config_flag_and_codex_api_key(tmp_path: Path, on_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """codex ignores OPENAI_BASE_URL and sends no key from OPENAI_API_KEY: the preset passes
    -c openai_base_url=... and CODEX_API_KEY, from the user's usual variables."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    agent, inv = invocation(tmp_path, "codex")
    assert 'openai_base_url="http://127.0.0.1:9/v1"' in inv.argv
    assert inv.argv[inv.argv.index('openai_base_url="http://127.0.0.1:9/v1"') - 1] == "-c"
    assert inv.env["CODEX_API_KEY"] == KEY and KEY in inv.secrets
    assert "127.0.0.1:9" in agent.endpoints()


def test_ledger_toml_base_url_and_key_variable_win(tmp_path: Path, on_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """[agents.claude] base_url / api_key_env beat the vendor variables; model from the spec."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-the-users-own-key")
    monkeypatch.setenv("MY_GATEWAY_KEY", KEY)
    table = {"claude": {"base_url": "http://127.0.0.1:7/v1", "api_key_env": "MY_GATEWAY_KEY"}}
    agent, inv = invocation(tmp_path, "claude:claude-sonnet-4-5", table)
    assert inv.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:7"
    assert inv.env["ANTHROPIC_API_KEY"] == KEY
    assert inv.env["HOME"] == str(tmp_path / "home")
    assert agent.name == "claude-claude-sonnet-4-5" and "--model" in inv.argv
    assert "127.0.0.1:7" in agent.endpoints() and "127.0.0.1:1" not in agent.endpoints()


def test_gemini_settings_select_the_api_key_auth(tmp_path: Path, on_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With a key, the private settings select gemini-api-key (else GOOGLE_GEMINI_BASE_URL is a
    gateway auth type headless mode rejects) and the base URL carries over."""
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:5")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    agent, inv = invocation(tmp_path, "gemini")
    settings = json.loads((tmp_path / "home" / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert inv.env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:5"
    assert inv.env["GEMINI_API_KEY"] == KEY
    assert "127.0.0.1:5" in agent.endpoints()


def test_aider_stays_offline_and_logs_exact_usage(tmp_path: Path, on_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """aider gets --openai-api-base, LITELLM_LOCAL_MODEL_COST_MAP, a non-empty price cache (no
    download at start) and --analytics-log in its private home."""
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:6/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    _agent, inv = invocation(tmp_path, "aider:openai/gpt-4o-mini")
    argv = list(inv.argv)
    assert argv[argv.index("--openai-api-base") + 1] == "http://127.0.0.1:6/v1"
    assert argv[argv.index("--analytics-log") + 1] == str(tmp_path / "home" / "aider-analytics.jsonl")
    assert "--no-analytics" in argv
    assert inv.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    cache = tmp_path / "home" / ".aider" / "caches" / "model_prices_and_context_window.json"
    assert json.loads(cache.read_text())  # non-empty: aider does not fetch it


def test_an_unset_key_variable_makes_the_agent_unavailable(tmp_path: Path, on_path: Path) -> None:
    """api_key_env naming an unset variable: not available, with the variable named."""
    agent = resolve_agent("codex", config={"codex": {"api_key_env": "NOT_SET_ANYWHERE"}})
    ok, reason = agent.available()
    assert not ok and "NOT_SET_ANYWHERE" in reason


def test_named_preset_table_and_agent_base_url(tmp_path: Path) -> None:
    """ledger.toml: a preset table by name or with preset = ...; --agent-base-url reaches every
    preset but leaves a named command agent alone; a bad key is refused with its name."""
    cfg = parse_config(
        '[agents.local-codex]\npreset = "codex"\nmodel = "gpt-5-codex"\n'
        'base_url = "http://127.0.0.1:8/v1"\n\n'
        '[agents.mybot]\ncommand = "mybot {prompt_file}"\n')
    table = cfg.agent_table()
    assert table["local-codex"]["preset"] == "codex"
    agent = resolve_agent("local-codex", config=table)
    assert (agent.name, agent.model, agent.base_url) == ("local-codex", "gpt-5-codex",
                                                         "http://127.0.0.1:8/v1")
    flagged = cfg.with_agent_base_url("http://127.0.0.1:4").agent_table()
    assert flagged["gemini"]["base_url"] == "http://127.0.0.1:4"
    assert flagged["local-codex"]["base_url"] == "http://127.0.0.1:8/v1"  # named: keeps its own
    assert "command" in flagged["mybot"]
    with pytest.raises(MalformedInput, match="base_urll"):
        parse_config('[agents.codex]\nbase_urll = "http://x"\n')
    with pytest.raises(MalformedInput, match="preset must be one of"):
        parse_config('[agents.x]\npreset = "nope"\n')


def test_codex_model_comes_from_its_rollout(tmp_path: Path) -> None:
    """codex --json names no model: the last turn_context of the newest rollout does."""
    day = tmp_path / ".codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    (day / "rollout-x.jsonl").write_text(
        '{"type":"session_meta","payload":{"model_provider":"openai"}}\n'
        '{"type":"turn_context","payload":{"model":"gpt-5.1-codex"}}\n'
        'not json\n')
    assert codex_rollout_model(tmp_path / ".codex") == "gpt-5.1-codex"
    parser = CodexParser(None, home=tmp_path)
    parser.feed_line('{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}')
    usage = parser.finish()
    assert (usage.model, usage.tokens_in, usage.tokens_out) == ("gpt-5.1-codex", 10, 2)
    assert codex_rollout_model(tmp_path / "nowhere") is None


def test_aider_exact_usage_beats_its_rounded_text(tmp_path: Path) -> None:
    """The analytics log's message_send counts replace the rounded "1.2k sent" figures."""
    (tmp_path / "aider-analytics.jsonl").write_text(
        '{"event":"launched","properties":{}}\n'
        '{"event":"message_send","properties":{"prompt_tokens":1234,"completion_tokens":56,'
        '"total_cost":0.01}}\n'
        '{"event":"message_send","properties":{"prompt_tokens":1000,"completion_tokens":4,'
        '"total_cost":0.02}}\n')
    parser = AiderParser("openai/gpt-4o-mini", home=tmp_path)
    parser.feed_line("Tokens: 1.2k sent, 56 received. Cost: $0.01 message, $0.01 session.")
    parser.feed_line("Tokens: 1.0k sent, 4 received. Cost: $0.01 message, $0.02 session.")
    usage = parser.finish()
    assert (usage.tokens_in, usage.tokens_out, usage.cost_usd) == (2234, 60, 0.02)
    assert aider_analytics_usage(tmp_path / "missing.jsonl") is None
    rounded = AiderParser(None, home=tmp_path / "no-log")
    rounded.feed_line("Tokens: 1.2k sent, 56 received.")
    assert rounded.finish().tokens_in == 1200  # no log: the text, rounded as aider printed it


def test_a_virtualenv_program_may_read_its_virtualenv_only(tmp_path: Path) -> None:
    """aider/mini-swe-agent live in a virtualenv: its root joins the readable scope; a program
    in a plain bin/ folder widens nothing beyond its own folder."""
    from ledger.run.attempt import agent_readable

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    prog = venv / "bin" / "aider"
    prog.write_text("#!/bin/sh\n")
    plain = tmp_path / "opt" / "bin" / "tool"
    plain.parent.mkdir(parents=True)
    plain.write_text("#!/bin/sh\n")

    class WS:
        worktree = tmp_path / "wt"

    class T:
        root = tmp_path / "task"

    WS.worktree.mkdir()
    T.root.mkdir()
    got = agent_readable([str(prog), str(plain)], WS, T)  # type: ignore[arg-type]
    assert str(venv.resolve()) in got
    assert str(plain.parent.resolve()) in got and str((tmp_path / "opt").resolve()) not in got


def test_mini_swe_agent_trajectory_gives_steps_tokens_cost_and_exit(tmp_path: Path) -> None:
    """mini-swe-agent's trajectory file: bash calls and results, exact usage summed over answers,
    the answering model, the reported cost and the exit status."""
    from ledger.agents.file_parsers import MINI_TRAJECTORY, MiniSweAgentParser

    def answer(cmd: str, tin: int, tout: int) -> dict:
        return {"role": "assistant", "content": "thinking",
                "tool_calls": [{"function": {"name": "bash",
                                             "arguments": json.dumps({"command": cmd})}}],
                "extra": {"response": {"model": "gpt-4o-mini-2024-07-18",
                                       "usage": {"prompt_tokens": tin, "completion_tokens": tout}}}}

    (tmp_path / MINI_TRAJECTORY).write_text(json.dumps({
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"exit_status": "Submitted", "model_stats": {"instance_cost": 0.0042}},
        "messages": [
            {"role": "system", "content": "x"}, {"role": "user", "content": "task"},
            answer("cat a.py", 100, 7), {"role": "tool", "content": "print(1)",
                                         "extra": {"returncode": 0}},
            answer("false", 120, 9), {"role": "tool", "content": "", "extra": {"returncode": 1}},
        ]}))
    parser = MiniSweAgentParser("openai/gpt-4o-mini", home=tmp_path)
    assert parser.feed_line("╭─ rich text ─╮") == []
    events = parser.flush()
    assert [(k, d.get("tool"), d.get("is_error")) for k, d in events] == [
        ("agent.output", None, None), ("tool.call", "bash", None), ("tool.result", "bash", False),
        ("agent.output", None, None), ("tool.call", "bash", None), ("tool.result", "bash", True),
        ("agent.output", None, None)]
    assert events[-1][1]["text"] == "[exit_status Submitted]"
    usage = parser.finish()
    assert (usage.tokens_in, usage.tokens_out, usage.cost_usd, usage.model) == (
        220, 16, 0.0042, "gpt-4o-mini-2024-07-18")
    assert parser.flush() == []  # read once
    missing = MiniSweAgentParser(None, home=tmp_path / "none")
    assert missing.flush() == [] and missing.finish().tokens_in is None


def test_qwen_uses_the_openai_auth_type_with_the_key_in_its_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """qwen: --auth-type openai --openai-base-url; the key only in OPENAI_API_KEY, not argv."""
    bindir = fake_bin(tmp_path, "qwen", "mini")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:3")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    agent, inv = invocation(tmp_path, "qwen:gpt-4o-mini")
    argv = list(inv.argv)
    assert argv[argv.index("--openai-base-url") + 1] == "http://127.0.0.1:3/v1"
    assert argv[argv.index("--auth-type") + 1] == "openai" and KEY not in " ".join(argv)
    assert inv.env["OPENAI_API_KEY"] == KEY and "127.0.0.1:3" in agent.endpoints()
    _mini, mini_inv = invocation(tmp_path / "m", "mini-swe-agent:openai/gpt-4o-mini")
    margv = list(mini_inv.argv)
    assert margv[margv.index("model.model_kwargs.api_base=http://127.0.0.1:3/v1") - 1] == "-c"
    assert KEY not in " ".join(margv) and mini_inv.env["OPENAI_API_KEY"] == KEY


def test_opencode_events_give_steps_exact_tokens_and_cost(tmp_path: Path) -> None:
    """opencode --format json: tool_use parts, text, per-step tokens (cache and reasoning
    counted) and costs summed; error events surface as output."""
    from ledger.agents.parsers import OpencodeParser

    parser = OpencodeParser("openai/gpt-4o-mini")
    lines = [
        {"type": "step_start", "part": {}},
        {"type": "tool_use", "part": {"tool": "read", "state": {
            "status": "completed", "input": {"filePath": "/w/a.py"}, "output": "x = 1"}}},
        {"type": "step_finish", "part": {"tokens": {"input": 900, "output": 40, "reasoning": 10,
                                                    "cache": {"read": 100, "write": 0}},
                                         "cost": 0.001}},
        {"type": "tool_use", "part": {"tool": "bash", "state": {
            "status": "error", "input": {"command": "false"}, "error": "exit 1"}}},
        {"type": "text", "part": {"text": "Done."}},
        {"type": "error", "error": {"name": "APIError", "data": {"message": "Cannot connect"}}},
        {"type": "step_finish", "part": {"tokens": {"input": 50, "output": 5}, "cost": 0.0005}},
    ]
    events = [ev for line in lines for ev in parser.feed_line(json.dumps(line))]
    assert [(k, d.get("tool"), d.get("is_error")) for k, d in events] == [
        ("tool.call", "read", None), ("tool.result", "read", False),
        ("tool.call", "bash", None), ("tool.result", "bash", True),
        ("agent.output", None, None), ("agent.output", None, None)]
    assert events[-1][1]["text"] == "[error] Cannot connect"
    usage = parser.finish()
    assert (usage.tokens_in, usage.tokens_out, usage.model) == (1050, 55, "openai/gpt-4o-mini")
    assert usage.cost_usd == pytest.approx(0.0015)


def test_gemini_router_and_main_model_are_each_priced_at_their_rate() -> None:
    """gemini routes through a small model first: result.stats.models names both, and the cost
    prices each at its own rate (not everything at the main model's)."""
    from ledger.agents.costs import estimate_cost
    from ledger.agents.parsers import GeminiParser

    parser = GeminiParser(None)
    parser.feed_line(json.dumps({"type": "init", "model": "auto"}))
    parser.feed_line(json.dumps({"type": "result", "status": "success", "stats": {
        "input_tokens": 1_100_000, "output_tokens": 1_010_000, "models": {
            "gemini-2.5-flash-lite": {"input_tokens": 100_000, "output_tokens": 10_000},
            "gemini-2.5-pro": {"input_tokens": 1_000_000, "output_tokens": 1_000_000}}}}))
    usage = parser.finish()
    assert usage.by_model == {"gemini-2.5-flash-lite": (100_000, 10_000),
                              "gemini-2.5-pro": (1_000_000, 1_000_000)}
    cost, source = estimate_cost(usage, "gemini")
    assert source == "priced"
    assert cost == pytest.approx(0.1 * 0.1 + 0.01 * 0.4 + 1.25 + 10.0)
    usage.by_model = {"gemini-2.5-pro": (1, 1), "mystery-router": (1, 1)}
    assert estimate_cost(usage, "gemini")[1] == "estimated"  # one unknown: no per-model price
