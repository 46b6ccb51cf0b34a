"""The grading phase in the attestation (attest/grading_scan.py): judged, summarized, re-derived.

Crafted journals: an honest attempt followed by its ``grading.trace``. A clean trace keeps the
attempt CLEAN and the summary says what grading did; a hidden-test read, a network attempt or a
read under the task folder is a match (DIRTY); a capture or sandbox failure during grading makes
the verdict UNOBSERVED. The summary is signed and re-derived at every level: a rewritten one is
caught.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from attest.attestation import verify_attestation
from attest.grading_scan import HIDDEN_READ, NETWORK, READ_SCOPE, check_summary
from attest.redact import Redactor
from attest.scan import ScanPolicy
from ledger.errors import MalformedInput, VerificationError
from ledger.journal.note import Signer
from tests.attest.conftest import FakeKeys, Recorder, attest, honest
from tests.attest.test_attestation import resign

RUNNER = ["/opt/py/bin/python", "-m", "pytest", "-q", "tests_hidden", "-p",
          "ledger_grading_reporter"]


def command(**facts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "label": "python", "status": "strace", "runner": RUNNER, "processes": 0, "execs": [],
        "outside": [], "outside_count": 0, "network": [], "hidden_reads": [], "hidden_count": 0,
        "marked": True}
    return {**base, **facts}


def graded(rec: Recorder, *commands: dict[str, Any], status: str = "strace") -> None:
    honest(rec)
    rec.add("grading.trace", {"status": status, "filter": "seccomp-bpf",
                              "commands": list(commands)})
    rec.add("attempt.finished", {"status": "completed", "error": None})


def _verify_all(att: dict[str, Any], rec: Recorder, signer: Signer, keys: FakeKeys) -> str:
    report = verify_attestation(att, verifier_public_key=signer.verifier,
                                journal_entries=rec.entries, secret_key=keys)
    assert report.level == "secret-key"
    return report.verdict


def test_clean_grading_keeps_the_attempt_clean_and_is_summarized(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    graded(rec, command(processes=1, execs=[["/bin/true"]]), command(label="signal"))
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "CLEAN"
    assert att["grading"] == {"trace": "strace", "observed": True, "commands": 2, "processes": 1,
                              "outside": 0, "network": 0, "hidden_reads": 0, "canaries": None}
    assert _verify_all(att, rec, signer, keys) == "CLEAN"


@pytest.mark.parametrize(("facts", "cls"), [
    ({"hidden_reads": [{"path": "tests_hidden/test_a.py", "by": "runner",
                        "phase": "after-collection"}], "hidden_count": 9}, HIDDEN_READ),
    ({"hidden_reads": [{"path": "tests_hidden/test_a.py", "by": "child",
                        "phase": "collection"}], "hidden_count": 1}, HIDDEN_READ),
    ({"network": [{"family": "inet", "host": "10.2.3.4", "port": 80, "loopback": False}]},
     NETWORK),
    ({"outside": [{"path": "/srv/golden/smoke/t-pairs/solution/textkit/pairs.py",
                   "hidden": True}], "outside_count": 1}, READ_SCOPE),
], ids=["read-after-collection", "read-by-a-child", "network", "task-folder"])
def test_a_grading_finding_is_a_provable_match(rec: Recorder, redactor: Redactor,
                                               policy: ScanPolicy, signer: Signer,
                                               keys: FakeKeys, facts: dict[str, Any],
                                               cls: str) -> None:
    graded(rec, command(**facts))
    trace_seq = next(e.seq for e in rec.entries if e.kind == "grading.trace")
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "DIRTY"
    assert [(m["seq"], m["class"]) for m in att["matches"]] == [(trace_seq, cls)]
    assert att["matches"][0]["proof"]["leaf_index"] == trace_seq
    assert _verify_all(att, rec, signer, keys) == "DIRTY"


def test_loopback_and_plain_outside_reads_are_reported_not_matched(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    graded(rec, command(network=[{"family": "inet", "host": "127.0.0.1", "port": 8080,
                                  "loopback": True}],
                        outside=[{"path": "/opt/data/x.csv", "hidden": False}], outside_count=1))
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "CLEAN"
    assert att["grading"]["network"] == 1 and att["grading"]["outside"] == 1


@pytest.mark.parametrize("how", ["trace-failed", "command-failed", "sandbox-failed"])
def test_a_capture_or_sandbox_failure_during_grading_is_unobserved(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys, how: str) -> None:
    if how == "sandbox-failed":
        honest(rec)
        rec.add("sandbox.failed", {"stage": "grading", "backend": "bwrap",
                                   "message": "bwrap: cannot mount"})
        rec.add("attempt.finished", {"status": "error", "error": "sandbox"})
    elif how == "trace-failed":
        graded(rec, status="failed")
    else:
        graded(rec, command(), command(status="failed", detail="no trace log"))
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "UNOBSERVED"
    assert att["grading"]["observed"] is False
    assert att["grading"]["trace"] == ("sandbox-failed" if how == "sandbox-failed" else "failed")
    assert _verify_all(att, rec, signer, keys) == "UNOBSERVED"


def test_a_finding_wins_over_a_failed_capture(rec: Recorder, redactor: Redactor,
                                              policy: ScanPolicy, signer: Signer,
                                              keys: FakeKeys) -> None:
    graded(rec, command(hidden_count=1, hidden_reads=[
        {"path": "tests_hidden/t.py", "by": "child", "phase": "collection"}]),
        command(status="failed"))
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "DIRTY" and att["grading"]["observed"] is False


def test_tracing_off_is_said_and_does_not_change_the_verdict(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    graded(rec, status="off")
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "CLEAN" and att["grading"]["trace"] == "off"


def test_a_journal_without_grading_entries_keeps_its_old_attestation(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    assert "grading" not in att and att["verdict"] == "CLEAN"


def test_a_forged_clean_from_an_unobserved_grading_is_rejected(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    """A forger with the signing key turns UNOBSERVED into CLEAN: setting only the verdict
    fails the public re-derivation; also rewriting the summary fails against the journal."""
    graded(rec, status="failed")
    att = attest(rec, redactor, policy, signer, keys)
    verdict_only = resign({**copy.deepcopy(att), "verdict": "CLEAN"}, signer)
    with pytest.raises(VerificationError) as err:
        verify_attestation(verdict_only, verifier_public_key=signer.verifier)
    assert err.value.check == "verdict"
    both = copy.deepcopy(att)
    both["verdict"] = "CLEAN"
    both["grading"].update(trace="strace", observed=True)
    both = resign(both, signer)
    verify_attestation(both, verifier_public_key=signer.verifier)  # consistent on its face
    with pytest.raises(VerificationError) as err:
        verify_attestation(both, verifier_public_key=signer.verifier,
                           journal_entries=rec.entries)
    assert "grading summary differs" in str(err.value)


def test_a_rewritten_grading_summary_breaks_the_signature(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
        keys: FakeKeys) -> None:
    graded(rec, command(processes=3))
    att = attest(rec, redactor, policy, signer, keys)
    forged = copy.deepcopy(att)
    forged["grading"]["processes"] = 0
    with pytest.raises(VerificationError):
        verify_attestation(forged, verifier_public_key=signer.verifier)


@pytest.mark.parametrize("bad", [
    {"trace": "strace"},
    {"trace": "magic", "observed": True, "commands": 0, "processes": 0, "outside": 0,
     "network": 0, "hidden_reads": 0, "canaries": None},
    {"trace": "failed", "observed": True, "commands": 0, "processes": 0, "outside": 0,
     "network": 0, "hidden_reads": 0, "canaries": None},
    {"trace": "strace", "observed": True, "commands": -1, "processes": 0, "outside": 0,
     "network": 0, "hidden_reads": 0, "canaries": None},
], ids=["missing-fields", "unknown-trace", "failed-but-observed", "negative-count"])
def test_a_malformed_grading_summary_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(MalformedInput):
        check_summary(bad)
