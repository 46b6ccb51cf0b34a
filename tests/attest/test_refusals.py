"""Egress the proxy refused (denied by the allowlist, or a malformed request) is a finding of the
attestation: listed with its seq and reason, counted and digested, checked by a re-scan. It does
not change the verdict (a refused request moved no byte), and an attestation made before refusals
were listed still verifies."""

from __future__ import annotations

import base64
import copy

import pytest

from attest.attestation import verify_attestation
from attest.redact import Redactor
from attest.scan import ScanPolicy
from ledger.errors import VerificationError
from ledger.journal.note import Signer
from tests.attest.conftest import FakeKeys, Recorder, attest, honest, scan


def _proxy(rec: Recorder, host: str, port: int, *, allowed: bool, reason: str | None = None,
           legacy: bool = False) -> None:
    data = {"host": host, "port": port, "family": "inet", "source": "proxy", "method": "CONNECT",
            "allowed": allowed, "bytes_out": 0, "bytes_in": 0, "started": 1.0,
            "duration_s": 0.0, "error": None}
    if not legacy:
        data["reason"] = reason
    rec.add("net.connect", data)


def _with_refusals(rec: Recorder, *, legacy: bool = False) -> None:
    honest(rec)
    for i in range(304):
        _proxy(rec, f"exfil{i}.example", 443, allowed=False,
               reason="not on the network allowlist", legacy=legacy)
    if not legacy:
        _proxy(rec, "", 0, allowed=False, reason="malformed request: not an HTTP request line")
    _proxy(rec, "pypi.org", 443, allowed=True, legacy=legacy)


def test_denied_egress_is_a_finding_and_the_verdict_stays(rec: Recorder, redactor: Redactor,
                                                         policy: ScanPolicy, signer: Signer,
                                                         keys: FakeKeys) -> None:
    """304 denied requests and one malformed one: 305 refusals in the attestation, with their
    reasons; the verdict is CLEAN (documented choice); every level verifies."""
    _with_refusals(rec)
    result = scan(rec, redactor, policy)
    assert len(result.refusals) == 305 and result.verdict == "CLEAN"
    att = attest(rec, redactor, policy, signer, keys)
    refused = att["refused"]
    assert refused["count"] == 305 and len(refused["items"]) == 32
    assert refused["items"][0]["detail"] == "exfil0.example:443 not on the network allowlist"
    full = verify_attestation(att, verifier_public_key=signer.verifier,
                              journal_entries=rec.entries, secret_key=keys)
    assert full.verdict == "CLEAN"


def test_an_attestation_that_hides_refusals_fails_the_rescan(rec: Recorder, redactor: Redactor,
                                                             policy: ScanPolicy, signer: Signer,
                                                             keys: FakeKeys) -> None:
    """Under-counting the refusals (re-signed, so only the re-scan can tell) is caught."""
    _with_refusals(rec)
    att = attest(rec, redactor, policy, signer, keys)
    forged = copy.deepcopy(att)
    forged["refused"]["count"] = 1
    forged = _resign(forged, signer, keys)
    with pytest.raises(VerificationError, match="refus"):
        verify_attestation(forged, verifier_public_key=signer.verifier,
                           journal_entries=rec.entries, secret_key=keys)


def test_old_journal_without_reasons_still_verifies(rec: Recorder, redactor: Redactor,
                                                   policy: ScanPolicy, signer: Signer,
                                                   keys: FakeKeys) -> None:
    """Proxy records written before `reason` existed count as refusals by `allowed: false`, and
    an attestation without `refused` (made before this change) still verifies against them."""
    _with_refusals(rec, legacy=True)
    att = attest(rec, redactor, policy, signer, keys)
    assert att["refused"]["count"] == 304
    assert att["refused"]["items"][0]["detail"] == "exfil0.example:443 denied"
    old = copy.deepcopy(att)
    del old["refused"]
    old = _resign(old, signer, keys)
    report = verify_attestation(old, verifier_public_key=signer.verifier,
                                journal_entries=rec.entries, secret_key=keys)
    assert report.verdict == "CLEAN"


def _resign(att: dict, signer: Signer, keys: FakeKeys) -> dict:
    """The attestation re-signed and re-sealed as the harness would (an insider's forgery, or an
    attestation made by the code before this change)."""
    from attest import digests as dg
    from attest.attestation import (
        SEAL_KEY_LABEL,
        private_key,
        seal_mac,
        signature_keyid,
        signed_bytes,
    )

    att = {k: v for k, v in att.items() if k not in ("signature", "seal")}
    priv = private_key(signer)
    att["signature"] = {"keyid": signature_keyid(priv.public_key().public_bytes_raw()),
                        "sig": base64.b64encode(priv.sign(signed_bytes(att))).decode()}
    seal_key = keys.subkey(SEAL_KEY_LABEL)
    att["seal"] = {"keyid": dg.key_id(seal_key), "mac": seal_mac(seal_key, att)}
    return att
