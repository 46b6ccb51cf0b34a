"""Model API endpoints: declared by each agent, resolved before it starts, allowed by the scan.

Offline: names resolve through ``attempt.static_resolver`` (a fixed table) or a fake resolver, and
the only server is one on 127.0.0.1 that the test starts and stops.
"""

from __future__ import annotations

import functools
import json
import socket
import socketserver
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from click.testing import CliRunner

from attest.scan import ScanPolicy
from cli.main import cli
from ledger.agents import presets as P
from ledger.agents import resolve_agent
from ledger.agents.strace import strace_status
from ledger.errors import MalformedInput, UsageError
from ledger.home import LedgerHome
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.run.attempt import agent_endpoints, resolve_endpoints, static_resolver
from ledger.run.attestor import endpoint_allowlist, scan_policy
from ledger.run.config import parse_config
from ledger.run.coordinator import execute_run
from ledger.run.plan import RunRequest
from tests.run.minitasks import make_ledger

STRACE_OK, STRACE_WHY = strace_status()

# --------------------------------------------------------------------------- declarations


def test_presets_declare_their_model_api_and_no_telemetry() -> None:
    """Every preset names its vendor's API hosts; telemetry hosts are never among them."""
    got = {name: agent_endpoints(resolve_agent(name)) for name in P.PRESET_ORDER}
    assert {"api.anthropic.com"} <= set(got["claude"])
    assert {"api.openai.com", "chatgpt.com"} <= set(got["codex"])
    assert {"generativelanguage.googleapis.com", "oauth2.googleapis.com",
            "cloudcode-pa.googleapis.com"} <= set(got["gemini"])
    assert {"api2.cursor.sh", "*.cursor.sh"} <= set(got["cursor-agent"])
    assert got["aider"]
    every = " ".join(h for hosts in got.values() for h in hosts)
    assert "statsig" not in every and "sentry" not in every


def test_preset_agent_passes_its_model_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """PRESET:MODEL picks the model's provider; a base URL in the environment adds its host."""
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    assert agent_endpoints(resolve_agent("aider:gpt-4o")) == ("api.openai.com",)
    assert agent_endpoints(resolve_agent("aider:openrouter/x/y")) == ("openrouter.ai",)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://llm-gw.internal:9443")
    assert agent_endpoints(resolve_agent("claude"))[-1] == "llm-gw.internal:9443"


def test_builtins_and_cmd_specs_declare_nothing() -> None:
    """Built-in agents use no model and a bare cmd: spec has nowhere to declare endpoints."""
    for spec in ("noop", "oracle", "demo", "cmd:true"):
        assert agent_endpoints(resolve_agent(spec)) == ()


@pytest.mark.parametrize(("model", "env", "expected"), [
    ("openrouter/anthropic/claude-sonnet-4", {}, ("openrouter.ai",)),
    ("anthropic/claude-sonnet-4", {}, ("api.anthropic.com",)),
    ("claude-3-5-sonnet-20241022", {}, ("api.anthropic.com",)),
    ("gpt-4o", {}, ("api.openai.com",)),
    ("gemini/gemini-2.5-pro", {}, ("generativelanguage.googleapis.com",)),
    ("deepseek/deepseek-chat", {}, ("api.deepseek.com",)),
    ("ollama/qwen2.5-coder", {}, ("localhost:11434",)),
    ("ollama/qwen2.5-coder", {"OLLAMA_API_BASE": "http://10.0.0.5:11434"}, ("10.0.0.5:11434",)),
    (None, {"ANTHROPIC_API_KEY": "x" * 20}, ("api.anthropic.com",)),
    (None, {}, ("openrouter.ai",)),
    ("gpt-4o", {"OPENAI_API_BASE": "https://proxy.example:8443/v1"},
     ("api.openai.com", "proxy.example:8443")),
])
def test_aider_endpoints_follow_the_model(model: str | None, env: dict[str, str],
                                          expected: tuple[str, ...]) -> None:
    """Aider's endpoint is the provider its model names, else the providers whose keys are set."""
    assert P.aider_endpoints(model, env) == expected


def test_base_url_variables_add_the_gateway() -> None:
    """ANTHROPIC_BASE_URL / OPENAI_BASE_URL add the gateway's host and port to the preset's."""
    claude = P.claude_endpoints(None, {"ANTHROPIC_BASE_URL": "https://user:pw@GW.example:8443/v1"})
    assert claude[-1] == "gw.example:8443" and "api.anthropic.com" in claude
    assert P.codex_endpoints(None, {"OPENAI_BASE_URL": "http://127.0.0.1/v1"})[-1] == "127.0.0.1:80"
    assert P.codex_endpoints(None, {"OPENAI_BASE_URL": "not a url"}) == P.codex_endpoints(None, {})


@pytest.mark.parametrize(("text", "expected"), [
    ("api.example.com", ("api.example.com", 443)),
    ("API.Example.com.:8080", ("api.example.com", 8080)),
    ("*.cursor.sh", ("*.cursor.sh", 443)),
    ("127.0.0.1:9000", ("127.0.0.1", 9000)),
    ("[::1]:9000", ("::1", 9000)),
    ("0:0::1", ("::1", 443)),
])
def test_parse_endpoint_accepts(text: str, expected: tuple[str, int]) -> None:
    """Host, host:port, *.domain and IP literals parse to a lowercase (host, port)."""
    assert P.parse_endpoint(text) == expected


@pytest.mark.parametrize("text", [
    "", "10.0.0.0/8", "https://api.example.com", "user@host", "a b", "host:0", "host:70000",
    "host:", "[api.example.com]:443", "*", "1.2.3", "::1]:4", "host:port",
])
def test_parse_endpoint_rejects(text: str) -> None:
    """URLs, CIDR blocks, bad ports and junk are usage errors, never a wider allowlist."""
    with pytest.raises(UsageError):
        P.parse_endpoint(text)


def test_ledger_toml_endpoints_reach_the_named_agent() -> None:
    """[agents.NAME] endpoints are checked, made canonical and exposed by the agent."""
    cfg = parse_config('[agents.fake]\ncommand = "true"\n'
                       'endpoints = ["API.fake.test:8080", "api.fake.test:8080", "b.fake.test"]\n')
    agent = resolve_agent("fake", config=cfg.agent_table())
    assert agent_endpoints(agent) == ("api.fake.test:8080", "b.fake.test")
    with pytest.raises(MalformedInput, match=r"agents\.bad.*no URL"):
        parse_config('[agents.bad]\ncommand = "true"\nendpoints = ["https://x.test/v1"]\n')
    with pytest.raises(MalformedInput, match="list of strings"):
        parse_config('[agents.bad]\ncommand = "true"\nendpoints = "x.test"\n')


# --------------------------------------------------------------------------- resolution


def test_resolution_with_a_fake_resolver_records_addresses_and_failures() -> None:
    """Each host gets its addresses or the error; wildcards stay unresolved; order is kept."""
    resolver = functools.partial(static_resolver, {"api.fake.test": ["127.0.0.1", "::1", "junk",
                                                                     "0.0.0.0", "127.0.0.1"]})
    got = resolve_endpoints(["api.fake.test:8080", "gone.fake.test", "*.fake.test"],
                            resolver=resolver)
    assert got[0] == {"host": "api.fake.test", "port": 8080, "addresses": ["127.0.0.1", "::1"],
                      "error": None}
    assert got[1]["host"] == "gone.fake.test" and got[1]["addresses"] == []
    assert "gaierror" in got[1]["error"]
    assert got[2]["addresses"] == [] and "wildcard" in got[2]["error"]
    assert resolve_endpoints([], resolver=resolver) == []
    with pytest.raises(socket.gaierror):
        static_resolver({}, "api.fake.test", 443)


def test_a_hanging_resolver_is_bounded_and_recorded() -> None:
    """A resolver that never answers costs the timeout once (hosts in parallel), not per host."""
    release = threading.Event()

    def hang(host: str, port: int) -> Sequence[str]:
        if host == "fast.fake.test":
            return ["127.0.0.1"]
        release.wait(30)
        return ["127.0.0.2"]

    start = time.monotonic()
    try:
        got = resolve_endpoints(["slow1.fake.test", "slow2.fake.test", "fast.fake.test"],
                                resolver=hang, timeout=0.3)
    finally:
        release.set()
    elapsed = time.monotonic() - start
    assert 0.25 <= elapsed < 2.0
    assert [r["error"] for r in got[:2]] == ["timed out after 0.3 s"] * 2
    assert got[0]["addresses"] == [] and got[2]["addresses"] == ["127.0.0.1"]


def test_a_raising_resolver_is_recorded() -> None:
    """Any exception of the resolver becomes the record's error, not the attempt's."""
    def broken(host: str, port: int) -> Sequence[str]:
        raise OSError("resolver unreachable")

    (rec,) = resolve_endpoints(["api.fake.test"], resolver=broken)
    assert rec["addresses"] == [] and rec["error"] == "OSError: resolver unreachable"


# --------------------------------------------------------------------------- allowlist


def _started(endpoints: Any, cwd: str = "/w/tree") -> Entry:
    return Entry(seq=3, ts=0, run="r", task="t", kind="agent.started",
                 data={"cwd": cwd, "endpoints": endpoints}, raw=b"")


def test_allowlist_holds_names_and_exact_addresses_at_the_declared_port() -> None:
    """Names and resolved IPs become host:port entries; other addresses and ports stay out."""
    records = [{"host": "api.fake.test", "port": 443, "addresses": ["160.79.104.10", "2607:6bc0::10"],
                "error": None},
               {"host": "gone.fake.test", "port": 443, "addresses": [], "error": "gaierror"}]
    assert endpoint_allowlist(records) == (
        "api.fake.test:443", "160.79.104.10:443", "[::ffff:160.79.104.10]:443",
        "[2607:6bc0::10]:443", "gone.fake.test:443")
    policy = scan_policy(_started(records), ["pypi.org:443"])
    assert policy.network_allowlist[0] == "pypi.org:443"  # the task's entries come first
    assert policy.endpoint_allowed("160.79.104.10", 443, "inet")
    assert policy.endpoint_allowed("::ffff:160.79.104.10", 443, "inet6")
    assert policy.endpoint_allowed("2607:6bc0::10", 443, "inet6")
    assert not policy.endpoint_allowed("160.79.104.10", 80, "inet")
    assert not policy.endpoint_allowed("160.79.104.11", 443, "inet")
    assert ScanPolicy.from_data(policy.as_data()) == policy  # recorded in the attestation as is


@pytest.mark.parametrize("records", [
    [{"host": "10.0.0.0/8", "port": 443, "addresses": []}],
    [{"host": "ok.test", "port": 443, "addresses": ["0.0.0.0", "::", "10.0.0.0/8", 7]}],
    [{"host": "ok.test", "port": True, "addresses": ["1.2.3.4"]}],
    [{"host": "ok.test", "port": 0, "addresses": ["1.2.3.4"]}],
    ["api.fake.test"], {"host": "ok.test"}, None,
])
def test_malformed_endpoint_records_never_widen_the_scope(records: Any) -> None:
    """A CIDR host, unspecified address, bad port or non-record allows no address at all."""
    allowed = endpoint_allowlist(records)
    assert all(e == "ok.test:443" for e in allowed)
    policy = scan_policy(_started(records))
    for host in ("10.1.2.3", "1.2.3.4", "0.0.0.0", "8.8.8.8"):
        assert not policy.endpoint_allowed(host, 443, "inet")


def test_attempt_that_never_started_allows_no_endpoint() -> None:
    """Without agent.started the network allowlist is the task's alone."""
    assert scan_policy(None, ["pypi.org:443"]).network_allowlist == ("pypi.org:443",)


# --------------------------------------------------------------------------- end to end


class _Server:
    """A TCP server on 127.0.0.1 (port from the OS) that answers one line and counts clients."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                hits.append(self.rfile.readline().decode().strip())
                self.wfile.write(b"model says: change + to -\n")

        self.hits = hits
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


AGENT = """\
    import socket, sys
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
        s.sendall(b"prompt\\n")
        s.makefile().readline()
    src = open("ops.py").read()
    open("ops.py", "w").write(src.replace("a + b", "a - b"))
"""


@pytest.fixture(scope="module")
def endpoint_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One strace run: the same fake model client declared, undeclared, and unresolvable."""
    if not STRACE_OK:
        pytest.skip(STRACE_WHY)
    tmp = tmp_path_factory.mktemp("endpoints")
    home = make_ledger(tmp, tasks=("fix-sub",))
    script = tmp / "agents" / "model_client.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent(AGENT))
    with _Server() as server:
        command = json.dumps([sys.executable, str(script), str(server.port)])
        (home.parent / "ledger.toml").write_text(textwrap.dedent(f"""\
            [agents.declared]
            command = {command}
            endpoints = ["api.fake.test:{server.port}"]
            [agents.undeclared]
            command = {command}
            [agents.unresolved]
            command = {command}
            endpoints = ["gone.fake.test:{server.port}"]
            """))
        summary = execute_run(
            LedgerHome(home),
            RunRequest(task_ids=("fix-sub",), agents=("declared", "undeclared", "unresolved"),
                       trace="strace", parallel=2, sandbox="none"),
            resolver=functools.partial(static_resolver, {"api.fake.test": ["127.0.0.1"]}))
        hits = list(server.hits)
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary.run_id))
    by_agent: dict[str, dict[str, Any]] = {}
    for e in entries:
        if "attempt" in e.data and e.kind in ("agent.started", "attestation"):
            by_agent.setdefault(e.data["attempt"].split("/")[2], {})[e.kind] = e.data
    yield {"home": home, "summary": summary, "by_agent": by_agent, "hits": hits,
           "port": server.port}


@pytest.mark.strace
def test_declared_endpoint_is_clean_and_undeclared_is_dirty(endpoint_run: dict[str, Any]) -> None:
    """Under strace, the connection to the declared endpoint's address is allowed; without it,
    the same connection is the only (network) match."""
    port, by_agent = endpoint_run["port"], endpoint_run["by_agent"]
    assert len(endpoint_run["hits"]) == 3  # every agent really reached the server
    assert {r.agent: r.attestation for r in endpoint_run["summary"].results} == {
        "declared": "CLEAN", "undeclared": "DIRTY", "unresolved": "DIRTY"}
    declared = by_agent["declared"]
    assert declared["agent.started"]["endpoints"] == [
        {"host": "api.fake.test", "port": port, "addresses": ["127.0.0.1"], "error": None}]
    scope = declared["attestation"]["attestation"]["scope"]["network_allowlist"]
    assert scope == [f"api.fake.test:{port}", f"127.0.0.1:{port}", f"[::ffff:127.0.0.1]:{port}"]
    assert declared["attestation"]["attestation"]["activity"]["kinds"].get("net.connect", 0) >= 1
    undeclared = by_agent["undeclared"]
    assert undeclared["agent.started"]["endpoints"] == []
    att = undeclared["attestation"]["attestation"]
    assert att["scope"]["network_allowlist"] == []
    assert [(m["class"], m["detail"]) for m in att["matches"]] == [("network", f"127.0.0.1:{port}")]


@pytest.mark.strace
def test_unresolvable_endpoint_is_recorded_and_allows_only_its_name(
        endpoint_run: dict[str, Any]) -> None:
    """A name that does not resolve is journaled with its error; its address stays a violation."""
    port, by_agent = endpoint_run["port"], endpoint_run["by_agent"]
    (rec,) = by_agent["unresolved"]["agent.started"]["endpoints"]
    assert rec["host"] == "gone.fake.test" and rec["addresses"] == []
    assert "gaierror" in rec["error"]
    att = by_agent["unresolved"]["attestation"]["attestation"]
    assert att["scope"]["network_allowlist"] == [f"gone.fake.test:{port}"]
    assert {m["class"] for m in att["matches"]} == {"network"}


@pytest.mark.strace
def test_clean_endpoint_attestation_verifies_with_the_secret_key(
        endpoint_run: dict[str, Any]) -> None:
    """The re-scan under the recorded scope agrees: the CLEAN attestation verifies in full."""
    data = endpoint_run["by_agent"]["declared"]["attestation"]
    result = CliRunner().invoke(cli, ["--ledger", str(endpoint_run["home"]), "verify",
                                      data["hash"]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "rescan" in result.output

