"""Shared pieces of the publishing tests: a ledger with keys and real runs, the CLI, snapshots."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from evaluators.views import recorded_view_data
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, init_keys, load_keys
from tests.cli.test_report_cmds import builder
from tests.journal.tamper_cases import seeded_rng

ORIGIN = "example.test/ledger"
RUN_A = "r-20261201T100000Z-aaaaaa"
RUN_B = "r-20261201T110000Z-bbbbbb"


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


def add_run(home: Path, run: str, outcomes: dict[str, bool], *, notes: int = 0, record: bool = True) -> None:
    """A run from the evaluator test builder, ``notes`` ext.note entries in it, its recorded view."""
    b = builder(run, outcomes)
    items = [(e.kind, e.data, e.run, e.task) for e in b.entries]
    items[1:1] = [("ext.note", {"i": i, "secret": f"private transcript {run} {i}"}, run, None) for i in range(notes)]
    with Journal.open(home / "journal.db", create=True, harness=True) as j:
        j.append_many(items)
        if record:
            j.append("view.recorded", recorded_view_data(j.entries(run=run), run), run=run)


def add_filler(home: Path, n: int, *, run: str | None = None) -> None:
    with Journal.open(home / "journal.db", create=True, harness=True) as j:
        for s in range(0, n, 10_000):
            j.append_many([("ext.filler", {"i": s + i}, run, None) for i in range(min(10_000, n - s))])


@pytest.fixture(scope="session")
def _keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("publish-keys") / "keys"
    init_keys(d, name=ORIGIN, rng=seeded_rng(7))
    return d


@pytest.fixture
def home(tmp_path: Path, _keys: Path) -> Path:
    h = tmp_path / "L"
    h.mkdir()
    shutil.copytree(_keys, h / "keys")
    return h


@pytest.fixture
def keys(home: Path) -> KeyRing:
    return load_keys(home / "keys")


@pytest.fixture
def vkey(keys: KeyRing) -> str:
    return keys.verifier.vkey


@pytest.fixture
def ledger(home: Path) -> Path:
    """A ledger with two real runs (views recorded) and 600 filler entries between them."""
    add_run(home, RUN_A, {"t1": True, "t2": False}, notes=3)
    add_filler(home, 600)
    add_run(home, RUN_B, {"t1": False, "t2": True})
    return home


@pytest.fixture
def journal(ledger: Path) -> Iterator[Journal]:
    with Journal.open(ledger / "journal.db") as j:
        yield j


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file: (inode, mtime_ns, bytes)."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(directory))] = (st.st_ino, st.st_mtime_ns, p.read_bytes())
    return out
