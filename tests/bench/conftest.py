"""Fixtures for the bench tests: fake agent CLIs on PATH, a ledger in a temporary folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from tests import agent_env
from tests.bench import fakes
from tests.doc_tables import documented_fields as doc_table_fields

DOC = Path(__file__).resolve().parents[2] / "docs" / "bench.md"


def documented_fields() -> dict[str, set[str]]:
    """kind -> data fields named (in backticks, outside brackets) in docs/bench.md's table."""
    return doc_table_fields(DOC, r"bench\.[a-z_]+")


def check_documented(entries: list[Any]) -> None:
    """Every bench.* entry kind and top-level field written is in docs/bench.md."""
    doc = documented_fields()
    for e in entries:
        if not e.kind.startswith("bench."):
            continue
        assert e.kind in doc, f"{e.kind} is not documented in docs/bench.md"
        extra = set(e.data) - doc[e.kind]
        assert not extra, f"{e.kind} has undocumented fields {sorted(extra)}"


@dataclass
class BenchEnv:
    root: Path
    monkeypatch: pytest.MonkeyPatch

    @property
    def ledger(self) -> Path:
        return self.root / ".ledger"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def log(self) -> Path:
        return self.root / "prompts.jsonl"

    def fakes(self, **configs: dict[str, Any]) -> None:
        """Install fakes by name (``cursor_agent`` stands for ``cursor-agent``)."""
        named = {name.replace("_", "-"): {"log": str(self.log), **cfg} for name, cfg in configs.items()}
        fakes.install(self.bin, self.monkeypatch, named)

    def bench(self, *args: str) -> tuple[int, str, str]:
        res = CliRunner().invoke(cli, ["--ledger", str(self.ledger), "bench", *args])
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return res.exit_code, res.stdout, res.stderr

    def journal(self) -> Journal:
        return Journal.open(self.ledger / "journal.db", readonly=True)

    def entries(self, kind: str | None = None) -> list[Any]:
        with self.journal() as j:
            return list(j.entries(kind=kind))

    def prompts(self) -> list[dict[str, str]]:
        return fakes.prompts_seen(self.log)

    def reports(self, folder: str = "audit-results") -> list[str]:
        d = self.root / folder
        return sorted(p.name for p in d.iterdir()) if d.is_dir() else []

    def export(self, folder: str = "audit-results") -> dict[str, Any]:
        name = [n for n in self.reports(folder) if n.endswith(".json")][-1]
        data: dict[str, Any] = json.loads((self.root / folder / name).read_text(encoding="utf-8"))
        return data


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BenchEnv]:
    """A temporary working folder with nothing agent-like on PATH until fakes are installed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_HOME", raising=False)
    monkeypatch.setenv("PATH", agent_env.system_path())
    yield BenchEnv(tmp_path, monkeypatch)
