"""``ledger view --serve``: the report page on 127.0.0.1 (``/``) and its comparison page
(``/compare.html``), rebuilt from the journal per request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.view.model import Read, as_stored
from ledger.view.write import COMPARISON_PAGE, Verification, build_comparison, build_page

HOST = "127.0.0.1"  # never another interface: the page shows diffs and transcripts


Reading = Callable[[], tuple[Read, Verification]]
"""A fresh reader per request: how the runs are read, and what their verification says."""


def _as_stored() -> tuple[Read, Verification | None]:
    return as_stored, None


def make_server(journal_path: Path, runs: Sequence[str], *, port: int, refresh_s: int,
                reading: Reading | None = None) -> ThreadingHTTPServer:
    """A server for the page (not started); the page reloads every ``refresh_s`` s while any
    shown run is unfinished; each request reads (and verifies) the journal anew."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?")[0]
            if path not in ("/", "/index.html", "/" + COMPARISON_PAGE):
                self.send_error(404)
                return
            try:
                read, verification = (reading or _as_stored)()

                def build(refresh: int | None) -> tuple[str, list[Any]]:
                    if path == "/" + COMPARISON_PAGE:
                        return build_comparison(journal_path, runs, index_href="/",
                                                refresh_s=refresh, read=read,
                                                verification=verification)
                    return build_page(journal_path, runs, refresh_s=refresh, read=read,
                                      verification=verification, compare_href=COMPARISON_PAGE)

                page, reports = build(None)
                if any(r.views["status"] != "finished" for r in reports):
                    page, _ = build(refresh_s)
                body, status = page.encode("utf-8"), 200
            except LedgerError as exc:
                body, status = f"error: {exc}".encode(), 500
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8" if status == 200
                             else "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

    return ThreadingHTTPServer((HOST, port), Handler)


def serve_reports(journal_path: Path, runs: Sequence[str], *, port: int, refresh_s: int,
                  ready: Callable[[str], None], reading: Reading | None = None) -> None:
    """Serve until interrupted."""
    server = make_server(journal_path, runs, port=port, refresh_s=refresh_s, reading=reading)
    ready(f"http://{HOST}:{server.server_address[1]}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
