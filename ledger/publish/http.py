"""The HTTP parts: a static server for a published directory (``ledger serve``), the tlog-witness
server (``ledger witness serve``), and the two clients (a witness's add-checkpoint, a GET).

Both servers bind loopback unless the caller passes ``allow_remote`` (``--allow-remote``): an
address that is not loopback is refused with a UsageError.

Caching (c2sp.org/tlog-tiles): ``checkpoint`` is mutable and served with ``Cache-Control:
no-cache, max-age=0`` (no cache keeps it beyond the moment), tiles, entry bundles and large
entries are immutable (a new width is a new name) and served with ``Cache-Control: public,
max-age=31536000, immutable``. Entry bundles are gzipped when the client accepts gzip.
"""

from __future__ import annotations

import gzip
import ipaddress
import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ledger.errors import UsageError

CHECKPOINT_CACHE = "no-cache, max-age=0"
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
_N = r"(?:x[0-9]{3}/)*[0-9]{3}"
_W = r"(?:\.p/(?:[1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))?"
PUBLISHED_PATH = re.compile(rf"checkpoint|tile/(?:[0-9]|[1-5][0-9]|6[0-3]|entries)/{_N}{_W}|large/[0-9a-f]{{64}}")
USER_AGENT = "eval-ledger"


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless ``allow_remote``."""
    if allow_remote:
        return
    try:
        infos = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
        loopback = bool(infos) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in infos)
    except (socket.gaierror, ValueError):
        loopback = False
    if not loopback:
        raise UsageError(f"refusing to bind {host}: not a loopback address (pass --allow-remote to serve "
                         "other hosts)")


class _Quiet(BaseHTTPRequestHandler):
    server_version = "eval-ledger"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        log = getattr(self.server, "access_log", None)
        if log is not None:
            log(format % args)

    def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _static_handler(root: Path) -> type[BaseHTTPRequestHandler]:
    root = root.resolve()

    class Static(_Quiet):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            rel = self.path.split("?", 1)[0].lstrip("/")
            text = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}
            if not PUBLISHED_PATH.fullmatch(rel):
                self._send(404, b"not found\n", text)
                return
            path = root / rel
            try:
                # nothing outside the directory, not even through a symlinked folder inside it
                if path.is_symlink() or not path.resolve().is_relative_to(root) or not path.is_file():
                    raise FileNotFoundError
                data = path.read_bytes()
            except OSError:
                self._send(404, b"not found\n", text)
                return
            if rel == "checkpoint":
                self._send(200, data, {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": CHECKPOINT_CACHE})
                return
            headers = {"Content-Type": "application/octet-stream", "Cache-Control": IMMUTABLE_CACHE}
            if rel.startswith("tile/entries/") and "gzip" in (self.headers.get("Accept-Encoding") or ""):
                data = gzip.compress(data, compresslevel=6, mtime=0)
                headers["Content-Encoding"] = "gzip"
                headers["Vary"] = "Accept-Encoding"
            self._send(200, data, headers)

        do_HEAD = do_GET  # noqa: N815

    return Static


def _witness_handler(answer: Callable[[bytes], Any], max_body: int) -> type[BaseHTTPRequestHandler]:
    class Witness(_Quiet):
        def do_POST(self) -> None:  # noqa: N802
            text = {"Content-Type": "text/plain; charset=utf-8"}
            if self.path.split("?", 1)[0] != "/add-checkpoint":
                self._send(404, b"not found\n", text)
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._send(411, b"Content-Length required\n", text)
                return
            if not 0 <= length <= max_body:
                self._send(413, b"request body too large\n", text)
                return
            got = answer(self.rfile.read(length))
            self._send(got.status, got.body.encode("utf-8"), {"Content-Type": got.content_type})

        def do_GET(self) -> None:  # noqa: N802
            self._send(405, b"use POST /add-checkpoint\n", {"Content-Type": "text/plain; charset=utf-8",
                                                            "Allow": "POST"})

    return Witness


class Server:
    """A running ThreadingHTTPServer in a background thread (``url``, ``close()``)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str, port: int,
                 access_log: Callable[[str], None] | None = None) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class _Srv(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self.httpd = _Srv((host, port), handler)
        self.httpd.access_log = access_log  # type: ignore[attr-defined]
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> Server:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ledger-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)


def serve_directory(directory: Path, host: str = "127.0.0.1", port: int = 0, *, allow_remote: bool = False,
                    access_log: Callable[[str], None] | None = None) -> Server:
    """A static server for a published directory (not started: call ``start`` or ``serve_forever``)."""
    check_bind(host, allow_remote)
    if not (Path(directory) / "checkpoint").is_file():
        raise UsageError(f"{directory} holds no published log (no checkpoint): run `ledger publish` first")
    return Server(_static_handler(Path(directory)), host, port, access_log)


def serve_witness(witness: Any, logs: Mapping[str, Sequence[Any]], host: str = "127.0.0.1", port: int = 0, *,
                  allow_remote: bool = False, access_log: Callable[[str], None] | None = None) -> Server:
    """The tlog-witness server for ``witness`` (``ledger.journal.witness.Witness``) and ``logs``."""
    from ledger.journal.witness import MAX_REQUEST_BYTES, add_checkpoint

    check_bind(host, allow_remote)
    if not logs:
        raise UsageError("a witness needs at least one log to witness: give --log-vkey")
    return Server(_witness_handler(lambda body: add_checkpoint(witness, logs, body), MAX_REQUEST_BYTES),
                  host, port, access_log)


# --------------------------------------------------------------------------- clients


def post_add_checkpoint(url: str, old_size: int, proof: Sequence[bytes], note: str,
                        timeout: float = 30.0) -> tuple[int, str]:
    """One tlog-witness add-checkpoint request to the submission prefix ``url``."""
    import base64

    body = (f"old {old_size}\n" + "".join(base64.b64encode(h).decode("ascii") + "\n" for h in proof)
            + "\n" + note).encode("utf-8")
    req = urllib.request.Request(url.rstrip("/") + "/add-checkpoint", data=body, method="POST",
                                 headers={"Content-Type": "text/plain; charset=utf-8", "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (the URL is the operator's)
            return int(resp.status), resp.read(1 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(1 << 16).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"cannot reach witness {url}: {reason}") from None


def http_get(url: str, timeout: float = 30.0) -> bytes | None:
    """GET ``url``: its body, None for 404/410, UsageError for anything else that fails."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip, identity", "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            data = resp.read()
            if resp.headers.get("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            return data
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return None
        raise UsageError(f"GET {url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, EOFError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"GET {url}: {reason}") from None
