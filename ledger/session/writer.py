"""The single journal writer of a run, and the gate that keeps Ctrl-C out of an append.

    JournalWriter(journal, run_id, gate, fold=..., attestation=...)
      append / append_many / hold + flush   every entry filed under the run, appended whole
      observe(entry)                        an entry read back (a resumed run), folded the same way
      after each write: the attestation policy's due attestations are appended (see
      ``ledger.session.attestation``)
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from evaluators import fold as golden
from ledger.journal import merkle
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.session.attestation import AttestationPolicy, NoAttestation


class InterruptGate:
    """Ctrl-C and SIGTERM become KeyboardInterrupt, but never inside ``critical()``."""

    def __init__(self) -> None:
        self._depth = 0
        self._pending = False
        self._saved: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handler)

    def uninstall(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def _handler(self, _signum: int, _frame: Any) -> None:
        if self._depth:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._pending:
                self._pending = False
                raise KeyboardInterrupt


class JournalWriter:
    """The one way a run or a bench appends to the journal (made by ``Session``).

    Every entry is filed under the writer's run and appended whole (Ctrl-C is held by the gate
    while an entry is written); ``hold`` keeps streamed entries back so a burst is appended as
    one transaction (``flush``, or the next ``append``); each entry appended, and each one read
    back with ``observe`` (a resumed run), goes to the attestation policy and the ``listeners``
    once and is folded into ``state``, the golden evaluator's fold of the run (``fold=False``: a
    bench, whose leaderboard folds through a listener), so nothing is read back to score it.
    After every write the policy's due attestations are appended (``settle``).
    """

    def __init__(self, journal: Journal, run_id: str, gate: InterruptGate | None = None,
                 *, fold: bool = True, attestation: AttestationPolicy | None = None) -> None:
        self.journal, self.run_id = journal, run_id
        self.gate = gate or InterruptGate()
        self.state = golden.new_state(run_id)
        self.attestation: AttestationPolicy = attestation or NoAttestation()
        self._fold = fold
        self.listeners: list[Callable[[Entry], object]] = []  # results are ignored
        self._pending: list[tuple[str, dict[str, Any], str | None, str | None]] = []
        self._digest = merkle.RunDigest()  # the run's entries so far, for run.finished
        self._settling = False

    def observe(self, entry: Entry, *, appended: bool = False) -> None:
        """Fold one entry of the run (``appended``: this writer wrote it, else read back)."""
        if entry.run == self.run_id and merkle.in_run_digest(entry.kind):
            self._digest.add(entry.leaf_hash)
        self.attestation.observe(entry, appended=appended)
        if self._fold:
            golden.fold(self.state, entry)
        for listener in self.listeners:
            listener(entry)

    def append(self, kind: str, data: Mapping[str, Any], *, task: str | None = None) -> Entry:
        """Append one entry; a ``run.finished`` is given ``entries``, the digest of every entry of
        the run before it (what a bundle of the run's own entries proves complete against)."""
        self.flush()
        if kind == "run.finished":
            data = {**data, "entries": self._digest.as_data()}
        with self.gate.critical():
            entry = self.journal.append(kind, data, run=self.run_id, task=task)
            self.observe(entry, appended=True)
        self.settle()
        return entry

    def append_many(self, items: Sequence[tuple[str, Mapping[str, Any], str | None]]) -> list[Entry]:
        """``(kind, data, task)`` items in one transaction, after anything held back."""
        self.flush()
        with self.gate.critical():
            entries = self.journal.append_many(
                [(kind, dict(data), self.run_id, task) for kind, data, task in items])
            for entry in entries:
                self.observe(entry, appended=True)
        self.settle()
        return entries

    def hold(self, kind: str, data: dict[str, Any], task: str | None) -> int:
        """Keep one entry back for the next flush; returns how many are held."""
        self._pending.append((kind, data, self.run_id, task))
        return len(self._pending)

    def flush(self) -> None:
        """Append the entries held back, in order, as one transaction."""
        if self._pending:
            with self.gate.critical():
                entries = self.journal.append_many(self._pending)
                self._pending.clear()
                for entry in entries:
                    self.observe(entry, appended=True)
            self.settle()

    def settle(self) -> None:
        """Append the attestations the policy says are due, each right after its attempt's last
        entry; one that fails is reported by the policy and never stops the run."""
        if self._settling:
            return
        self._settling = True
        try:
            for attempt, task in self.attestation.due():
                try:
                    with self.gate.critical():
                        data = self.attestation.attest(attempt, task)
                        if data is not None:
                            self.append("attestation", data, task=task)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # a harness bug must not lose the rest of the run
                    self.attestation.failed(attempt, exc)
        finally:
            self._settling = False

    def checkpoint(self, keys: Any) -> str:
        self.flush()
        return self.journal.checkpoint(keys)
