"""The Session: the one way a run (``ledger run``) or a bench (``ledger bench``) opens on the
journal: keys, ``run.started``, the single writer, attestation as a policy over the entries it
writes, checkpoints, ``run.finished`` and the recorded views.

    session.py      ``Session``, ``new_run_id`` and ``attempt_id`` (the one id makers), ``HARNESS``
    writer.py       ``JournalWriter`` (the one writer) and ``InterruptGate`` (no torn append)
    attestation.py  ``AttestationPolicy``: ``CleanRunAttestation`` (a run), ``NoAttestation``
"""

from ledger.session.attestation import AttestationPolicy, CleanRunAttestation, NoAttestation
from ledger.session.session import HARNESS, Session, attempt_id, new_run_id
from ledger.session.writer import InterruptGate, JournalWriter

__all__ = ["HARNESS", "AttestationPolicy", "CleanRunAttestation", "InterruptGate",
           "JournalWriter", "NoAttestation", "Session", "attempt_id", "new_run_id"]
