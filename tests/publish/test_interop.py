"""The published tiles checked by code this project did not write: Go's
golang.org/x/mod/sumdb/tlog (Debian's golang-golang-x-mod-dev), built offline by the test.

tests/publish/gotlog/main.go maps Go's tile paths (tile/8/L/N, tile/8/data/N) to C2SP's
(tile/L/N, tile/entries/N) and nothing else: the tile hashing, the tree hash, the inclusion and
consistency proofs are Go's, and it checks every bundle entry against the leaf hash Go reads
(and authenticates) from the tiles."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing
from ledger.publish.writer import Policy, publish
from tests.publish.conftest import add_filler

GOPATH = Path("/usr/share/gocode")
SOURCE = Path(__file__).with_name("gotlog") / "main.go"


@pytest.fixture(scope="module")
def gotlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (.ci/run installs golang-go)")
    if not (GOPATH / "src/golang.org/x/mod/sumdb/tlog/tile.go").is_file():
        pytest.skip("golang.org/x/mod/sumdb/tlog is not installed (.ci/run installs golang-golang-x-mod-dev)")
    work = tmp_path_factory.mktemp("gotlog")
    shutil.copy(SOURCE, work / "main.go")
    env = {**os.environ, "GOPATH": str(GOPATH), "GO111MODULE": "off", "GOFLAGS": "", "GOPROXY": "off",
           "GOCACHE": str(work / "cache"), "CGO_ENABLED": "0"}
    try:
        res = subprocess.run([go, "build", "-o", str(work / "gotlog"), "main.go"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("go build took over 300 s")
    if res.returncode != 0:
        pytest.skip(f"go build failed offline: {res.stderr.strip()[:300]}")
    return work / "gotlog"


def _go_check(gotlog: Path, out: Path, size: int, root: bytes, *olds: int) -> dict[str, object]:
    res = subprocess.run([str(gotlog), str(out), str(size), base64.b64encode(root).decode(), *map(str, olds)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_go_sumdb_tlog_checks_the_published_tree(ledger: Path, keys: KeyRing, tmp_path: Path, gotlog: Path) -> None:
    """Three tile levels (a full level-1 tile), withheld markers, a large entry, an incremental
    publish: Go computes the checkpoint's root from the tiles and checks inclusion proofs, the
    consistency proofs from earlier sizes, and every entry against its leaf."""
    out = tmp_path / "pub"
    with Journal.open(ledger, harness=True) as j:
        j.append("ext.big", {"blob": "q" * 70_000})
        first_size = j.size
        publish(j, out, keys, policy=Policy(withhold=("ext.note",)))
    add_filler(ledger, 66_000)
    with Journal.open(ledger) as j:
        publish(j, out, keys, policy=Policy(withhold=("ext.note",)))
        size, root = j.head()
    got = _go_check(gotlog, out, size, root, first_size, 1, 256, 65_536)
    assert got == {"size": size, "root": base64.b64encode(root).decode(), "entries": size - 4, "markers": 4,
                   "inclusion_proofs": 4, "consistency_proofs": 4}


def test_go_sumdb_tlog_rejects_a_tampered_tile(ledger: Path, keys: KeyRing, tmp_path: Path, gotlog: Path) -> None:
    """The same Go check fails on a flipped hash in a level-1 tile: the program can fail."""
    add_filler(ledger, 65_536)
    out = tmp_path / "pub"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
        size, root = j.head()
    tile = out / "tile/1/000"
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))
    res = subprocess.run([str(gotlog), str(out), str(size), base64.b64encode(root).decode()],
                         capture_output=True, text=True, timeout=300)
    # Go authenticates tile/1/000 against the level-2 tile above it when a proof first needs it
    assert res.returncode == 1, res.stdout
    assert "invalid transparency proof" in res.stderr, res.stderr
