"""The Session: run.started first, one writer, the attestation policy applied after every write,
run.finished with the digest of the run's entries, resume that marks and attests what was left."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from ledger.home import LedgerHome
from ledger.journal import merkle
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.journal.verify import verify_store
from ledger.session import CleanRunAttestation, Session, attempt_id


class FakeAttestor:
    """Records what it was asked to attest; ``fail`` names attempts it raises on."""

    def __init__(self, fail: Collection[str] = ()) -> None:
        self.calls: list[tuple[str, list[str], Collection[int] | None]] = []
        self.fail = set(fail)

    def attest(self, run_id: str, attempt_id: str, task_id: str, task: Any,
               entries: Sequence[Entry], written: Collection[int] | None = None
               ) -> dict[str, Any] | None:
        self.calls.append((attempt_id, [e.kind for e in entries],
                           None if written is None else set(written)))
        if attempt_id in self.fail:
            raise ValueError("scanner broke")
        return {"attempt": attempt_id, "attestation": {"verdict": "CLEAN"}, "hash": "h"}


def _policy(run: str, attestor: FakeAttestor, failures: list[str]) -> CleanRunAttestation:
    return CleanRunAttestation(run, attestor, {}, lambda a, exc: failures.append(f"{a}: {exc}"))


def _attempt(writer: Any, aid: str, task: str, *, commit: bool = True,
             finish: bool = True) -> None:
    writer.append("attempt.started", {"attempt": aid}, task=task)
    if commit:
        writer.hold("commitment", {"attempt": aid, "commitment": {}}, task)
    writer.hold("agent.finished", {"attempt": aid}, task)
    if finish:
        writer.hold("attempt.finished", {"attempt": aid, "status": "completed"}, task)
    writer.flush()


def _kinds(home: LedgerHome, run: str) -> list[tuple[str, Any]]:
    with Journal.open(home.journal_path) as j:
        return [(e.kind, e.data.get("attempt")) for e in j.entries(run=run)]


def test_attestation_follows_each_finished_attempt_with_a_commitment(tmp_path: Path) -> None:
    home = LedgerHome(tmp_path / "l")
    attestor, failures = FakeAttestor(), []
    with Session.open(home) as s:
        w = s.start("r-1", {"config": {}}, attestation=_policy("r-1", attestor, failures))
        a1, a2 = attempt_id("r-1", "t", "x", 1, 1), attempt_id("r-1", "t", "x", 2, 1)
        _attempt(w, a1, "t")
        _attempt(w, a2, "t", commit=False)  # failed before its workspace: no attestation
        s.finish("finished", 2, 2)
        s.checkpoint()
    kinds = _kinds(home, "r-1")
    assert kinds[0][0] == "run.started"
    i = kinds.index(("attempt.finished", a1))
    assert kinds[i + 1] == ("attestation", a1)
    assert ("attestation", a2) not in kinds
    # the attestor saw the attempt's own entries, and the seqs this session wrote for it
    (aid, seen, written), = attestor.calls
    assert aid == a1 and seen == ["attempt.started", "commitment", "agent.finished",
                                  "attempt.finished"]
    assert written is not None and len(written) == 4
    assert failures == []


def test_run_finished_carries_the_digest_of_the_runs_entries(tmp_path: Path) -> None:
    home = LedgerHome(tmp_path / "l")
    with Session.open(home) as s:
        w = s.start("r-1", {"config": {}})
        w.append("ext.note", {"n": 1})
        s.record_view("golden", "1", {"x": 1})
        s.finish("finished", 0, 0)
        s.checkpoint()
        verifier = s.keys.verifier
    with Journal.open(home.journal_path) as j:
        entries = list(j.entries(run="r-1"))
        verify_store(j.store, verifier=verifier)  # raises on any bad byte or checkpoint
    digest = merkle.RunDigest()
    for e in entries[:-1]:
        if merkle.in_run_digest(e.kind):
            digest.add(e.leaf_hash)
    assert entries[-1].kind == "run.finished"
    assert entries[-1].data["entries"] == digest.as_data()
    assert entries[0].data["harness_version"].startswith("eval-ledger ")


def test_a_failing_attestation_is_reported_once_and_the_run_goes_on(tmp_path: Path) -> None:
    home = LedgerHome(tmp_path / "l")
    attestor, failures = FakeAttestor(fail={"r-1/t/x/1/1"}), []
    with Session.open(home) as s:
        w = s.start("r-1", {"config": {}}, attestation=_policy("r-1", attestor, failures))
        _attempt(w, "r-1/t/x/1/1", "t")
        _attempt(w, "r-1/t/x/2/1", "t")
        s.finish("finished", 2, 2)
    assert failures == ["r-1/t/x/1/1: scanner broke"]
    assert [c[0] for c in attestor.calls] == ["r-1/t/x/1/1", "r-1/t/x/2/1"]  # not retried
    assert ("attestation", "r-1/t/x/2/1") in _kinds(home, "r-1")


def test_resume_marks_unreported_attempts_then_attests_all_left_in_commitment_order(
        tmp_path: Path) -> None:
    home = LedgerHome(tmp_path / "l")
    # a first coordinator: one attempt finished but unattested (it failed), one never reported
    with Session.open(home) as s:
        w = s.start("r-1", {"config": {}}, attestation=_policy("r-1", FakeAttestor(
            fail={"r-1/t/x/1/1"}), []))
        _attempt(w, "r-1/t/x/1/1", "t")
        _attempt(w, "r-1/t/x/2/1", "t", finish=False)
    with Journal.open(home.journal_path) as j:
        prior = list(j.entries(run="r-1"))
    attestor, failures = FakeAttestor(), []
    with Session.open(home) as s:
        policy = _policy("r-1", attestor, failures)
        s.attach("r-1", prior, attestation=policy)
        assert policy.unattested() == [("r-1/t/x/1/1", "t")]
        assert _kinds(home, "r-1") == [(e.kind, e.data.get("attempt")) for e in prior]
        s.resume(["r-1/t/x/2/2"], {"r-1/t/x/2/1": "t"})
    tail = _kinds(home, "r-1")[len(prior):]
    assert tail == [("attempt.finished", "r-1/t/x/2/1"), ("attestation", "r-1/t/x/1/1"),
                    ("attestation", "r-1/t/x/2/1"), ("run.resumed", None)]
    # read back, not written by this session: every result entry is bound (written=None)
    assert [c[2] for c in attestor.calls] == [None, None]


def test_a_session_without_a_run_refuses_to_write(tmp_path: Path) -> None:
    with Session.open(LedgerHome(tmp_path / "l")) as s, pytest.raises(RuntimeError, match="no run"):
        s.finish("finished", 0, 0)


def test_a_session_writes_one_run_only(tmp_path: Path) -> None:
    with Session.open(LedgerHome(tmp_path / "l")) as s:
        s.start("r-1", {"config": {}})
        with pytest.raises(RuntimeError, match="already writes run r-1"):
            s.start("r-2", {"config": {}})


def test_a_damaged_journal_is_refused_before_anything_is_appended(tmp_path: Path) -> None:
    from ledger.errors import LedgerError

    home = LedgerHome(tmp_path / "l")
    with Session.open(home) as s:
        s.start("r-1", {"config": {}})
    raw = bytearray(home.journal_path.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)
    home.journal_path.write_bytes(bytes(raw))
    before = home.journal_path.read_bytes()
    with pytest.raises(LedgerError):
        Session.open(home)
    assert home.journal_path.read_bytes() == before


def test_the_session_imports_nothing_above_it() -> None:
    """The run and the bench use the session; it imports neither (nor the CLI)."""
    from tests.test_layers import _imports

    root = Path(__file__).resolve().parents[2] / "ledger" / "session"
    files = sorted(root.glob("*.py"))
    assert files
    for path in files:
        bad = {n for n in _imports(path)
               if n.startswith(("ledger.run", "ledger.bench", "ledger.sandbox", "cli"))}
        assert not bad, f"{path.name} imports {sorted(bad)}"
