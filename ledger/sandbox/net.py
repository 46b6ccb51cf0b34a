"""The attempt's network: an HTTP/HTTPS (CONNECT) proxy the harness owns, on a unix socket.

    agent --> 127.0.0.1:PORT inside (forwarder.py) --> unix socket bound into the sandbox
          --> Proxy (this module, in the harness, outside every namespace) --> the host's network

The sandbox has no network of its own; ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` point at the
forwarder, and declared loopback endpoints are forwarded to the same port inside. The proxy
allows only the attempt's allowlist (task ``network_allowlist`` and the agent's declared model
endpoints), matched by the **name** the client asked for (the CONNECT host, or the host of an
absolute-form HTTP request), never by an address it happens to share. A denied request gets
``403`` and moves no byte to or from the upstream. Every request is recorded
(``net.connect``: host, port, allowed, bytes each way, start, duration), refused ones with the
``reason``: ``not on the network allowlist``, or ``malformed request: ...`` for a request the
proxy answered ``400``/``431`` without knowing where it meant to go (host ``""``, port 0);
``close()`` ends every connection and removes the socket.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.endpoints import host_allowed

HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
_CHUNK = 65536
PROXY_PORT = 3128  # inside the sandbox, unless a forwarded endpoint takes it
FORWARDER = str(Path(__file__).with_name("forwarder.py"))  # run inside, by the interpreter


@dataclass
class Connection:
    host: str
    port: int
    method: str
    allowed: bool
    started: float
    bytes_out: int = 0  # agent -> upstream
    bytes_in: int = 0  # upstream -> agent
    duration_s: float = 0.0
    error: str | None = None
    reason: str | None = None  # why the proxy refused it (None: allowed)

    def as_data(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "family": "inet", "source": "proxy",
                "method": self.method, "allowed": self.allowed, "bytes_out": self.bytes_out,
                "bytes_in": self.bytes_in, "started": round(self.started, 6),
                "duration_s": round(self.duration_s, 6), "error": self.error,
                "reason": self.reason}


def _parse_target(method: str, target: str) -> tuple[str, int, str] | None:
    """(host, port, origin-form path) of a proxy request line's target; None when unusable."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        path = ""
    else:
        if not target.lower().startswith("http://"):
            return None
        rest = target[7:]
        hostport, slash, tail = rest.partition("/")
        path = slash + tail or "/"
        host, sep, port = hostport.rpartition(":")
        if not sep:
            host, port = hostport, "80"
    host = host.strip("[]").lower()
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port), path


class Proxy:
    """One attempt's proxy (see the module docstring). ``allowed(host, port)`` decides."""

    def __init__(self, socket_path: Path, allowlist: Sequence[str],
                 allowed: Callable[[str, int], bool] | None = None) -> None:
        """``allowed(host, port)`` decides each request (the caller's matcher over
        ``allowlist``); without one, ``ledger.endpoints.host_allowed`` over ``allowlist``, the
        matcher the scan's ``ScanPolicy.endpoint_allowed`` uses too."""
        if allowed is None:
            entries = tuple(allowlist)

            def allowed(host: str, port: int) -> bool:
                return host_allowed(entries, host, port)

        self.path = Path(socket_path)
        self.allowlist = tuple(allowlist)
        self._allowed = allowed
        self.records: list[Connection] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the sandbox's uid connects to it
        self._server.listen(64)
        self._accept = threading.Thread(target=self._loop, name="ledger-proxy", daemon=True)
        self._accept.start()

    def allowed(self, host: str, port: int) -> bool:
        return self._allowed(host, port)

    # -- serving --------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            t = threading.Thread(target=self._handle, args=(client,), name="ledger-proxy-conn",
                                 daemon=True)
            with self._lock:
                self._open.add(client)
                self._threads.append(t)
            t.start()

    def _refuse(self, started: float, method: str, why: str) -> Connection:
        """Record a request the proxy could not serve at all (no host, no port)."""
        rec = Connection("", 0, method[:16], False, started, reason=f"malformed request: {why}")
        with self._lock:
            self.records.append(rec)
        return rec

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        rec: Connection | None = None
        started = time.time()
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    if head:
                        rec = self._refuse(started, "", "closed before the end of its head")
                    return
                head += chunk
                if len(head) > HEAD_LIMIT:
                    rec = self._refuse(started, head.split(b" ", 1)[0].decode("latin-1"),
                                       f"head over {HEAD_LIMIT} bytes")
                    client.sendall(b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n")
                    return
            raw_head, _, body = head.partition(b"\r\n\r\n")
            lines = raw_head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                rec = self._refuse(started, "", "not an HTTP request line")
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            method, target, version = parts
            parsed = _parse_target(method.upper(), target)
            if parsed is None:
                rec = self._refuse(started, method.upper(), "unusable target")
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            host, port, path = parsed
            rec = Connection(host, port, method.upper(), self.allowed(host, port), started)
            if not rec.allowed:
                rec.reason = "not on the network allowlist"
            with self._lock:
                self.records.append(rec)
            if not rec.allowed:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
                upstream.settimeout(None)
            except OSError as exc:
                rec.error = f"{type(exc).__name__}: {exc}"[:200]
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            with self._lock:
                self._open.add(upstream)
            if rec.method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                first = body
            else:
                rest = "\r\n".join(ln for ln in lines[1:]
                                   if not ln.lower().startswith("proxy-"))
                first = f"{method} {path} {version}\r\n{rest}\r\n\r\n".encode("latin-1") + body
            if first:
                upstream.sendall(first)
                rec.bytes_out += len(first)
            self._relay(client, upstream, rec)
        except OSError as exc:
            if rec is not None and rec.error is None:
                rec.error = f"{type(exc).__name__}"
        finally:
            if rec is not None:
                rec.duration_s = time.time() - rec.started
            for s in (client, upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()
                    with self._lock:
                        self._open.discard(s)

    def _relay(self, client: socket.socket, upstream: socket.socket, rec: Connection) -> None:
        def pump(src: socket.socket, dst: socket.socket, outward: bool) -> None:
            try:
                while chunk := src.recv(_CHUNK):
                    dst.sendall(chunk)
                    with self._lock:
                        if outward:
                            rec.bytes_out += len(chunk)
                        else:
                            rec.bytes_in += len(chunk)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pump, args=(upstream, client, False), daemon=True)
        back.start()
        pump(client, upstream, True)
        back.join()

    # -- end ------------------------------------------------------------------------------------

    def close(self) -> list[dict[str, Any]]:
        """Stop serving, end every connection, remove the socket; the records, oldest first."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            sockets = list(self._open)
            threads = list(self._threads)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._accept.join(timeout=5)
        for t in threads:
            t.join(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with self._lock:
            return [r.as_data() for r in sorted(self.records, key=lambda r: r.started)]


def forwarder_command(python: str, socket_path: Path, forward_ports: Sequence[int],
                      argv: Sequence[str]) -> tuple[list[str], int]:
    """(the argv that runs ``argv`` behind the forwarder, the proxy port inside)."""
    proxy_port = PROXY_PORT
    while proxy_port in forward_ports:
        proxy_port += 1
    ports = ",".join(str(p) for p in forward_ports)
    return [python, "-I", "-S", FORWARDER, str(socket_path), str(proxy_port), ports, "--",
            *argv], proxy_port


def proxy_env(port: int) -> dict[str, str]:
    """The proxy variables the agent gets (loopback goes direct: forwarded ports are there)."""
    url = f"http://127.0.0.1:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    return env


def loopback_ports(endpoints: Sequence[Mapping[str, Any]]) -> list[int]:
    """Ports of the declared endpoints that are loopback hosts (forwarded to the same port)."""
    out: list[int] = []
    for rec in endpoints:
        host, port = str(rec.get("host", "")).lower(), rec.get("port")
        if host in ("localhost", "127.0.0.1", "::1") and isinstance(port, int):
            out.append(port)
    return sorted(set(out))
