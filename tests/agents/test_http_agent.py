"""The built-in HTTP agent against the scripted Chat Completions server.

Run level (``ledger run --agent http:MODEL@URL`` on the packaged smoke task ``add-clamp``): the
task is solved, tokens equal the script, every turn is journaled and rebuilds the exact request
bytes, the key never reaches the journal, verify and replay pass. Loop level (the agent program
``ledger.agents.http_loop`` run directly): retries, limits, truncation, auth, proxies.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.agents import resolve_agent
from ledger.agents.http import HttpAgent, url_endpoint
from ledger.agents.strace import strace_status
from ledger.errors import MalformedInput, UsageError
from ledger.journal.journal import Journal
from ledger.run.config import parse_config
from tests.agents.scripted_model import Turn, drop, fail, say, script_totals, tool_call
from tests.doc_tables import documented_fields

VOCAB = Path(__file__).resolve().parents[2] / "docs" / "VOCABULARY.md"
STRACE_OK = strace_status()[0]

KEY = "local-key-7f3a9c2e5b81d4"  # not shaped like a vendor key: redaction must come from the env
KEY_ENV = "LOCAL_LLM_PASSPHRASE_X"

NEW_BODY = ('    if low > high:\n        raise ValueError("low > high")\n'
            '    return max(low, min(value, high))\n')
FIX = ("python - <<'PY'\nfrom pathlib import Path\np = Path('mathx/ops.py')\n"
       "p.write_text(p.read_text().replace("
       "'    raise NotImplementedError(\"clamp is not written yet\")\\n', " + repr(NEW_BODY) + "))\nPY")


def solve_script() -> list[Any]:
    """Read, edit, test, submit: the packaged smoke task add-clamp."""
    return [tool_call("bash", {"command": "cat mathx/ops.py"}, input_tokens=512, output_tokens=31),
            tool_call("bash", {"command": FIX}, input_tokens=733, output_tokens=97),
            tool_call("bash", {"command": f'echo "key=${KEY_ENV}"; python -m pytest -q tests'},
                      input_tokens=901, output_tokens=22),
            tool_call("submit", {"summary": "clamp written"}, input_tokens=1017, output_tokens=9)]


def ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def journal_entries(home: Path) -> list[Any]:
    with Journal.open(home / "journal.db") as j:
        return list(j.entries())


def write_toml(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home.parent / "ledger.toml").write_text(text)


# --------------------------------------------------------------------------- run level


def test_http_agent_solves_smoke_task(tmp_path: Path, scripted_model: Any) -> None:
    """Edits pass the hidden tests; tokens equal the script; every turn journaled; verify+replay."""
    script = solve_script()
    server = scripted_model(script, api_key=KEY)
    home = tmp_path / ".ledger"
    write_toml(home, f'[agents.local]\nkind = "http"\nmodel = "gpt-4o-mini"\n'
                     f'base_url = "{server.base_url}"\napi_key_env = "{KEY_ENV}"\n')
    trace = "strace" if STRACE_OK else "none"
    # A process of its own, with the key in its environment as a user's shell would have it (the
    # run's worker processes start from the environment of the process that runs ledger).
    proc = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", "--ledger", str(home), "run",
         "--task", "add-clamp", "--agent", "local", "--trace", trace, "--sandbox", "none",
         "--json"],
        env={**os.environ, KEY_ENV: KEY}, cwd=Path(__file__).resolve().parents[2],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    attempt = json.loads(proc.stdout)["attempts"][0]
    assert attempt["outcome"] == "passed" and attempt["hidden_passed"] is True
    if STRACE_OK:  # observed, and its connections to the model endpoint are allowed
        assert attempt["attestation"] == "CLEAN", attempt

    entries = journal_entries(home)
    finished = next(e.data for e in entries if e.kind == "agent.finished")
    assert (finished["tokens_in"], finished["tokens_out"]) == script_totals(script) == (3163, 159)
    assert finished["model_calls"] == 4 and finished["agent_error"] is None
    assert finished["cost_source"] == "priced"
    assert finished["cost_usd"] == pytest.approx((3163 * 0.15 + 159 * 0.6) / 1e6)
    started = next(e.data for e in entries if e.kind == "agent.started")
    assert [(ep["host"], ep["port"]) for ep in started["endpoints"]] == [("127.0.0.1", server.port)]

    # Every request the server saw is rebuilt byte for byte from the journal.
    requests = [e.data for e in entries if e.kind == "model.request"]
    responses = [e.data for e in entries if e.kind == "model.response"]
    assert [r["step"] for r in requests] == [1, 2, 3, 4]
    assert [(r["step"], r["status"]) for r in responses] == [(i, 200) for i in (1, 2, 3, 4)]
    seen = server.model_requests()
    assert len(seen) == 4
    messages: list[Any] = []
    for i, req in enumerate(requests):
        if i:
            echoed = {k: v for k, v in responses[i - 1]["message"].items() if v is not None}
            messages.append({**echoed, "role": "assistant", "content": echoed.get("content")})
        messages.extend(req["messages"])
        body = {"model": req["model"], "messages": messages, "tools": requests[0]["tools"],
                **req["params"]}
        raw = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
        assert hashlib.sha256(raw).hexdigest() == req["body_sha256"]
        assert raw == seen[i].body
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    # stdout is the transcript: journaled as the entries above, not again as raw output
    assert not [e for e in entries if e.kind == "agent.output" and e.data["stream"] == "stdout"]
    results = [e.data for e in entries if e.kind == "tool.result"]
    assert "key=\n" in results[2]["output"]  # commands never see the key

    # The key is nowhere in the journal: not in entries, not in the database files.
    assert all(KEY.encode() not in e.raw for e in entries)
    for path in home.glob("journal.db*"):
        assert KEY.encode() not in path.read_bytes()

    # Every entry the HTTP agent's attempt wrote is documented, field by field (`at`: a convention).
    vocab = documented_fields(VOCAB)
    for e in entries:
        if e.kind in ("model.request", "model.response", "agent.finished", "tool.call"):
            assert set(e.data) - {"at"} <= vocab[e.kind], (e.kind, set(e.data) - vocab[e.kind])

    assert ledger(home, "verify").exit_code == 0
    replay = ledger(home, "replay")
    assert replay.exit_code == 0, replay.output


def test_reading_the_solution_through_bash_is_dirty(tmp_path: Path, scripted_model: Any) -> None:
    """The model cats the packaged solution by absolute path, then makes the honest edit: the
    hidden tests pass, and the attestation is DIRTY (the tool result matched the commitment)."""
    from ledger.tasks.loader import load_tasks

    task = next(t for t in load_tasks(None, ["add-clamp"]) if t.id == "add-clamp")
    solution = (task.solution_dir / "mathx" / "ops.py").resolve()
    honest = solve_script()
    server = scripted_model([tool_call("bash", {"command": f"cat {solution}"}), *honest])
    home = tmp_path / ".ledger"
    result = ledger(home, "run", "--task", "add-clamp", "--agent", f"http:m@{server.base_url}",
                    "--trace", "none", "--sandbox", "none", "--json")
    assert result.exit_code == 0, result.output
    attempt = json.loads(result.stdout)["attempts"][0]
    assert attempt["hidden_passed"] is True
    assert attempt["attestation"] == "DIRTY", attempt


def test_server_down_records_agent_error_and_exits_3(tmp_path: Path, scripted_model: Any) -> None:
    """No model server: agent_error unreachable, one summary line, exit 3, within seconds."""
    server = scripted_model([])
    url = server.base_url
    server.stop()
    home = tmp_path / ".ledger"
    write_toml(home, f'[agents.dead]\nkind = "http"\nmodel = "m"\nbase_url = "{url}"\n'
                     'retries = 1\n')
    start = time.monotonic()
    result = ledger(home, "run", "--task", "add-clamp", "--agent", "dead", "--trace", "none")
    assert time.monotonic() - start < 60  # the task's budget is 180 s
    assert result.exit_code == 3, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("agent dead:"))
    assert line.startswith("agent dead: never reached its model in 1 of 1 attempt(s) (unreachable:")
    assert "no attempt of dead reached a model" in result.stderr
    finished = next(e.data for e in journal_entries(home) if e.kind == "agent.finished")
    assert finished["agent_error"]["kind"] == "unreachable" and finished["model_calls"] == 0
    assert finished["timed_out"] is False and finished["wall_s"] < 30


def test_http_agent_runs_inside_the_sandbox(tmp_path: Path, scripted_model: Any) -> None:
    """Under bubblewrap the agent's program starts (the harness package is shown to it) and its
    requests are journaled; without a route to the model it records unreachable, never a crash."""
    from ledger.sandbox import sandbox_status

    status = sandbox_status("bwrap")
    if status.mode != "bwrap":
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    server = scripted_model(solve_script())
    home = tmp_path / ".ledger"
    write_toml(home, f'[agents.boxed]\nkind = "http"\nmodel = "m"\nbase_url = "{server.base_url}"\n'
                     'retries = 1\n')
    result = ledger(home, "run", "--task", "add-clamp", "--agent", "boxed", "--trace", "none",
                    "--sandbox", "bwrap", "--json")
    entries = journal_entries(home)
    assert any(e.kind == "model.request" for e in entries), result.output
    started = next(e.data for e in entries if e.kind == "agent.started")
    assert started["isolation"] == "sandbox"
    finished = next(e.data for e in entries if e.kind == "agent.finished")
    if finished["model_calls"]:
        assert result.exit_code == 0 and finished["agent_error"] is None
    else:  # the sandbox gave it no route to 127.0.0.1 outside
        assert result.exit_code == 3 and finished["agent_error"]["kind"] == "unreachable"


def test_agent_that_worked_once_does_not_exit_3(tmp_path: Path, scripted_model: Any) -> None:
    """One repeat reached the model, one did not: the agent did work, so the run exits 0."""
    server = scripted_model([tool_call("submit", {}), fail(401, "bad key")])
    home = tmp_path / ".ledger"
    result = ledger(home, "run", "--task", "add-clamp", "--agent", f"http:m@{server.base_url}",
                    "--repeat", "2", "--trace", "none", "--sandbox", "none", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert sorted(str(a["outcome"]) for a in summary["attempts"]) == ["agent_error", "failed"]
    assert summary["agent_errors"] == [{"agent": "http-m", "attempts": 2, "unreached": 1,
                                        "kind": "auth_rejected", "detail": "HTTP 401: bad key",
                                        "no_work": False}]


def test_http_spec_resolves_with_endpoint() -> None:
    """http:MODEL@BASE_URL names the agent, its model, URL and endpoint host:port."""
    agent = resolve_agent("http:qwen2.5-coder:7b@http://127.0.0.1:8000/v1/")
    assert isinstance(agent, HttpAgent) and agent.profile().kind == "http"
    assert (agent.model, agent.base_url) == ("qwen2.5-coder:7b", "http://127.0.0.1:8000/v1")
    assert agent.endpoints() == ("127.0.0.1:8000",)
    assert url_endpoint("https://gw.example/v1") == "gw.example:443"
    assert url_endpoint("http://[::1]/v1") == "[::1]:80"


@pytest.mark.parametrize("spec", [
    "http:model-only", "http:@http://h/v1", "http:m@ftp://h/v1", "http:m@http://u:p@h/v1",
    "http:m@http://h/v1?key=1",
])
def test_bad_http_specs_are_usage_errors(spec: str) -> None:
    """A spec without a model or with a URL that is not plain http(s) is a usage error."""
    with pytest.raises(UsageError):
        resolve_agent(spec)


def test_http_agent_in_ledger_toml() -> None:
    """[agents.NAME] kind = "http" parses; missing fields and unknown keys are malformed."""
    cfg = parse_config('[agents.q]\nkind = "http"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
                       'max_steps = 7\nretries = 1\n')
    agent = resolve_agent("q", config=cfg.agent_table())
    assert isinstance(agent, HttpAgent) and (agent.max_steps, agent.retries) == (7, 1)
    for bad in ('kind = "http"\nbase_url = "http://h/v1"\n',
                'kind = "http"\nmodel = "m"\n',
                'kind = "http"\nmodel = "m"\nbase_url = "http://h/v1"\ncommand = "x"\n',
                'kind = "http"\nmodel = "m"\nbase_url = "http://h/v1"\nmax_steps = 0\n',
                'kind = "rpc"\ncommand = "x"\n'):
        with pytest.raises(MalformedInput):
            parse_config("[agents.q]\n" + bad)


# --------------------------------------------------------------------------- loop level


def run_loop(tmp_path: Path, base_url: str, *extra: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> tuple[int, list[dict[str, Any]], float]:
    """Run the agent program in a scratch worktree; (exit code, transcript objects, seconds)."""
    work = tmp_path / "wt"
    work.mkdir(exist_ok=True)
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Do the task.")
    full_env = {k: v for k, v in os.environ.items()
                if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    full_env.update(env or {})
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "ledger.agents.http_loop", "--model", "m",
         "--base-url", base_url, "--prompt-file", str(prompt), "--api-key-env", KEY_ENV, *extra],
        cwd=work, env=full_env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - start
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], took


def of(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in lines if o["type"] == kind]


def test_429_then_success_is_retried(tmp_path: Path, scripted_model: Any) -> None:
    """A 429 (Retry-After honoured) and a 500 are retried; the answer after them is used."""
    server = scripted_model([fail(429, "slow down", retry_after=0.2), fail(503),
                             tool_call("submit", {})])
    code, lines, took = run_loop(tmp_path, server.base_url)
    assert code == 0
    tries = of(lines, "model.response")
    assert [(t["step"], t["try"], t["status"]) for t in tries] == [(1, 1, 429), (1, 2, 503), (1, 3, 200)]
    assert tries[0]["retry_in_s"] == 0.2 and tries[1]["retry_in_s"] == 1.0  # 0.5 s doubled
    assert len(of(lines, "model.request")) == 1  # one request, sent three times
    assert took >= 1.2
    assert of(lines, "usage")[0]["model_calls"] == 1


def test_retries_are_bounded(tmp_path: Path, scripted_model: Any) -> None:
    """Persistent 500s stop after --retries retries with agent.error model_error and exit 3."""
    server = scripted_model([fail(500)] * 10)
    code, lines, _took = run_loop(tmp_path, server.base_url, "--retries", "2")
    assert code == 3
    assert len(server.requests) == 3
    assert of(lines, "agent.error")[0]["kind"] == "model_error"


def test_dropped_connection_is_retried(tmp_path: Path, scripted_model: Any) -> None:
    """A connection closed without an answer is retried like a 5xx."""
    server = scripted_model([drop(), tool_call("submit", {})])
    code, lines, _took = run_loop(tmp_path, server.base_url)
    assert code == 0
    tries = of(lines, "model.response")
    assert [(t["try"], t["status"]) for t in tries] == [(1, 0), (2, 200)]
    assert "RemoteDisconnected" in tries[0]["error"]


def test_server_down_is_unreachable_quickly(tmp_path: Path, scripted_model: Any) -> None:
    """Nothing listening: bounded retries, then agent.error unreachable and exit 3 (seconds)."""
    server = scripted_model([])
    url = server.base_url
    server.stop()
    code, lines, took = run_loop(tmp_path, url, "--retries", "2")
    assert code == 3 and took < 10  # backoff 0.5 s + 1 s
    error = of(lines, "agent.error")[0]
    assert error["kind"] == "unreachable" and "refused" in error["detail"].lower()
    assert len(of(lines, "model.response")) == 3  # the first try and two retries


def test_answer_without_a_message_is_a_model_error(tmp_path: Path, scripted_model: Any) -> None:
    """A 200 whose body has no choices[0].message (a gateway's error) is not a model call."""
    server = scripted_model([Turn(body={"error": {"message": "gateway says no"}})])
    code, lines, _took = run_loop(tmp_path, server.base_url)
    assert code == 3
    error = of(lines, "agent.error")[0]
    assert error["kind"] == "model_error" and "gateway says no" in error["detail"]
    assert of(lines, "usage")[0]["model_calls"] == 0


def test_auth_rejected_is_not_retried(tmp_path: Path, scripted_model: Any) -> None:
    """A 401 is final: one try, agent.error auth_rejected, exit 3."""
    server = scripted_model([say("never")], api_key="the-right-key-123")
    code, lines, _took = run_loop(tmp_path, server.base_url, env={KEY_ENV: "a-wrong-key-456"})
    assert code == 3
    assert len(server.requests) == 1 and server.used == 0
    assert of(lines, "agent.error")[0]["kind"] == "auth_rejected"


def test_long_output_is_truncated_with_a_note(tmp_path: Path, scripted_model: Any) -> None:
    """Output beyond --output-limit keeps head and tail and says how much was cut."""
    server = scripted_model([
        tool_call("bash", {"command": "python -c \"print('A' * 30000 + 'Z' * 30000)\""}),
        tool_call("submit", {})])
    code, lines, _took = run_loop(tmp_path, server.base_url, "--output-limit", "1000")
    assert code == 0
    output = of(lines, "tool.result")[0]["output"]
    assert output.startswith("A" * 500) and "Z" * 400 in output and "[exit code 0]" in output
    assert "characters of output truncated" in output and len(output) < 1200
    sent = server.model_requests()[1].json()["messages"][-1]["content"]
    assert sent == output


def test_command_timeout_kills_the_command(tmp_path: Path, scripted_model: Any) -> None:
    """A command past --command-timeout is killed and the model is told so."""
    server = scripted_model([tool_call("bash", {"command": "sleep 30"}), tool_call("submit", {})])
    code, lines, took = run_loop(tmp_path, server.base_url, "--command-timeout", "0.5")
    assert code == 0 and took < 10
    result = of(lines, "tool.result")[0]
    assert "timed out after 0.5 s" in result["output"] and result["is_error"] is True


def test_step_limit_stops_the_loop(tmp_path: Path, scripted_model: Any) -> None:
    """--max-steps N makes at most N model calls, then exits 1 saying so."""
    server = scripted_model([tool_call("bash", {"command": "true"})] * 5)
    code, lines, _took = run_loop(tmp_path, server.base_url, "--max-steps", "2")
    assert code == 1 and server.used == 2
    assert "step limit 2 reached" in of(lines, "agent.output")[-1]["text"]


def test_token_budget_stops_the_loop(tmp_path: Path, scripted_model: Any) -> None:
    """--max-tokens stops the loop once the reported usage reaches it."""
    server = scripted_model([tool_call("bash", {"command": "true"}, input_tokens=100,
                                       output_tokens=20)] * 5)
    code, lines, _took = run_loop(tmp_path, server.base_url, "--max-tokens", "200")
    assert code == 1 and server.used == 2
    assert of(lines, "usage")[0]["tokens_in"] == 200


def test_cost_budget_stops_the_loop(tmp_path: Path, scripted_model: Any) -> None:
    """--max-cost-usd stops the loop once the usage at the given prices reaches it."""
    server = scripted_model([tool_call("bash", {"command": "true"}, input_tokens=1000,
                                       output_tokens=100)] * 5)
    code, lines, _took = run_loop(tmp_path, server.base_url, "--max-cost-usd", "0.005",
                                  "--price-in", "1", "--price-out", "10")  # $0.002 per step
    assert code == 1 and server.used == 3
    assert "cost budget $0.005 used up" in of(lines, "agent.output")[-1]["text"]


def test_invocation_carries_the_task_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter passes the time, token and cost budgets to the loop, and never the key."""
    from ledger.agents.contracts import AttemptContext

    monkeypatch.setenv(KEY_ENV, KEY)
    cfg = parse_config(f'[agents.q]\nkind = "http"\nmodel = "gpt-4o-mini"\n'
                       f'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "{KEY_ENV}"\n')
    agent = resolve_agent("q", config=cfg.agent_table())
    ctx = AttemptContext(attempt_id="r/t/a/1/1", task_id="t", worktree=tmp_path,
                         prompt_file=tmp_path / "p.md", prompt="p", home=tmp_path, timeout_s=100,
                         extra={"max_tokens": 5000, "max_cost_usd": 0.25,
                                "price_per_mtok": [0.15, 0.6]})
    inv = agent.invocation(ctx)
    argv = list(inv.argv)
    assert argv[argv.index("--deadline-s") + 1] == "95"
    assert argv[argv.index("--max-tokens") + 1] == "5000"
    assert argv[argv.index("--max-cost-usd") + 1] == "0.25"
    assert (argv[argv.index("--price-in") + 1], argv[argv.index("--price-out") + 1]) == ("0.15", "0.6")
    assert KEY not in " ".join(argv) and KEY in inv.secrets


def test_proxy_from_environment_is_used(tmp_path: Path, scripted_model: Any) -> None:
    """HTTP_PROXY is honoured: the request goes to the proxy in absolute form."""
    proxy = scripted_model([tool_call("submit", {})])
    code, _lines, _took = run_loop(tmp_path, "http://model.invalid:8000/v1",
                                   env={"HTTP_PROXY": proxy.origin, "NO_PROXY": ""})
    assert code == 0
    assert proxy.requests[0].path == "http://model.invalid:8000/v1/chat/completions"


def test_text_only_answer_ends_the_loop(tmp_path: Path, scripted_model: Any) -> None:
    """An answer without tool calls ends the loop with exit 0."""
    server = scripted_model([say("I am done.")])
    code, lines, _took = run_loop(tmp_path, server.base_url)
    assert code == 0 and server.used == 1
    assert of(lines, "model.response")[0]["message"]["content"] == "I am done."
