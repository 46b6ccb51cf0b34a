"""A container attempt's attestation (issue 22): its agent box records that no trace is captured
inside the container, so it is UNOBSERVED whatever the trace mode and transcript (DIRTY still
wins); the images its boxes ran are bound (``environment``) and re-derived by verification."""

from __future__ import annotations

from typing import Any

import pytest

from attest.attestation import verify_attestation
from attest.redact import Redactor
from attest.scan import ScanPolicy
from ledger.errors import VerificationError
from tests.attest.conftest import (
    ATTEMPT,
    HIDDEN_TEST,
    REPO_PAIRS,
    WORKTREE,
    FakeKeys,
    Recorder,
    attest,
    scan,
)

DIGEST = "sha256:" + "d1" * 32
IMAGE_ID = "sha256:" + "1d" * 32


def _box(backend: str) -> dict[str, Any]:
    box: dict[str, Any] = {"backend": backend, "writable": [WORKTREE], "readable": []}
    if backend == "podman":
        box.update(image=IMAGE_ID, image_id=IMAGE_ID, digest=DIGEST, trace="not captured")
    return box


def _start(rec: Recorder, backend: str) -> None:
    """``Recorder.start`` with the agent's box record of ``backend`` in ``agent.started``."""
    rec.add("attempt.started", {"agent": "fake", "agent_spec": "cmd:fake", "repeat": 1, "try": 1,
                                "tier": "smoke", "node": "n1"}, attempt=ATTEMPT)
    rec.add("commitment", {"commitment": rec.commitment.as_data()}, attempt=ATTEMPT)
    rec.add("agent.started", {"argv": ["fake"], "cwd": WORKTREE, "trace": "strace", "trace_reason": "",
                              "isolation": "sandbox", "sandbox": _box(backend)}, attempt=ATTEMPT)


def _transcript(rec: Recorder) -> None:
    rec.call("Read", {"file_path": "textkit/pairs.py"})
    rec.result("Read", REPO_PAIRS)


def test_a_container_agent_box_is_unobserved_even_with_a_transcript(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """strace mode and tool calls, but the box said its trace is not captured: UNOBSERVED, and
    the observation says why (``not-captured``)."""
    _start(rec, "podman")
    _transcript(rec)
    result = scan(rec, redactor, policy)
    assert result.verdict == "UNOBSERVED"
    assert result.observation["trace"] == "not-captured" and result.observation["transcript"] is True


def test_the_same_attempt_in_bubblewrap_is_clean(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """The control: the same entries with a bubblewrap box record are CLEAN (the box's record is
    what makes the difference)."""
    _start(rec, "bwrap")
    _transcript(rec)
    assert scan(rec, redactor, policy).verdict == "CLEAN"


def test_evidence_still_makes_a_container_attempt_dirty(rec: Recorder, redactor: Redactor,
                                                        policy: ScanPolicy) -> None:
    """Not observed does not hide evidence: a hidden test printed in the container is DIRTY."""
    _start(rec, "podman")
    rec.output(HIDDEN_TEST)
    assert scan(rec, redactor, policy).verdict == "DIRTY"


def test_the_image_is_bound_and_re_derived_from_the_journal(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Any, keys: FakeKeys) -> None:
    """The attestation binds the agent and grading boxes' image digests and ids; verification at
    the journal level re-derives the UNOBSERVED verdict and the same images; a journal whose
    grading box names another image than the one signed is refused."""
    _start(rec, "podman")
    _transcript(rec)
    rec.add("grading", {"isolation": "sandbox", "graded": [], "sandbox": _box("podman")})
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "UNOBSERVED"
    assert att["environment"] == {"digests": [DIGEST], "image_ids": [IMAGE_ID]}
    report = verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries,
                                secret_key=keys)
    assert report.verdict == "UNOBSERVED" and report.level == "secret-key"
    # A journal whose grading box named another image than the signed one: the re-scan differs.
    other = Recorder(rec.redact, rec.commitment)
    _start(other, "podman")
    _transcript(other)
    other.add("grading", {"isolation": "sandbox", "graded": [],
                          "sandbox": {**_box("podman"), "digest": "sha256:" + "ee" * 32}})
    with pytest.raises(VerificationError):  # another journal: its root is not the signed one
        verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=other.entries)
    from attest.attestation_verify import _compare_evidence

    with pytest.raises(VerificationError, match="container images differ"):  # and its images neither
        _compare_evidence(att, scan(other, redactor, policy), exact=False)


def test_an_attempt_without_a_container_binds_no_image(
        rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Any, keys: FakeKeys) -> None:
    """A bubblewrap attempt's attestation has no ``environment`` (older attestations neither)."""
    _start(rec, "bwrap")
    _transcript(rec)
    assert "environment" not in attest(rec, redactor, policy, signer, keys)
