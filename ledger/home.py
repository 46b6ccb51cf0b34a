"""Where a ledger lives on disk: the journal, keys, checkpoints and operator overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIRNAME = ".ledger"


@dataclass(frozen=True)
class LedgerHome:
    """The ledger directory (default ``./.ledger``; ``--ledger PATH`` or ``LEDGER_HOME``)."""

    path: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> LedgerHome:
        if explicit:
            return cls(Path(explicit))
        env = os.environ.get("LEDGER_HOME")
        if env:
            return cls(Path(env))
        return cls(Path.cwd() / DEFAULT_DIRNAME)

    @property
    def journal_path(self) -> Path:
        return self.path / "journal.db"

    @property
    def keys_dir(self) -> Path:
        return self.path / "keys"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def golden_dir(self) -> Path:
        return self.path / "golden"

    @property
    def validated_dir(self) -> Path:
        """Where ``ledger tasks validate`` keeps its records (``ledger.tasks.validations``)."""
        return self.path / "validated"

    @property
    def config_path(self) -> Path:
        return self.path.parent / "ledger.toml"
