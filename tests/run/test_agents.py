"""Agent specs, presets (fed captured-style output), built-in agents, and cost estimation."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ledger.agents import (
    BuiltinAgent,
    CliAgent,
    CmdAgent,
    default_agent_spec,
    detect_cli_agents,
    resolve_agent,
)
from ledger.agents.contracts import AttemptContext, Usage
from ledger.agents.costs import estimate_cost, find_price, load_pricing
from ledger.agents.file_parsers import AiderParser, aider_count
from ledger.agents.parsers import ClaudeParser, CodexParser, GeminiParser
from ledger.agents.process import run_agent_process
from ledger.errors import MalformedInput, NotFound, UsageError

FAKES = Path(__file__).parent / "fakes"
PRESETS = ["claude", "codex", "gemini", "cursor-agent", "aider"]


def make_ctx(tmp_path: Path, **extra: object) -> AttemptContext:
    wt, home, scratch = tmp_path / "wt", tmp_path / "home", tmp_path / "scratch"
    for d in (wt, home, scratch):
        d.mkdir(parents=True, exist_ok=True)
    prompt = scratch / "prompt.md"
    prompt.write_text("- fix the bug\n")
    return AttemptContext(attempt_id="r-x/t1/a/1/1", task_id="t1", worktree=wt, prompt_file=prompt,
                          prompt="- fix the bug", home=home, timeout_s=20.0, extra=dict(extra))


def fake_bin(tmp_path: Path, *names: str) -> Path:
    """A directory with executable wrappers that run fakes/fake_cli.py as each named CLI."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name in names:
        path = bindir / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / "fake_cli.py"}" {name} "$@"\n')
        path.chmod(0o755)
    return bindir


# --- specs ------------------------------------------------------------------------------------

def test_resolve_builtins_and_replay() -> None:
    """Built-in names resolve to builtin agents; replay:RUN keeps the run id in its name."""
    for name in ("noop", "oracle", "demo"):
        agent = resolve_agent(name)
        assert isinstance(agent, BuiltinAgent) and agent.profile().kind == "builtin" and agent.name == name
        assert agent.available() == (True, "")
    replay = resolve_agent("replay:r-20261129T203000Z-1a2b3c")
    assert isinstance(replay, BuiltinAgent) and replay.run_ref == "r-20261129T203000Z-1a2b3c"
    assert replay.name == "replay-r-20261129T203000Z-1a2b3c"
    with pytest.raises(UsageError, match="run id"):
        resolve_agent("replay:")


def test_resolve_presets_and_models() -> None:
    """Preset names resolve to CLI agents; PRESET:MODEL selects the model and names the agent."""
    for name in PRESETS:
        agent = resolve_agent(name)
        assert isinstance(agent, CliAgent) and agent.profile().kind == "cli" and agent.name == name
    agent = resolve_agent("codex:gpt-5-codex")
    assert isinstance(agent, CliAgent) and agent.model == "gpt-5-codex"
    assert agent.name == "codex-gpt-5-codex" and agent.spec == "codex:gpt-5-codex"


def test_resolve_cmd_names_and_unknown() -> None:
    """cmd: agents are named after their script; an unknown spec is a UsageError listing choices."""
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / 'crash.py'} --x")
    assert isinstance(agent, CmdAgent) and agent.profile().kind == "cmd" and agent.name == "cmd-crash"
    assert resolve_agent("cmd:./bin/my-agent {prompt_file}").name == "cmd-my-agent"
    with pytest.raises(UsageError, match="unknown agent 'gpt-9'.*claude"):
        resolve_agent("gpt-9")
    with pytest.raises(UsageError):
        resolve_agent("cmd:")
    with pytest.raises(UsageError):
        resolve_agent("cmd:'unclosed")


def test_resolve_config_agents() -> None:
    """Agents named in ledger.toml resolve from the whole config or the agents table."""
    table = {"mybot": {"command": "mybot --prompt-file {prompt_file}", "env": {"A": "1"},
                       "version": "mybot 2"}}
    for config in ({"agents": table}, table):
        agent = resolve_agent("mybot", config=config)
        assert isinstance(agent, CmdAgent)
        assert agent.command == ("mybot", "--prompt-file", "{prompt_file}")
        assert agent.extra_env == {"A": "1"} and agent.version() == "mybot 2"
        assert agent.name == "mybot"
    with pytest.raises(UsageError, match="command"):
        resolve_agent("bad", config={"agents": {"bad": {"command": 3}}})


def test_an_agents_entry_that_is_not_a_table_is_refused() -> None:
    """The registry reads an [agents.NAME] entry as the table it is (no probing of its
    attributes): anything else is a UsageError naming it, also for a preset's own table."""
    for bad in (3, "cmd:echo", ["echo"]):
        with pytest.raises(UsageError, match=r"^\[agents\.mine\] must be a table$"):
            resolve_agent("mine", config={"agents": {"mine": bad}})
    assert resolve_agent("claude:m1", config={"claude": "not a table"}).profile().model == "m1"


def test_cmd_placeholders_env_and_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cmd: substitutes placeholders and runs in the worktree with the LEDGER_* variables."""
    monkeypatch.setenv("FAKE_FLAG", "on")
    ctx = make_ctx(tmp_path)
    agent = resolve_agent(f"cmd:{sys.executable} {FAKES / 'env_dump.py'} {{prompt_file}} "
                          "--wt={worktree} {task_id}")
    out = run_agent_process(agent.invocation(ctx), ctx, trace="none")
    data = json.loads(out.stdout_text)
    assert data["argv"] == [str(ctx.prompt_file), f"--wt={ctx.worktree}", "t1"]
    assert data["cwd"] == str(ctx.worktree.resolve())
    assert data["env"]["LEDGER_WORKTREE"] == str(ctx.worktree)
    assert data["env"]["LEDGER_PROMPT_FILE"] == str(ctx.prompt_file)
    assert data["env"]["LEDGER_TASK_ID"] == "t1"
    assert data["env"]["LEDGER_ATTEMPT"].startswith("r-x/t1/a/1/1#")
    assert data["env"]["FAKE_FLAG"] == "on"


def test_missing_cmd_program_is_unavailable(tmp_path: Path) -> None:
    """A cmd: program that is not on PATH is unavailable with a reason naming it."""
    agent = resolve_agent("cmd:no-such-agent-program-xyz --go")
    ok, reason = agent.available()
    assert not ok and "no-such-agent-program-xyz" in reason
    with pytest.raises(UsageError, match="no-such-agent-program-xyz"):
        agent.invocation(make_ctx(tmp_path))


def test_detect_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection follows preference order; with nothing on PATH the default is demo, said in one line."""
    bindir = fake_bin(tmp_path, "aider", "claude")
    monkeypatch.setenv("PATH", str(bindir))
    assert detect_cli_agents() == ["claude", "aider"]
    spec, reason = default_agent_spec()
    assert spec == "claude" and str(bindir / "claude") in reason
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_cli_agents() == []
    assert default_agent_spec() == ("demo", "no agent CLI on PATH; using the built-in demo agent")
    ok, reason = resolve_agent("codex").available()
    assert not ok and "'codex' not found on PATH" in reason


# --- presets end to end (fake CLIs printing captured-style output) ----------------------------

def run_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str):  # type: ignore[no-untyped-def]
    bindir = fake_bin(tmp_path, name)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    record = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_ARGV_FILE", str(record))
    ctx = make_ctx(tmp_path)
    agent = resolve_agent(name)
    assert agent.available() == (True, "")
    assert agent.version() == f"{name} 9.9.9 (fake)"
    out = run_agent_process(agent.invocation(ctx), ctx, trace="none")
    assert out.exit_code == 0, out.stderr_text
    return ctx, out, json.loads(record.read_text())


def test_claude_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """claude: -p stream-json with --verbose; tool calls/results, summed modelUsage, reported cost."""
    realhome = tmp_path / "realhome"
    (realhome / ".claude").mkdir(parents=True)
    (realhome / ".claude" / ".credentials.json").write_text('{"oauth": "x"}')
    monkeypatch.setenv("HOME", str(realhome))
    ctx, out, rec = run_preset(tmp_path, monkeypatch, "claude")
    argv = rec["argv"]
    assert argv[:5] == ["-p", "--output-format", "stream-json", "--verbose",
                        "--dangerously-skip-permissions"]
    assert argv[-1] == " - fix the bug"  # a prompt starting with '-' is never read as an option
    assert rec["stdin_tty"] is False
    assert rec["env"]["CLAUDE_CONFIG_DIR"] == str(ctx.home / ".claude")
    assert rec["env"]["DISABLE_TELEMETRY"] == "1"
    cred = ctx.home / ".claude" / ".credentials.json"
    assert cred.read_text() == '{"oauth": "x"}' and stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert out.events == [
        ("agent.output", {"stream": "stdout", "text": "Let me run the tests.", "total_bytes": 21,
                          "truncated": False}),
        ("tool.call", {"tool": "Bash", "input": {"command": "pytest -q", "description": "Run tests"}}),
        ("tool.result", {"tool": "Bash", "output": "4 passed", "is_error": False}),
        ("tool.call", {"tool": "Read", "input": {"file_path": "/w/missing.py"}}),
        ("tool.result", {"tool": "Read", "output": "File does not exist.", "is_error": True}),
    ]
    assert out.usage == Usage(tokens_in=12 + 80000 + 5000 + 300, tokens_out=920, cost_usd=0.1641,
                              model="claude-sonnet-4-6")
    assert estimate_cost(out.usage, "claude") == (0.1641, "reported")


def test_codex_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """codex: exec --json; command/file-change items; last turn usage; cost estimated from tokens."""
    ctx, out, rec = run_preset(tmp_path, monkeypatch, "codex")
    argv = rec["argv"]
    assert argv[:2] == ["exec", "--json"] and "--skip-git-repo-check" in argv
    assert argv[argv.index("-C") + 1] == str(ctx.worktree)
    assert rec["env"]["CODEX_HOME"] == str(ctx.home / ".codex")
    kinds = [(k, d.get("tool"), d.get("is_error")) for k, d in out.events]
    assert kinds == [
        ("tool.call", "shell", None), ("tool.result", "shell", False),
        ("tool.call", "file_change", None), ("tool.result", "file_change", False),
        ("tool.call", "shell", None), ("tool.result", "shell", True),
        ("agent.output", None, None),
    ]
    assert out.events[1][1]["output"] == "README.md\n"
    assert out.usage == Usage(tokens_in=24763, tokens_out=122, cost_usd=None, model=None)
    cost, source = estimate_cost(out.usage, "codex")
    assert source == "estimated" and cost == pytest.approx((24763 * 1.25 + 122 * 10) / 1e6)


def test_gemini_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gemini: stream-json with yolo approvals; deltas joined; tool ids mapped; stats tokens."""
    ctx, out, rec = run_preset(tmp_path, monkeypatch, "gemini")
    argv = rec["argv"]
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("--approval-mode") + 1] == "yolo"
    assert rec["env"]["GEMINI_CLI_HOME"] == str(ctx.home)
    assert rec["env"]["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    settings = json.loads((ctx.home / ".gemini" / "settings.json").read_text())
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert [(k, d.get("tool"), d.get("text")) for k, d in out.events] == [
        ("agent.output", None, "I will read the file."),
        ("tool.call", "read_file", None), ("tool.result", "read_file", None),
        ("tool.call", "run_shell_command", None), ("tool.result", "run_shell_command", None),
    ]
    assert out.events[4][1] == {"tool": "run_shell_command", "output": "exit code 1", "is_error": True}
    assert out.usage == Usage(tokens_in=1200, tokens_out=300, cost_usd=None, model="gemini-2.5-pro")
    cost, source = estimate_cost(out.usage, "gemini")
    assert source == "priced" and cost == pytest.approx((1200 * 1.25 + 300 * 10) / 1e6)


def test_cursor_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cursor-agent: -p stream-json --force; started/completed tool calls; camelCase usage."""
    ctx, out, rec = run_preset(tmp_path, monkeypatch, "cursor-agent")
    argv = rec["argv"]
    assert argv[:3] == ["-p", "--output-format", "stream-json"] and "--force" in argv
    assert argv[argv.index("--workspace") + 1] == str(ctx.worktree)
    assert rec["env"]["HOME"] == str(ctx.home)
    assert [(k, d.get("tool")) for k, d in out.events] == [
        ("agent.output", None), ("tool.call", "read"), ("tool.result", "read"),
        ("tool.call", "shell"), ("tool.result", "shell")]
    assert out.events[2][1] == {"tool": "read", "output": "# Project", "is_error": False}
    assert out.events[4][1] == {"tool": "shell", "output": "boom", "is_error": True}
    assert out.usage == Usage(tokens_in=6100, tokens_out=200, cost_usd=None, model="Claude 4.5 Sonnet")
    assert estimate_cost(out.usage, "cursor-agent") == (None, "none")


def test_aider_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aider: --message-file with hygiene flags; text tokens summed and session cost reported."""
    ctx, out, rec = run_preset(tmp_path, monkeypatch, "aider")
    argv = rec["argv"]
    assert argv[argv.index("--message-file") + 1] == str(ctx.prompt_file)
    for flag in ("--yes-always", "--no-auto-commits", "--no-gitignore", "--no-analytics",
                 "--no-check-update", "--no-pretty"):
        assert flag in argv
    assert rec["env"]["HOME"] == str(ctx.home) and rec["env"]["NO_COLOR"] == "1"
    assert out.events == [("tool.call", {"tool": "edit", "input": {"path": "a.py"}})]
    assert out.usage == Usage(tokens_in=14500, tokens_out=433, cost_usd=0.06,
                              model="claude-sonnet-4-5")
    assert estimate_cost(out.usage) == (0.06, "reported")


# --- parsers on edge cases --------------------------------------------------------------------

def test_parsers_ignore_garbage() -> None:
    """Non-JSON lines, unknown types and wrong shapes produce no events and no exception."""
    for parser in (ClaudeParser(), CodexParser(), GeminiParser()):
        for line in ("", "plain text", "{not json", "[1, 2]", '{"type": "mystery"}',
                     '{"type": "assistant", "message": {"content": "str"}}',
                     '{"type": "item.completed", "item": 5}', '{"type": "result", "stats": 3}'):
            assert parser.feed_line(line) == []
        assert parser.finish().tokens_in is None


def test_claude_json_array_form_and_error_result() -> None:
    """The verbose json form (an array) is read, and an error result becomes an output line."""
    arr = [{"type": "system", "subtype": "init", "model": "claude-opus-4-5"},
           {"type": "result", "subtype": "success", "is_error": True, "terminal_reason": "api_error",
            "result": "rate limited", "total_cost": 0.5,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 5}}]
    parser = ClaudeParser()
    events = parser.feed_line(json.dumps(arr))
    assert events == [("agent.output", {"stream": "stdout",
                                        "text": "[result success terminal_reason=api_error] rate limited"})]
    assert parser.finish() == Usage(tokens_in=15, tokens_out=2, cost_usd=0.5, model="claude-opus-4-5")


def test_codex_turn_failed() -> None:
    """A failed turn is surfaced as agent output."""
    parser = CodexParser()
    events = parser.feed_line('{"type":"turn.failed","error":{"message":"quota exceeded"}}')
    assert events == [("agent.output", {"stream": "stdout", "text": "[turn failed] quota exceeded"})]


def test_aider_counts_and_partial_lines() -> None:
    """Aider's rounded counts parse; a Tokens line without cost leaves the cost unknown."""
    assert [aider_count(*a) for a in (("12", "k"), ("1.2", "k"), ("345", ""), ("1.5", "M"))] == \
        [12000, 1200, 345, 1500000]
    parser = AiderParser()
    parser.feed_line("Tokens: 999 sent, 10 received.")
    assert parser.finish() == Usage(tokens_in=999, tokens_out=10, cost_usd=None, model=None)


# --- built-in agents --------------------------------------------------------------------------

def test_noop_agent(tmp_path: Path) -> None:
    """noop exits 0, changes nothing, reports zero tokens and cost."""
    ctx = make_ctx(tmp_path)
    (ctx.worktree / "a.py").write_text("x = 1\n")
    out = run_agent_process(resolve_agent("noop").invocation(ctx), ctx, trace="none")
    assert out.exit_code == 0 and out.events == []
    assert sorted(p.name for p in ctx.worktree.iterdir()) == ["a.py"]
    assert out.usage == Usage(tokens_in=0, tokens_out=0, cost_usd=0.0, model=None)


def test_oracle_agent_copies_solution(tmp_path: Path) -> None:
    """oracle copies solution/ over the worktree and its transcript shows it read the ground truth."""
    task = tmp_path / "task"
    (task / "solution" / "pkg").mkdir(parents=True)
    (task / "solution" / "pkg" / "mod.py").write_text("ANSWER = 42\n")
    ctx = make_ctx(tmp_path, task_root=str(task))
    out = run_agent_process(resolve_agent("oracle").invocation(ctx), ctx, trace="none")
    assert out.exit_code == 0
    assert (ctx.worktree / "pkg" / "mod.py").read_text() == "ANSWER = 42\n"
    reads = [d for k, d in out.events if k == "tool.call" and d["tool"] == "read"]
    assert reads == [{"tool": "read", "input": {"path": str(task / "solution" / "pkg" / "mod.py")}}]
    with pytest.raises(UsageError, match="task_root"):
        resolve_agent("oracle").invocation(make_ctx(tmp_path / "other"))


def test_demo_agent_steps(tmp_path: Path) -> None:
    """demo reads, runs, writes and replaces as its steps say; a failed step makes it exit 1."""
    steps = [{"read": "a.py"}, {"replace": "a.py", "old": "x = 1", "new": "x = 2"},
             {"write": "sub/b.txt", "content": "hello"},
             {"run": [sys.executable, "-c", "print(open('a.py').read().strip())"]},
             {"say": "done"}]
    ctx = make_ctx(tmp_path, demo_steps=steps)
    (ctx.worktree / "a.py").write_text("x = 1\n")
    inv = resolve_agent("demo").invocation(ctx)
    steps_file = Path(inv.argv[inv.argv.index("--steps") + 1])
    assert ctx.home in steps_file.parents  # outside the worktree and the task folder
    out = run_agent_process(inv, ctx, trace="none")
    assert out.exit_code == 0, out.stdout_text
    assert (ctx.worktree / "a.py").read_text() == "x = 2\n"
    assert (ctx.worktree / "sub" / "b.txt").read_text() == "hello"
    results = [d["output"] for k, d in out.events if k == "tool.result"]
    assert results[0] == "x = 1\n" and results[3] == "x = 2\n"
    assert out.events[-1] == ("agent.output", {"stream": "stdout", "text": "done",
                                               "total_bytes": 4, "truncated": False})
    bad = make_ctx(tmp_path / "bad", demo_steps=[{"replace": "nope.py", "old": "a", "new": "b"},
                                                 {"write": "../escape.txt", "content": "x"}])
    out = run_agent_process(resolve_agent("demo").invocation(bad), bad, trace="none")
    assert out.exit_code == 1
    assert not (tmp_path / "bad" / "escape.txt").exists()


def test_replay_agent_applies_files(tmp_path: Path) -> None:
    """replay writes recorded contents and deletes files recorded as None."""
    ctx = make_ctx(tmp_path, replay_files={"new.py": "y = 3\n", "old.py": None})
    (ctx.worktree / "old.py").write_text("gone\n")
    out = run_agent_process(resolve_agent("replay:r-1").invocation(ctx), ctx, trace="none")
    assert out.exit_code == 0
    assert (ctx.worktree / "new.py").read_text() == "y = 3\n"
    assert not (ctx.worktree / "old.py").exists()
    with pytest.raises(UsageError, match="replay_files"):
        resolve_agent("replay:r-1").invocation(make_ctx(tmp_path / "x"))


# --- costs ------------------------------------------------------------------------------------

def test_estimate_cost_sources() -> None:
    """Reported beats priced (model named) and estimated (fallback); else none."""
    assert estimate_cost(Usage(tokens_in=10, tokens_out=10, cost_usd=1.5)) == (1.5, "reported")
    cost, source = estimate_cost(Usage(tokens_in=1_000_000, tokens_out=1_000_000,
                                       model="claude-sonnet-4-5-20250929"))
    assert (cost, source) == (18.0, "priced")
    assert estimate_cost(Usage(tokens_in=5, tokens_out=5, model="mystery-model")) == (None, "none")
    assert estimate_cost(Usage(), "claude") == (None, "none")
    assert find_price("anthropic/claude-haiku-4-5", load_pricing())[0] == "claude-haiku-4-5"
    assert find_price("gpt-5-mini-2025-08-07", load_pricing())[0] == "gpt-5-mini"


def test_user_pricing_file_overrides(tmp_path: Path) -> None:
    """A TOML or JSON user file overrides and extends the table; a bad one is MalformedInput."""
    toml = tmp_path / "pricing.toml"
    toml.write_text('[models."gpt-5"]\ninput = 2.0\noutput = 20.0\n[models.mine]\ninput = 1\noutput = 1\n')
    prices = load_pricing(toml)
    assert prices["gpt-5"].input_per_mtok == 2.0 and prices["gpt-5"].source == str(toml)
    assert estimate_cost(Usage(tokens_in=1_000_000, tokens_out=0, model="mine"),
                         pricing=prices) == (1.0, "priced")
    js = tmp_path / "pricing.json"
    js.write_text(json.dumps({"o3": {"input": 9, "output": 9}}))
    assert load_pricing(js)["o3"].output_per_mtok == 9.0
    js.write_text(json.dumps({"o3": {"input": -1, "output": 9}}))
    with pytest.raises(MalformedInput, match="non-negative"):
        load_pricing(js)
    js.write_text("{nope")
    with pytest.raises(MalformedInput):
        load_pricing(js)
    with pytest.raises(NotFound):
        load_pricing(tmp_path / "absent.toml")


def test_costs_command(tmp_path: Path) -> None:
    """`ledger costs --json` prints the table, with a user pricing file from the ledger dir."""
    from click.testing import CliRunner

    from cli.main import cli

    ledger_dir = tmp_path / ".ledger"
    ledger_dir.mkdir()
    (ledger_dir / "pricing.toml").write_text('[models.house]\ninput = 0.5\noutput = 1.5\n')
    result = CliRunner().invoke(cli, ["--ledger", str(ledger_dir), "costs", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {r["model"]: r for r in data["models"]}
    assert rows["house"] == {"model": "house", "input_per_mtok": 0.5, "output_per_mtok": 1.5,
                             "source": str(ledger_dir / "pricing.toml")}
    assert rows["gpt-5"]["source"] == "builtin"
    text = CliRunner().invoke(cli, ["--ledger", str(tmp_path / "none"), "costs"])
    assert text.exit_code == 0 and "claude-sonnet-4-5" in text.output and "approximate" in text.output
