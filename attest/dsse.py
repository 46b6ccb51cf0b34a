"""DSSE files any verifier can check: the export envelope, its verification, public key formats.

Pure: keys, attestations and digests come in as values.

``ledger attest export`` writes an envelope whose payload is an in-toto Statement v1 that lists,
as ``subject``, digests a holder of the files can recompute with ``sha256sum``:

    eval-ledger/attempt/<attempt>   our activity digest (ATTESTATION.md; needs the journal)
    diff/<attempt>                  SHA-256 of the attempt's patch text (UTF-8), as recorded
    task/<task>                     the task's content digest (``ledger tasks show``; loader.task_hash)
    bundle/<file name>              SHA-256 of the exported bundle file, when one is named

The predicate (``EXPORT_PREDICATE_TYPE``) holds the whole stored attestation, its own Ed25519
signature and seal included, and its hash. The envelope is signed by the same Ed25519 key (DSSE
keyid = hex SHA-256 of the raw public key), so securesystemslib, in-toto or any DSSE verifier
checks it with the key as PEM or as securesystemslib key JSON (``public_key_formats``);
``verify_export`` checks the envelope and then the embedded attestation at the public-key level.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from attest.attestation import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    PrivateKeyLike,
    attestation_hash,
    canonical_json,
    pae,
    private_key,
    signature_keyid,
    verify_attestation,
)
from ledger.errors import MalformedInput, VerificationError

EXPORT_PREDICATE_TYPE = "https://eval-ledger.dev/attestation/clean-run-export/v1"
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
_HEX = frozenset("0123456789abcdef")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sha256_hex(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX:
        raise MalformedInput(f"{what} must be 64 lowercase hex characters")
    return value


def export_statement(att: Mapping[str, Any], *, diff_sha256: str | None,
                     task_digest: str | None, bundle: tuple[str, str] | None = None
                     ) -> dict[str, Any]:
    """The Statement of an exported attestation (see the module docstring for the subjects).

    ``bundle`` is (file name, hex SHA-256) of an exported bundle that holds the run.
    """
    attempt, task = att.get("attempt"), att.get("task")
    activity = _map(att.get("activity"))
    subject = [{"name": f"eval-ledger/attempt/{attempt}",
                "digest": {"sha256": _sha256_hex(activity.get("digest"), "activity digest")}}]
    if diff_sha256 is not None:
        subject.append({"name": f"diff/{attempt}",
                        "digest": {"sha256": _sha256_hex(diff_sha256, "diff digest")}})
    if task_digest is not None:
        subject.append({"name": f"task/{task}",
                        "digest": {"sha256": _sha256_hex(task_digest, "task digest")}})
    if bundle is not None:
        subject.append({"name": f"bundle/{bundle[0]}",
                        "digest": {"sha256": _sha256_hex(bundle[1], "bundle digest")}})
    return {"_type": STATEMENT_TYPE, "subject": subject, "predicateType": EXPORT_PREDICATE_TYPE,
            "predicate": {"attestation": dict(att), "attestation_hash": attestation_hash(att)}}


def sign_envelope(statement: Mapping[str, Any], signer: PrivateKeyLike) -> dict[str, Any]:
    """A DSSE envelope (payload: the statement as canonical JSON) with one Ed25519 signature."""
    priv = private_key(signer)
    payload = canonical_json(dict(statement))
    sig = priv.sign(pae(PAYLOAD_TYPE, payload))
    return {"payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [{"keyid": signature_keyid(priv.public_key().public_bytes_raw()),
                            "sig": base64.b64encode(sig).decode("ascii")}]}


@dataclass(frozen=True)
class ExportCheck:
    """What ``verify_export`` established."""

    attempt: str
    verdict: str
    attestation_hash: str
    keyid: str
    subjects: tuple[tuple[str, str], ...]  # (name, sha256)
    checks: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "verdict": self.verdict,
                "attestation_hash": self.attestation_hash, "keyid": self.keyid,
                "subjects": [{"name": n, "sha256": d} for n, d in self.subjects],
                "checks": list(self.checks)}


def parse_envelope(data: bytes) -> dict[str, Any]:
    """The envelope map of a DSSE file (JSON); MalformedInput when it is not one."""
    if len(data) > MAX_ENVELOPE_BYTES:
        raise MalformedInput(f"a DSSE file is at most {MAX_ENVELOPE_BYTES} bytes")
    try:
        env = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedInput(f"not a DSSE envelope (JSON): {exc}") from None
    if not isinstance(env, dict) or not isinstance(env.get("payload"), str) or not isinstance(
            env.get("payloadType"), str) or not isinstance(env.get("signatures"), list):
        raise MalformedInput("not a DSSE envelope: payloadType, payload and signatures needed")
    return env


def verify_export(envelope: Mapping[str, Any], public_key: bytes) -> ExportCheck:
    """Check an exported envelope with the raw Ed25519 public key; return what held or raise.

    The signature is checked over the exact payload bytes before anything in them is read; then
    the Statement's shape, the first subject against the attestation's activity digest, the
    recorded attestation hash, and the embedded attestation itself (its own signature, checkpoint,
    inclusion proofs and verdict: ``verify_attestation`` at the public-key level).
    """
    keyid = signature_keyid(public_key)
    sigs = [s for s in envelope.get("signatures") or []
            if isinstance(s, Mapping) and s.get("keyid") == keyid]
    if not sigs:
        raise VerificationError("dsse-keyid", "no signature of this key in the envelope",
                                expected=keyid)
    try:
        payload = base64.b64decode(str(envelope.get("payload")), validate=True)
        sig = base64.b64decode(str(sigs[0].get("sig")), validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError("dsse-encoding", "payload or signature is not base64") from None
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            sig, pae(str(envelope.get("payloadType")), payload))
    except InvalidSignature:
        raise VerificationError("dsse-signature", "the envelope's Ed25519 signature does not "
                                "verify with this key") from None
    checks = [f"dsse-signature: Ed25519 over PAE(payloadType, payload), key {keyid[:16]}"]
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise VerificationError("dsse-payload-type", "unexpected payloadType",
                                expected=PAYLOAD_TYPE, computed=str(envelope.get("payloadType")))
    try:
        stmt = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise VerificationError("statement", "the signed payload is not JSON") from None
    if not isinstance(stmt, dict) or stmt.get("_type") != STATEMENT_TYPE or stmt.get(
            "predicateType") != EXPORT_PREDICATE_TYPE or not isinstance(stmt.get("predicate"), dict):
        raise VerificationError("statement", "the payload is not an eval-ledger export Statement")
    att = stmt["predicate"].get("attestation")
    if not isinstance(att, dict):
        raise VerificationError("statement", "the predicate holds no attestation")
    h = attestation_hash(att)
    if stmt["predicate"].get("attestation_hash") != h:
        raise VerificationError("attestation-hash", "the predicate's attestation_hash is not the "
                                "hash of its attestation", expected=str(
                                    stmt["predicate"].get("attestation_hash")), computed=h)
    subjects = []
    for s in stmt.get("subject") or []:
        digest = s.get("digest") if isinstance(s, Mapping) else None
        if not isinstance(digest, Mapping) or not isinstance(s.get("name"), str):
            raise VerificationError("statement", "a subject lacks a name or digest")
        subjects.append((str(s["name"]), str(digest.get("sha256"))))
    activity = _map(att.get("activity"))
    first = (f"eval-ledger/attempt/{att.get('attempt')}", activity.get("digest"))
    if not subjects or subjects[0] != first:
        raise VerificationError("statement-subject", "the first subject is not the attempt's "
                                "activity digest", expected=str(first), computed=str(
                                    subjects[0] if subjects else None))
    checks.append("statement: subjects and attestation hash " + h[:16])
    report = verify_attestation(att, verifier_public_key=public_key)
    checks.extend(report.checks)
    return ExportCheck(attempt=str(att.get("attempt")), verdict=report.verdict,
                       attestation_hash=h, keyid=keyid, subjects=tuple(subjects),
                       checks=tuple(checks))


# --------------------------------------------------------------------------- public key formats

KEY_FORMATS = ("vkey", "pem", "sslib")


def public_key_pem(public_key: bytes) -> str:
    """PEM SubjectPublicKeyInfo of a raw Ed25519 public key."""
    key = Ed25519PublicKey.from_public_bytes(public_key)
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def public_key_sslib(public_key: bytes) -> dict[str, Any]:
    """securesystemslib key JSON (``SSlibKey.from_dict(d.pop("keyid"), d)``)."""
    return {"keyid": signature_keyid(public_key), "keytype": "ed25519", "scheme": "ed25519",
            "keyval": {"public": public_key.hex()}}


def parse_public_key(text: str) -> bytes | None:
    """The raw Ed25519 key of a PEM or securesystemslib JSON text; None for anything else
    (a C2SP vkey line is parsed by ``ledger.journal.note.Verifier.from_vkey``)."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN PUBLIC KEY-----"):
        try:
            key = serialization.load_pem_public_key(stripped.encode("ascii"))
        except ValueError as exc:
            raise MalformedInput(f"unusable PEM public key: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise MalformedInput("the PEM public key is not an Ed25519 key")
        return key.public_bytes_raw()
    if stripped.startswith("{"):
        try:
            d = json.loads(stripped)
            raw = bytes.fromhex(d["keyval"]["public"])
        except (ValueError, KeyError, TypeError):
            raise MalformedInput("unusable securesystemslib key JSON") from None
        if d.get("keytype") != "ed25519" or len(raw) != 32:
            raise MalformedInput("the securesystemslib key is not an Ed25519 key")
        return raw
    return None
