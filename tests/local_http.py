"""A small HTTP server on 127.0.0.1 for tests: answers every GET with one body, counts the paths."""

from __future__ import annotations

import http.server
import threading
from typing import Any


class CountingServer:
    """Serves ``body`` to every GET on an OS-chosen loopback port and records the paths asked for.

    Use as a context manager (``with CountingServer(b"...") as server``) or call ``close()``.
    """

    def __init__(self, body: bytes) -> None:
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.hits = hits
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> CountingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
