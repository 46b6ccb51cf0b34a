"""``ledger.verify.Verifier``: policies of composable checks, one error channel, typed steps.

The journal is the verify benchmark's (real signed attestations by the coordinator's Attestor,
a recorded view); ``tests/cli`` and ``tests/journal`` check what ``ledger verify`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.verify_audit import RUN, build
from cli.verify_render import render_lines
from ledger.errors import NotFound, UsageError, VerificationError
from ledger.journal.bundle import export_bundle
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from ledger.verify import (
    AuditRuns,
    Bundle,
    FindingsError,
    JournalIntegrity,
    RememberCheckpoint,
    Target,
    Verifier,
    VerifyOptions,
    verify,
)
from ledger.verify.steps import (
    Audited,
    BundleChecked,
    BundleScope,
    EntryTarget,
    JournalChecked,
    RememberedChecked,
    RunTarget,
)

ATTEMPTS = 2


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("verify") / "ledger"
    build(home, ATTEMPTS)
    return home


@pytest.fixture
def home(built: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "ledger"
    shutil.copytree(built, copy)
    return copy


def _keys(home: Path) -> Any:
    return load_keys(home / "keys")


def test_journal_policy_runs_integrity_then_audit(home: Path) -> None:
    """Plain verify: the journal recomputed, then every attestation and view audited."""
    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j:
        v = verify(j, keys.verifier, VerifyOptions(remember=False))
        size = j.size
    assert [type(s) for s in v.steps] == [JournalChecked, Audited]
    assert v.ok and v.findings == []
    audit = v.steps[1]
    assert isinstance(audit, Audited) and audit.report.attestations == ATTEMPTS
    data = v.as_dict()
    assert data["level"] == "journal" and data["size"] == size and data["audit"]["attestations"] == ATTEMPTS
    assert v.summary == f"journal verified (size {size}, root {data['root'][:16]}...)"
    json.dumps(data)  # the report is JSON as it is


def test_a_policy_is_any_sequence_of_checks(home: Path) -> None:
    """Checks compose: integrity alone is a policy; a check that needs an earlier one says so."""
    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j:
        only = Verifier(keys.verifier).verify(j, (JournalIntegrity(),))
        with pytest.raises(UsageError, match="after JournalIntegrity"):
            Verifier(keys.verifier).verify(j, (AuditRuns(),))
        run = Verifier(keys.verifier, keys_dir=home / "keys").verify(j, (JournalIntegrity(), Target(RUN[:6])))
    assert [type(s) for s in only.steps] == [JournalChecked]
    target = run.steps[1]
    assert isinstance(target, RunTarget) and target.run == RUN and len(target.attestations) == ATTEMPTS
    assert all(a.report.level == "secret-key" for a in target.attestations)  # the keys folder has the master
    assert run.summary.startswith(f"run {RUN} verified (")


def test_an_attestation_hash_names_its_entry(home: Path) -> None:
    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j:
        att = next(j.entries(kind="attestation"))
        v = verify(j, keys.verifier, VerifyOptions(target=att.data["hash"], remember=False))
    target = v.steps[1]
    assert isinstance(target, EntryTarget) and target.seq == att.seq and target.attestation is not None
    assert v.as_dict()["target"]["attestation"]["seq"] == att.seq
    assert v.summary == f"attestation at seq {att.seq} verified ({target.attestation.report.verdict})"


def test_a_hash_that_names_nothing_raises_not_found(home: Path) -> None:
    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j, pytest.raises(NotFound):
        verify(j, keys.verifier, VerifyOptions(target="ab" * 32, remember=False))


def test_findings_raise_once_with_the_whole_verification(home: Path) -> None:
    """A view that no longer replays is a finding: the audit goes on, then ONE error is raised
    (a VerificationError naming the first finding) carrying every step for the caller to show."""
    keys = _keys(home)
    with Journal.open(home / "journal.db", harness=True) as j:
        view = next(j.entries(kind="view.recorded"))
        j.append("view.recorded", {**view.data, "forged": True}, run=RUN)
        j.checkpoint(keys)
    with Journal.open(home / "journal.db", readonly=True) as j, pytest.raises(FindingsError) as exc:
        verify(j, keys.verifier, VerifyOptions(remember=False))
    err = exc.value
    assert isinstance(err, VerificationError) and err.check == "view-replay"
    got = err.verification
    assert not got.ok and got.findings[0].check == "view-replay" and err.seq == got.findings[0].seq
    assert [type(s) for s in got.steps] == [JournalChecked, Audited]
    assert any(line.startswith("view-replay: seq ") for line in render_lines(got))


def test_a_failed_integrity_check_raises_before_any_other(home: Path) -> None:
    """Stored bytes changed under the tree: the journal check raises; no audit runs on them."""
    from tests.journal.tamper_cases import drop_triggers, raw_db

    with raw_db(home / "journal.db") as con:
        drop_triggers(con)
        (body,) = con.execute("SELECT body FROM entries WHERE seq = 3").fetchone()
        assert b"demo" in bytes(body)
        con.execute("UPDATE entries SET body = ? WHERE seq = 3", (bytes(body).replace(b"demo", b"DEMO"),))
    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j, pytest.raises(VerificationError) as exc:
        verify(j, keys.verifier, VerifyOptions(remember=False))
    assert not isinstance(exc.value, FindingsError) and exc.value.check == "leaf-hash" and exc.value.seq == 3


def test_bundle_policy_checks_signature_scope_and_target(home: Path) -> None:
    keys = _keys(home)
    with Journal.open(home / "journal.db", harness=True) as j:
        data = export_bundle(j, keys, run=RUN)
    v = verify(Bundle(data), keys.verifier, VerifyOptions(target=RUN, remember=False))
    assert [type(s) for s in v.steps] == [BundleChecked, BundleScope, RunTarget]
    target = v.steps[2]
    assert isinstance(target, RunTarget) and target.from_bundle and len(target.attestations) == ATTEMPTS
    assert all(a.report.level == "journal" for a in target.attestations)  # no secret from a bundle
    assert v.as_dict()["bundle_kind"] == "run" and v.as_dict()["level"] == "public-key"
    data["root"] = "00" * 32
    with pytest.raises(VerificationError) as exc:
        verify(Bundle(data), keys.verifier, VerifyOptions(remember=False))
    assert exc.value.check == "bundle-checkpoint"


def test_remembered_checkpoint_is_proved_on_the_second_verify(home: Path, tmp_path: Path) -> None:
    keys = _keys(home)
    seen = tmp_path / "seen"
    policy = (JournalIntegrity(), RememberCheckpoint(seen))
    with Journal.open(home / "journal.db", readonly=True) as j:
        first = Verifier(keys.verifier).verify(j, policy).steps[1]
        second = Verifier(keys.verifier).verify(j, policy).steps[1]
    assert isinstance(first, RememberedChecked) and first.remembered.previous_size is None
    assert isinstance(second, RememberedChecked) and second.remembered.proved
    assert Path(second.remembered.path).parent == seen


def test_every_step_renders(home: Path) -> None:
    """The CLI renderer has lines for every step a policy returns (and refuses an unknown one)."""
    from cli.verify_render import _lines

    keys = _keys(home)
    with Journal.open(home / "journal.db", readonly=True) as j:
        v = verify(j, keys.verifier, VerifyOptions(target=RUN, remember=False), keys_dir=home / "keys")
    lines = render_lines(v)
    assert lines[0].startswith("journal: ") and lines[-1].startswith("runs: 1; ")
    assert sum(line.startswith("attestation ") for line in lines) == ATTEMPTS
    with pytest.raises(TypeError):
        _lines(object())  # type: ignore[arg-type]
