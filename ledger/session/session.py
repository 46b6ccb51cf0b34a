"""The Session: the one way anything opens a run on the journal.

    session = Session.open(home)                   keys (created if absent), the journal (created,
                                                   checked sound before anything is appended)
    writer = session.start(run_id, started)        ``run.started``, then the single writer
    writer = session.attach(run_id, prior)         a resumed run: its entries read back, folded
    session.resume(remaining, interrupted)         unreported attempts marked, ``run.resumed``
    session.finish(status, attempts, completed)    ``run.finished`` (with its ``entries`` digest)
    session.record_view(evaluator, version, view)  ``view.recorded``
    session.checkpoint()                           a signed checkpoint of the journal head
    session.close()

``ledger run`` (``ledger.run.coordinator.execute_run``) and ``ledger bench``
(``ledger.bench.runner.run_bench``) both open their runs here; the attestation policy
(``ledger.session.attestation``) is applied to every entry the writer appends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import ledger
from ledger.home import LedgerHome
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.journal.keys import load_or_init_keys
from ledger.session.attestation import AttestationPolicy
from ledger.session.writer import InterruptGate, JournalWriter

HARNESS = f"eval-ledger {ledger.__version__}"


def new_run_id(now: datetime, rng: Callable[[int], bytes] = os.urandom, *, prefix: str = "r") -> str:
    """``<prefix>-<UTC time>-<6 hex>``: ``r`` for a run, ``b`` for a bench (the one id maker)."""
    return f"{prefix}-{now.strftime('%Y%m%dT%H%M%SZ')}-{rng(3).hex()}"


def attempt_id(run_id: str, task: str, agent: str, repeat: int, try_no: int) -> str:
    """``<run>/<task>/<agent>/<repeat>/<try>`` (``evaluators.fold.parse_attempt_id`` splits it)."""
    return f"{run_id}/{task}/{agent}/{repeat}/{try_no}"


class Session:
    """One run on one journal: its keys, its single writer, its life cycle entries."""

    def __init__(self, home: LedgerHome, journal: Journal, keys: Any) -> None:
        self.home, self.journal, self.keys = home, journal, keys
        self.gate = InterruptGate()
        self._writer: JournalWriter | None = None

    @classmethod
    def open(cls, home: LedgerHome) -> Session:
        """Keys (made on first use, 0600) and the journal, checked sound before anything is
        appended (``JournalUnreadable`` otherwise)."""
        home.path.mkdir(parents=True, exist_ok=True)
        keys = load_or_init_keys(home.keys_dir)
        journal = Journal.open(home.journal_path, create=True, harness=True)
        try:
            journal.store.check_sound()
        except BaseException:
            journal.close()
            raise
        return cls(home, journal, keys)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.journal.close()

    @property
    def writer(self) -> JournalWriter:
        if self._writer is None:
            raise RuntimeError("the session has no run yet: call start() or attach() first")
        return self._writer

    @property
    def run_id(self) -> str:
        return self.writer.run_id

    def _open_writer(self, run_id: str, fold: bool,
                     attestation: AttestationPolicy | None) -> JournalWriter:
        if self._writer is not None:
            raise RuntimeError(f"the session already writes run {self._writer.run_id}")
        self._writer = JournalWriter(self.journal, run_id, self.gate, fold=fold,
                                     attestation=attestation)
        return self._writer

    def start(self, run_id: str, started: Mapping[str, Any], *, fold: bool = True,
              attestation: AttestationPolicy | None = None,
              listeners: Sequence[Callable[[Entry], object]] = ()) -> JournalWriter:
        """A new run: its writer, and its ``run.started`` (``harness_version`` added when the
        caller gives none), the first entry the listeners see."""
        writer = self._open_writer(run_id, fold, attestation)
        writer.listeners.extend(listeners)
        writer.append("run.started", {"harness_version": HARNESS, **started})
        return writer

    def attach(self, run_id: str, prior: Sequence[Entry], *,
               attestation: AttestationPolicy | None = None,
               listeners: Sequence[Callable[[Entry], object]] = ()) -> JournalWriter:
        """A run journaled before (resumed): its writer, with ``prior`` (the run's entries, read
        once by the caller) folded and shown to the policy and listeners; nothing is appended."""
        writer = self._open_writer(run_id, True, attestation)
        writer.listeners.extend(listeners)
        for entry in prior:
            writer.observe(entry)
        return writer

    def resume(self, remaining: Sequence[str], interrupted: Mapping[str, str | None]) -> None:
        """Continue an attached run: the attempts that never reported (``{attempt: task}``) get
        ``attempt.finished`` with status ``interrupted`` (one transaction), every attempt left
        unattested is attested, then ``run.resumed`` names the attempts still to run."""
        writer = self.writer
        if interrupted:
            writer.append_many([
                ("attempt.finished", {"attempt": attempt, "status": "interrupted",
                                      "error": "no result was recorded (the coordinator stopped)"},
                 task) for attempt, task in interrupted.items()])
        writer.settle()
        writer.append("run.resumed", {"remaining": list(remaining)})

    def finish(self, status: str, attempts: int, completed: int) -> Entry:
        """``run.finished``; the writer adds ``entries``, the digest of the run's entries."""
        return self.writer.append("run.finished", {"status": status, "attempts": attempts,
                                                   "completed": completed})

    def record_view(self, evaluator: str, version: Any, view: Mapping[str, Any]) -> Entry:
        """``view.recorded``: an evaluator's view of the run, what ``ledger replay`` checks."""
        return self.writer.append("view.recorded", {"evaluator": evaluator, "version": version,
                                                    "view": view})

    def checkpoint(self) -> str:
        """A signed checkpoint of the journal head (after anything held back is appended)."""
        if self._writer is not None:
            return self._writer.checkpoint(self.keys)
        return self.journal.checkpoint(self.keys)
