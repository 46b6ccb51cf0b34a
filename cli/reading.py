"""Verified reading for the commands that show runs (report, failures, compare, leaderboard, view,
export): the run's entries are checked (``ledger.journal.reading``) before anything is shown, and
the command says so in one line; a failure refuses with the verify error (exit 1), or, with
``--unverified``, shows the page under a banner that says what failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from ledger.errors import KeyMaterialError, VerificationError
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal

F = TypeVar("F")


def unverified_option(func: F) -> F:
    """Add ``--unverified`` (show what the journal holds even when it does not verify)."""
    return click.option(  # type: ignore[no-any-return]
        "--unverified", is_flag=True,
        help="Show it even when the journal does not verify, under a banner saying what failed.",
    )(func)


@dataclass
class Reading:
    """What was read for one command: per run, its entries and how they were verified."""

    verified: bool = True
    checkpoint: int | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The one line a command prints about what it verified."""
        if not self.verified:
            return "UNVERIFIED: " + "; ".join(self.failures) + " (shown because of --unverified)"
        text = (f"verified against checkpoint {self.checkpoint}" if self.checkpoint else
                "checked against the tree only: no signed checkpoint yet (`ledger checkpoint`)")
        return text + ("; " + "; ".join(self.notes) if self.notes else "")

    def as_dict(self) -> dict[str, Any]:
        return {"verified": self.verified, "checkpoint": self.checkpoint,
                "failures": list(self.failures), "notes": list(self.notes), "line": self.line()}


class Reader:
    """Reads runs for a command, verifying each (``unverified``: record failures instead of raising)."""

    def __init__(self, home: Any, *, unverified: bool) -> None:
        self.home, self.unverified = home, unverified
        self.reading = Reading()
        self._verifier: Any = None
        # per run read and verified: the tree's level 0 its entries were checked against
        # (ledger.journal.reading.leaf_of), so that a command needs not hash them again
        self.leaves: dict[str, bytes] = {}

    def _key(self) -> Any:
        if self._verifier is None:
            from ledger.journal.keys import load_verifier

            try:
                self._verifier = load_verifier(self.home.keys_dir)
            except KeyMaterialError as exc:
                raise KeyMaterialError(f"cannot verify what would be shown: {exc} (pass "
                                       "--unverified to show it unchecked)") from exc
        return self._verifier

    def entries(self, journal: Journal, run_id: str) -> list[Entry]:
        """The run's entries, verified (or, with ``--unverified``, as stored, failures noted)."""
        from ledger.journal.reading import read_run

        try:
            got = read_run(journal, run_id, self._key)
        except (VerificationError, KeyMaterialError) as exc:
            if not self.unverified:
                raise
            self.reading.verified = False
            self.reading.failures.append(f"run {run_id}: {exc}")
            return list(journal.entries(run=run_id, check_canonical=False))
        self.leaves[run_id] = got.leaves
        r = self.reading
        if got.checkpoint_size:
            r.checkpoint = max(r.checkpoint or 0, got.checkpoint_size)
        if got.unsigned:
            r.notes.append(f"run {run_id}: {got.unsigned} entries not under a signed checkpoint yet "
                           "(checked against the tree only)")
        if not got.complete:
            r.notes.append(f"run {run_id}: recorded before run.finished held its entries' digest")
        return got.entries
