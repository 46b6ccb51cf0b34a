"""ledger serve: the tlog-tiles caching rules and content types, strict paths, loopback only;
the monitor over HTTP."""

from __future__ import annotations

import gzip
import http.client
from pathlib import Path

import pytest

from ledger.errors import UsageError
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.publish.http import serve_directory
from ledger.publish.monitor import HttpSource, check_log
from ledger.publish.writer import publish


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_serve_follows_the_caching_rules_and_the_monitor_reads_it(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    out = tmp_path / "pub"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
        size = j.size
    (tmp_path / "secret.txt").write_text("not published")
    server = serve_directory(out).start()
    try:
        status, h, body = _get(server.port, "/checkpoint")
        assert status == 200 and body == (out / "checkpoint").read_bytes()
        assert h["content-type"] == "text/plain; charset=utf-8" and h["cache-control"] == "no-cache, max-age=0"
        status, h, body = _get(server.port, "/tile/0/000")
        assert status == 200 and len(body) == 8192 and h["content-type"] == "application/octet-stream"
        assert h["cache-control"] == "public, max-age=31536000, immutable"
        partial = f"/tile/entries/{size >> 8:03d}.p/{size % 256}"
        status, h, body = _get(server.port, partial, {"Accept-Encoding": "gzip"})
        assert status == 200 and h.get("content-encoding") == "gzip"
        assert gzip.decompress(body) == (out / partial.lstrip("/")).read_bytes()
        for bad in ("/../secret.txt", "/tile/0/../../../secret.txt", "/tile/0/0", "/tile/0/000.p/0",
                    "/tile/64/000", "/", "/tile/0"):
            assert _get(server.port, bad)[0] == 404, bad
        (out / "tile" / "7").symlink_to(tmp_path)  # a symlinked folder does not lead out
        (tmp_path / "000").write_text("outside")
        assert _get(server.port, "/tile/7/000")[0] == 404
        report = check_log(HttpSource(server.url), keys.verifier, state_dir=tmp_path / "seen")
        assert report.ok and report.size == size and len(report.replayed) == 2
    finally:
        server.close()


def test_serve_refuses_other_addresses_and_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "pub").mkdir()
    with pytest.raises(UsageError, match="no published log"):
        serve_directory(tmp_path / "pub")
    (tmp_path / "pub" / "checkpoint").write_text("x")
    with pytest.raises(UsageError, match="not a loopback address"):
        serve_directory(tmp_path / "pub", host="0.0.0.0")
