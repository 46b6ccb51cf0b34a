"""Shared fixtures for the journal tests: a ledger home, deterministic keys, an open journal."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, init_keys, load_keys
from tests.journal.tamper_cases import KEY_NAME, counter_clock, seeded_rng


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh ledger directory (the journal, keys/ and checkpoints/ live under it)."""
    path = tmp_path / ".ledger"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def _session_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Key files made once per session from a fixed seed (init_keys fsyncs; copying does not)."""
    keys_dir = tmp_path_factory.mktemp("session-keys") / "keys"
    init_keys(keys_dir, name=KEY_NAME, rng=seeded_rng(1))
    return keys_dir


@pytest.fixture
def keyring(home: Path, _session_keys: Path) -> KeyRing:
    """The log's signing key, installed in ``home/keys`` (modes kept) and loaded from there."""
    shutil.copytree(_session_keys, home / "keys")
    return load_keys(home / "keys")


@pytest.fixture(scope="session")
def other_keyring(tmp_path_factory: pytest.TempPathFactory) -> KeyRing:
    """A second key with the same name but different key material (an impostor)."""
    return init_keys(tmp_path_factory.mktemp("other") / "keys", name=KEY_NAME, rng=seeded_rng(2))


@pytest.fixture
def db_path(home: Path) -> Path:
    """Where the journal database lives inside ``home``."""
    return home / "journal.db"


@pytest.fixture
def journal(db_path: Path) -> Iterator[Journal]:
    """An empty on-disk journal with a deterministic clock, closed after the test."""
    j = Journal.open(db_path, create=True, clock=counter_clock(), harness=True)
    try:
        yield j
    finally:
        j.close()
