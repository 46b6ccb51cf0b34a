"""The attempt's network: the harness's proxy on a unix socket, the in-sandbox forwarder, the
journal's net.connect records with byte counts, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.sandbox import probe_bwrap
from ledger.sandbox.net import Proxy
from tests.local_http import CountingServer
from tests.run.minitasks import make_ledger

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()


@pytest.fixture()
def model() -> Iterator[CountingServer]:
    server = CountingServer(b'{"data": [{"id": "stand-in"}]}')
    yield server
    server.close()


def _request(sock_path: Path, head: str) -> bytes:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock_path))
    s.sendall(head.encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
        if head.startswith("CONNECT") and b"\r\n\r\n" in data:
            break  # a tunnel stays open: its answer is all there is to read
    s.close()
    return data


def test_proxy_allows_by_name_relays_and_counts_bytes(tmp_path: Path, model: CountingServer) -> None:
    """An allowed absolute-form request is relayed and journaled with bytes each way."""
    proxy = Proxy(tmp_path / "p.sock", [f"127.0.0.1:{model.port}"])
    try:
        reply = _request(proxy.path, f"GET http://127.0.0.1:{model.port}/v1/models HTTP/1.0\r\n"
                                     f"Host: 127.0.0.1\r\n\r\n")
    finally:
        records = proxy.close()
    assert b"stand-in" in reply and model.hits == ["/v1/models"]
    (rec,) = records
    assert rec["allowed"] is True and rec["host"] == "127.0.0.1" and rec["port"] == model.port
    assert rec["bytes_out"] > 0 and rec["bytes_in"] == len(reply)


def test_denied_request_moves_no_byte(tmp_path: Path, model: CountingServer) -> None:
    """A host outside the allowlist gets 403; the upstream sees nothing; the record says 0/0."""
    proxy = Proxy(tmp_path / "p.sock", ["api.example.test:443"])
    try:
        reply = _request(proxy.path, f"CONNECT 127.0.0.1:{model.port} HTTP/1.1\r\n\r\n")
    finally:
        records = proxy.close()
    assert reply.startswith(b"HTTP/1.1 403")
    assert model.hits == []
    assert [(r["allowed"], r["bytes_in"], r["bytes_out"]) for r in records] == [(False, 0, 0)]


def test_name_rules_are_by_name_not_by_address(tmp_path: Path, model: CountingServer) -> None:
    """Allowing a name allows that name only: the same server by its address is refused."""
    proxy = Proxy(tmp_path / "p.sock", [f"localhost:{model.port}"])
    try:
        by_name = _request(proxy.path, f"CONNECT localhost:{model.port} HTTP/1.1\r\n\r\n")
        by_address = _request(proxy.path, f"CONNECT 127.0.0.1:{model.port} HTTP/1.1\r\n\r\n")
    finally:
        records = proxy.close()
    assert by_name.startswith(b"HTTP/1.1 200") and by_address.startswith(b"HTTP/1.1 403")
    assert [(r["host"], r["allowed"]) for r in records] == [("localhost", True),
                                                             ("127.0.0.1", False)]


def test_close_ends_everything_and_removes_the_socket(tmp_path: Path, model: CountingServer) -> None:
    """After close() no proxy thread is alive, the socket file is gone, and a held-open tunnel
    was cut."""
    proxy = Proxy(tmp_path / "p.sock", [f"127.0.0.1:{model.port}"])
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.connect(str(proxy.path))
    held.sendall(f"CONNECT 127.0.0.1:{model.port} HTTP/1.1\r\n\r\n".encode())
    assert held.recv(1024).startswith(b"HTTP/1.1 200")
    proxy.close()
    assert not proxy.path.exists()
    assert held.recv(1024) == b""
    assert not [t for t in threading.enumerate() if t.name.startswith("ledger-proxy")]
    held.close()


@pytest.mark.sandbox
@pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}")
def test_agent_reaches_its_loopback_model_through_an_unchanged_base_url(
        tmp_path: Path, model: CountingServer) -> None:
    """In the sandbox, a declared loopback endpoint answers at the same URL (forwarded), a
    denied host is refused through HTTPS_PROXY, both are journaled, and the run is passed, CLEAN."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    script = tmp_path / "bot.py"
    script.write_text(f"""
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:{model.port}/v1/models", timeout=10).read())
try:
    urllib.request.urlopen("https://denied.example.test/", timeout=10)
except OSError as exc:
    print("refused:", exc)
import os, socket
proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
s = socket.create_connection(("127.0.0.1", int(proxy[1])), timeout=10)
s.sendall(b"HELLO\\r\\n\\r\\n")
print("malformed request answered:", s.recv(100).split(b"\\r\\n")[0].decode(), flush=True)
s.close()
text = open("calc.py").read().replace("return a - b", "return a + b")
open("calc.py", "w").write(text)
""")
    (home.parent / "ledger.toml").write_text(
        f'[agents.bot]\ncommand = ["{sys.executable}", "{script}"]\n'
        f'endpoints = ["127.0.0.1:{model.port}"]\n')
    result = CliRunner().invoke(cli, ["--ledger", str(home), "run", "--json", "--task", "fix-add",
                                      "--agent", "bot", "--sandbox", "bwrap"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["attempts"][0]
    assert (row["outcome"], row["attestation"]) == ("passed", "CLEAN")
    assert model.hits == ["/v1/models"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        proxied = [e.data for e in j.entries(kind="net.connect") if e.data["source"] == "proxy"]
        started = next(j.entries(kind="agent.started")).data
    assert started["sandbox"]["network"] == "proxy"
    allowed = [r for r in proxied if r["allowed"]]
    denied = [r for r in proxied if not r["allowed"]]
    assert [(r["host"], r["port"]) for r in allowed] == [("127.0.0.1", model.port)]
    assert allowed[0]["bytes_in"] > 0 and allowed[0]["bytes_out"] > 0
    assert [(r["host"], r["port"], r["bytes_in"], r["bytes_out"], r["reason"]) for r in denied] == [
        ("denied.example.test", 443, 0, 0, "not on the network allowlist"),
        ("", 0, 0, 0, "malformed request: not an HTTP request line")]
    assert not Path(started["sandbox"]["sockets"][0]).exists()
    with Journal.open(home / "journal.db", readonly=True) as j:
        said = json.dumps([e.data for e in j.entries(kind="agent.output")])
        (att,) = [e.data["attestation"] for e in j.entries(kind="attestation")]
    assert "malformed request answered: HTTP/1.1 400 Bad Request" in said  # the attacker ran
    assert att["verdict"] == "CLEAN" and att["refused"]["count"] == 2
    assert [i["detail"] for i in att["refused"]["items"]] == [
        "denied.example.test:443 not on the network allowlist",
        ":0 malformed request: not an HTTP request line"]


def _raw(sock_path: Path, data: bytes) -> bytes:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock_path))
    s.sendall(data)
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_WR)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out


def test_malformed_requests_are_recorded_with_their_reason(tmp_path: Path) -> None:
    """A request line that is not HTTP, a target the proxy cannot use and a head over the limit
    are answered 400/431 and each recorded as a refused net.connect with the reason; a denied
    request carries its reason too."""
    from ledger.sandbox.net import HEAD_LIMIT

    proxy = Proxy(tmp_path / "p.sock", ["allowed.example:443"])
    try:
        answers = [_raw(proxy.path, b"HELLO\r\n\r\n"),
                   _raw(proxy.path, b"GET ftp://x.example/ HTTP/1.1\r\n\r\n"),
                   _raw(proxy.path, b"GET http://x.example/ HTTP/1.1\r\nX: " + b"a" * HEAD_LIMIT),
                   _raw(proxy.path, b"CONNECT denied.example:443 HTTP/1.1\r\n\r\n")]
    finally:
        records = proxy.close()
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [
        b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 431 Request Header Fields Too Large", b"HTTP/1.1 403 Forbidden"]
    assert len(records) == 4 and all(r["allowed"] is False for r in records)
    assert all(r["bytes_in"] == 0 and r["bytes_out"] == 0 for r in records)
    reasons = sorted(r["reason"] for r in records)
    assert reasons == ["malformed request: head over 65536 bytes",
                       "malformed request: not an HTTP request line",
                       "malformed request: unusable target",
                       "not on the network allowlist"]
    denied = next(r for r in records if r["reason"] == "not on the network allowlist")
    assert (denied["host"], denied["port"]) == ("denied.example", 443)
