"""Attestation as a policy over the entries a session writes.

    AttestationPolicy   what the writer asks after every write: which attempts are due
                        (``due``), their attestation data (``attest``), a failure (``failed``)
    NoAttestation       a bench: nothing is attested
    CleanRunAttestation a run: an attempt that journaled a ``commitment`` is due once its
                        ``attempt.finished`` is journaled; the scan and the signing are the
                        ``Attestor``'s (``ledger.run.attestor``), handed in

The policy keeps, as the entries are appended (or read back on resume), each attempt's entries
until it is attested, so nothing is read back from the journal to attest it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from ledger.journal.codec import Entry


class AttestationPolicy(Protocol):
    def observe(self, entry: Entry, *, appended: bool) -> None:
        """One entry of the run: appended by this session, or read back (a resumed run)."""

    def due(self) -> list[tuple[str, str]]:
        """``(attempt, task)`` of the attempts to attest now, in the order to attest them."""

    def attest(self, attempt: str, task: str) -> dict[str, Any] | None:
        """The data of the attempt's ``attestation`` entry (None: nothing to attest)."""

    def failed(self, attempt: str, error: Exception) -> None:
        """Attesting ``attempt`` raised ``error`` (reported; the run goes on)."""


class NoAttestation:
    """Nothing is attested (a bench: its calls journal no commitment)."""

    def observe(self, entry: Entry, *, appended: bool) -> None:
        return None

    def due(self) -> list[tuple[str, str]]:
        return []

    def attest(self, attempt: str, task: str) -> dict[str, Any] | None:
        raise LookupError(f"no attestation policy: {attempt} cannot be attested")

    def failed(self, attempt: str, error: Exception) -> None:
        raise error


class Attestor(Protocol):
    """``ledger.run.attestor.Attestor``: scans one attempt and builds its attestation data."""

    def attest(self, run_id: str, attempt_id: str, task_id: str, task: Any,
               entries: Sequence[Entry],
               written: Collection[int] | None = None) -> dict[str, Any] | None: ...


class CleanRunAttestation:
    """The clean-run attestation of every attempt that journaled a commitment, once it finished.

    ``tasks`` maps task ids to the task objects the attestor rebuilds commitments from;
    ``on_failure(attempt, error)`` reports an attestation that raised. An attempt is tried once
    per session (a resumed run tries again the ones left unattested).
    """

    def __init__(self, run_id: str, attestor: Attestor, tasks: Mapping[str, Any],
                 on_failure: Callable[[str, Exception], None]) -> None:
        self.run_id, self.attestor, self.tasks = run_id, attestor, tasks
        self.on_failure = on_failure
        self._entries: dict[str, list[Entry]] = {}  # attempt id -> its entries, until attested
        self._committed: dict[str, str] = {}  # attempt id -> task, for attempts with a commitment
        self._finished: set[str] = set()
        self._attested: set[str] = set()
        self._tried: set[str] = set()
        # Attempts this session started, and the seqs of their entries it appended itself (what
        # an attestation binds as the attempt's results; evaluators count no other).
        self._mine: set[str] = set()
        self._written: dict[str, set[int]] = {}

    def observe(self, entry: Entry, *, appended: bool) -> None:
        attempt = entry.data.get("attempt")
        if not isinstance(attempt, str):
            return
        if appended:
            self._written.setdefault(attempt, set()).add(entry.seq)
        if attempt not in self._attested and entry.kind != "attestation":
            self._entries.setdefault(attempt, []).append(entry)
        kind = entry.kind
        if kind == "attempt.started" and appended:
            self._mine.add(attempt)
        elif kind == "commitment" and entry.task is not None:
            self._committed[attempt] = entry.task
        elif kind == "attempt.finished":
            self._finished.add(attempt)
        elif kind == "attestation":
            self._attested.add(attempt)
            self._entries.pop(attempt, None)

    def unattested(self) -> list[tuple[str, str]]:
        """``(attempt, task)`` of the attempts that journaled a commitment and finished but have
        no attestation (e.g. the coordinator stopped in between)."""
        return [(attempt, task) for attempt, task in self._committed.items()
                if attempt in self._finished and attempt not in self._attested]

    def due(self) -> list[tuple[str, str]]:
        return [(a, t) for a, t in self.unattested() if a not in self._tried]

    def attest(self, attempt: str, task: str) -> dict[str, Any] | None:
        self._tried.add(attempt)
        entries = [e for e in self._entries.get(attempt, []) if e.task == task]
        return self.attestor.attest(
            self.run_id, attempt, task, self.tasks.get(task), entries,
            written=self._written.get(attempt) if attempt in self._mine else None)

    def failed(self, attempt: str, error: Exception) -> None:
        self.on_failure(attempt, error)
