"""An attestation entry checked against its journal (ledger.verify.attestations), against a real
SQLite journal and key files."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from attest.attestation import COMMITMENT_KEY_LABEL, SEAL_KEY_LABEL, build_attestation
from attest.commitment import build_commitment
from attest.redact import Redactor
from attest.scan import ScanPolicy, scan_attempt
from ledger.errors import VerificationError
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, init_keys
from ledger.verify.attestations import check_attestation_entry, show_attestation
from tests.attest.conftest import (
    ATTEMPT,
    MATERIAL,
    PUBLIC,
    RUN,
    SOLUTION_PAIRS,
    TASK,
    TASK_ROOT,
    Recorder,
    honest,
)


def _record(journal: Journal, keyring: KeyRing, *, dirty: bool) -> tuple[dict[str, Any], Any]:
    ckey = keyring.subkey(COMMITMENT_KEY_LABEL)
    com = build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=TASK_ROOT)
    red = Redactor(com, ckey)
    rec = Recorder(redact=red, commitment=com)
    honest(rec)
    if dirty:
        rec.read(f"{TASK_ROOT}/solution/textkit/pairs.py", SOLUTION_PAIRS)
    journal.append_many([(e.kind, e.data, e.run, e.task) for e in rec.entries])
    note = journal.checkpoint(keyring)
    policy = ScanPolicy.for_attempt(worktree="/tmp/ledger-attempt-abcd/wt",
                                    home="/tmp/ledger-attempt-abcd/home",
                                    scratch="/tmp/ledger-attempt-abcd/scratch",
                                    interpreter_prefixes=("/opt/py",),
                                    network_allowlist=("pypi.org:443",))
    result = scan_attempt(journal.entries(), attempt=ATTEMPT, commitment=com, policy=policy,
                          scanner=red)
    att = build_attestation(result, checkpoint_note=note, signer=keyring.signer,
                            seal_key=keyring.subkey(SEAL_KEY_LABEL),
                            prove=lambda seq, size: journal.inclusion_proof(seq, size).hashes)
    from attest.attestation import attestation_hash

    entry = journal.append("attestation", {"attempt": ATTEMPT, "attestation": att,
                                           "hash": attestation_hash(att)}, run=RUN, task=TASK)
    return att, entry


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    """A ledger home with keys and an open journal."""
    home = tmp_path / ".ledger"
    home.mkdir()
    keyring = init_keys(home / "keys", name="eval-ledger/attest-cli", rng=random.Random(3).randbytes)
    journal = Journal.open(home / "journal.db", create=True,
                           clock=itertools.count(1_700_000_000_000_000_000, 1000).__next__, harness=True)
    yield home, keyring, journal
    journal.close()


@pytest.mark.parametrize("dirty", [False, True])
def test_verify_entry_reaches_secret_level(setup: Any, dirty: bool) -> None:
    """With the journal and the key folder, every level is checked and reported."""
    home, keyring, journal = setup
    att, entry = _record(journal, keyring, dirty=dirty)
    got = check_attestation_entry(journal, entry, key=keyring.verifier, keys_dir=home / "keys")
    out = got.as_dict()
    assert out["level"] == "secret-key" and got.seq == entry.seq and out["seq"] == entry.seq
    assert out["verdict"] == ("DIRTY" if dirty else "CLEAN")
    assert any("root at size" in line for line in got.report.checks)
    assert show_attestation(att)["verdict"] == out["verdict"]


def test_verify_entry_without_secret_stops_at_journal_level(setup: Any) -> None:
    """No key folder: public-key and journal checks only, and the report says what was skipped."""
    _, keyring, journal = setup
    _, entry = _record(journal, keyring, dirty=False)
    got = check_attestation_entry(journal, entry, key=keyring.verifier, keys_dir=None)
    assert got.report.level == "journal"
    assert not any(c.startswith(("seal", "rescan")) for c in got.report.checks)


def test_hash_field_must_name_the_attestation(setup: Any) -> None:
    """An attestation entry whose hash field was altered fails the attestation-hash check."""
    _, keyring, journal = setup
    att, _ = _record(journal, keyring, dirty=False)
    bad = journal.append("attestation", {"attempt": ATTEMPT, "attestation": att, "hash": "0" * 64},
                         run=RUN, task=TASK)
    with pytest.raises(VerificationError) as err:
        check_attestation_entry(journal, bad, key=keyring.verifier, keys_dir=None)
    assert err.value.check == "attestation-hash"


def test_truncated_journal_fails_checkpoint_journal(setup: Any) -> None:
    """The journal seen by verify is shorter than the attestation's checkpoint: rejected."""
    _, keyring, journal = setup
    _, entry = _record(journal, keyring, dirty=False)

    class Short:
        """The same journal, reporting fewer entries than it had when the attestation was made."""

        size = 5

        def entries(self, **kw: Any) -> Any:
            return journal.entries(**kw)

        def root_at(self, size: int) -> bytes:
            return journal.root_at(size)

    with pytest.raises(VerificationError) as err:
        check_attestation_entry(Short(), entry, key=keyring.verifier, keys_dir=None)  # type: ignore[arg-type]
    assert err.value.check == "checkpoint-journal"
