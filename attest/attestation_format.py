"""The attestation's wire format: its fields, the exact bytes its signature and seal cover
(DSSE PAE over an in-toto Statement v1 in canonical JSON), its hash, its keys, its DSSE
envelope, and the structural parse every verification starts with.

Pure. ``attest.attestation`` (build) and ``attest.attestation_verify`` (the three levels) build on
it; ``attest.attestation`` re-exports the public names, so callers import from there.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeGuard

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest import digests as dg
from attest.grading_scan import check_summary
from attest.scan import MATCH_CLASSES, VERDICTS, ScanPolicy
from ledger.errors import MalformedInput, UsageError
from ledger.journal.codec import canonical_bytes
from ledger.journal.note import Checkpoint, Signer, Verifier, open_note, parse_note

FORMAT_VERSION = 1
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://eval-ledger.dev/attestation/clean-run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_EMBEDDED_MATCHES = 32
MAX_MATCH_DIGESTS = 4
COMMITMENT_KEY_LABEL = "attest/commitment/v1"
"""HKDF label of the commitment subkey (``KeyRing.subkey(COMMITMENT_KEY_LABEL)``)."""
SEAL_KEY_LABEL = "attest/seal/v1"
"""HKDF label of the attestation seal subkey."""
_SEAL_LABEL = b"eval-ledger/attest/v1/seal\x00"
_BODY_KEYS = frozenset({
    "v", "run", "task", "attempt", "verdict", "commitment", "range", "checkpoint", "activity",
    "observation", "scope", "matches", "match_count", "matches_digest", "echoes", "answer_digests",
})
# Signed when present (older attestations lack them): results, isolation, sandbox, limits,
# grading (attest/grading_scan.py), environment (the container images); refused (requests the proxy refused) is present when there
# was at least one.
_OPTIONAL_BODY_KEYS = frozenset({"results", "isolation", "sandbox", "refused", "limits",
                                 "grading", "environment"})
ISOLATIONS = ("sandbox", "none")
_REQUIRED_BODY_KEYS = _BODY_KEYS
_BODY_KEYS = _BODY_KEYS | _OPTIONAL_BODY_KEYS
_ATT_KEYS = _BODY_KEYS | {"signature", "seal"}
RESULT_KINDS = frozenset({
    "attempt.started", "commitment", "test.baseline", "agent.started", "agent.finished", "diff",
    "signal.result", "test.result", "attempt.finished", "grading", "canary.commitment",
    "canary.result", "grading.trace",
})
"""The per-attempt entries an attestation binds by seq and leaf hash (its ``results`` field)."""
MAX_RESULTS = 4096
_MATCH_KEYS = frozenset({"seq", "class", "kind", "leaf_hash", "digests", "digest_count", "detail",
                         "proof"})
_COMMITMENT_KEYS = frozenset({"digest", "seq"})
_RANGE_KEYS = frozenset({"first_seq", "last_seq"})
_CHECKPOINT_KEYS = frozenset({"size", "root", "note"})
_ACTIVITY_KEYS = frozenset({"count", "digest", "kinds"})
_OBSERVATION_KEYS = frozenset({"trace", "transcript", "agent_started"})
_ENVIRONMENT_KEYS = frozenset({"digests", "image_ids"})
_PROOF_KEYS = frozenset({"leaf_index", "tree_size", "hashes"})
_RESULTS_KEYS = frozenset({"seqs", "digest"})
_REFUSED_KEYS = frozenset({"count", "digest", "items"})
_REFUSAL_KEYS = frozenset({"seq", "leaf_hash", "detail"})
_SIGNATURE_KEYS = frozenset({"keyid", "sig"})
_SEAL_KEYS = frozenset({"keyid", "mac"})
_HEX_DIGITS = b"0123456789abcdef"

PublicKeyLike = Verifier | Ed25519PublicKey | bytes
PrivateKeyLike = Signer | Ed25519PrivateKey


class KeySource(Protocol):
    """Anything that derives subkeys from the master secret (``ledger.journal.keys.KeyRing``)."""

    def subkey(self, label: str) -> bytes: ...



# --------------------------------------------------------------------------- encoding helpers


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 SP len(type) SP type SP len(body) SP body``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                   allow_nan=False)  # encode() keeps no state between calls


def canonical_json(value: Any) -> bytes:
    return _CANONICAL_JSON.encode(value).encode("utf-8")


def results_digest(leaf_hashes: Iterable[bytes]) -> str:
    """Hex SHA-256 over the bound result entries' leaf hashes, in seq order."""
    return hashlib.sha256(b"eval-ledger/attest/v1/results\x00" + b"".join(leaf_hashes)).hexdigest()


def _body(att: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in att.items() if k in _BODY_KEYS or k in _OPTIONAL_BODY_KEYS}


def statement(att: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 an attestation signs (subject: the attempt's activity)."""
    body = _body(att)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": f"eval-ledger/attempt/{body['attempt']}",
                     "digest": {"sha256": body["activity"]["digest"]}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": body,
    }


def signed_bytes(att: Mapping[str, Any]) -> bytes:
    """The exact bytes the signature and the seal cover: PAE(payload type, statement JSON)."""
    return pae(PAYLOAD_TYPE, canonical_json(statement(att)))


def attestation_hash(att: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical msgpack encoding of the whole attestation map."""
    # top-level keys in sorted order: the encoding is the same (canonical form sorts them), and a
    # map already in canonical order is packed as it is instead of rebuilt
    return hashlib.sha256(canonical_bytes(dict(sorted(att.items())))).hexdigest()


def public_key_bytes(key: PublicKeyLike) -> bytes:
    if isinstance(key, Verifier):
        return bytes(key.public_key)
    if isinstance(key, Ed25519PublicKey):
        return key.public_bytes_raw()
    if isinstance(key, bytes | bytearray) and len(key) == 32:
        return bytes(key)
    raise UsageError("verifier key must be a note Verifier, an Ed25519 public key or 32 raw bytes")


def signature_keyid(public_key: bytes) -> str:
    """DSSE keyid of an Ed25519 key: hex SHA-256 of its 32 raw bytes."""
    return hashlib.sha256(public_key).hexdigest()


@functools.lru_cache(maxsize=8)
def _verifier_key(public_key: bytes) -> tuple[str, Ed25519PublicKey | None]:
    """The keyid and the key object of a verifier's 32 raw bytes (None: not a valid point),
    derived once per key rather than once per attestation checked with it."""
    try:
        key: Ed25519PublicKey | None = Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError:
        key = None
    return signature_keyid(public_key), key


def private_key(signer: PrivateKeyLike) -> Ed25519PrivateKey:
    """The Ed25519 key a ``PrivateKeyLike`` signs with (a note ``Signer``'s seed, or the key)."""
    if isinstance(signer, Signer):
        return Ed25519PrivateKey.from_private_bytes(signer.seed)
    if isinstance(signer, Ed25519PrivateKey):
        return signer
    raise UsageError("signer must be a note Signer or an Ed25519 private key")


def seal_mac(seal_key: bytes, att: Mapping[str, Any]) -> str:
    return hmac.new(seal_key, _SEAL_LABEL + signed_bytes(att), "sha256").hexdigest()


def open_bound_checkpoint(note: str, public_key: bytes) -> Checkpoint:
    """Verify a checkpoint note signed by ``public_key`` under whatever key name it carries."""
    _, sigs = parse_note(note)
    verifiers: list[Verifier] = []
    for name in dict.fromkeys(s.name for s in sigs):
        try:
            verifiers.append(Verifier.for_key(name, public_key))
        except (MalformedInput, UsageError):
            continue
    opened = open_note(note, verifiers)
    return Checkpoint.parse(opened.text)


def to_dsse(att: Mapping[str, Any]) -> dict[str, Any]:
    """The DSSE envelope (in-toto Statement v1 payload) of a stored attestation."""
    parsed = _parse(att)
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(canonical_json(statement(parsed))).decode("ascii"),
        "signatures": [dict(parsed["signature"])],
    }


def _from_dsse(envelope: Mapping[str, Any]) -> dict[str, Any]:
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise MalformedInput(f"DSSE payloadType must be {PAYLOAD_TYPE}")
    sigs = envelope.get("signatures")
    if not isinstance(sigs, list) or len(sigs) != 1 or not isinstance(sigs[0], Mapping):
        raise MalformedInput("DSSE envelope must carry exactly one signature")
    try:
        payload = base64.b64decode(str(envelope.get("payload", "")), validate=True)
        stmt = json.loads(payload.decode("utf-8"))
    except (binascii.Error, ValueError) as exc:
        raise MalformedInput(f"DSSE payload is not base64 JSON: {exc}") from None
    if not isinstance(stmt, dict) or stmt.get("_type") != STATEMENT_TYPE or stmt.get(
            "predicateType") != PREDICATE_TYPE or not isinstance(stmt.get("predicate"), dict):
        raise MalformedInput("DSSE payload is not an eval-ledger clean-run Statement v1")
    att = dict(stmt["predicate"])
    if canonical_json(statement(_parse_body_only(att))) != payload:
        raise MalformedInput("DSSE payload is not in canonical form")
    att["signature"] = dict(sigs[0])
    return att


# --------------------------------------------------------------------------- parsing


def _int(value: Any, what: str) -> int:
    if type(value) is int and value >= 0:  # what a decoded entry holds
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedInput(f"attestation {what} must be a non-negative integer")
    return value


def _hexstr(value: Any, what: str, length: int) -> str:
    # deleting every lowercase hex digit from the ASCII bytes leaves nothing exactly when the
    # text is all lowercase hex digits
    if (not isinstance(value, str) or len(value) != length or not value.isascii()
            or value.encode("ascii").translate(None, _HEX_DIGITS)):
        raise MalformedInput(f"attestation {what} must be {length} lowercase hex characters")
    return value


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """isinstance(value, Mapping), without the ABC check for a plain dict (what entries hold)."""
    return type(value) is dict or isinstance(value, Mapping)


def _map(value: Any, what: str, keys: frozenset[str]) -> Mapping[str, Any]:
    if not _is_map(value) or value.keys() != keys:
        raise MalformedInput(f"attestation {what} must be a map with fields {sorted(keys)}")
    return value


def _parse_body_only(att: Mapping[str, Any]) -> dict[str, Any]:
    if not _is_map(att):
        raise MalformedInput("an attestation must be a map")
    missing = _REQUIRED_BODY_KEYS - att.keys()
    if missing:
        raise MalformedInput(f"attestation lacks fields {sorted(missing)}")
    if att["v"] != FORMAT_VERSION:
        raise MalformedInput(f"unknown attestation version {att['v']!r}")
    if not isinstance(att["attempt"], str) or not att["attempt"]:
        raise MalformedInput("attestation attempt must be a non-empty string")
    for name in ("run", "task"):
        if att[name] is not None and not isinstance(att[name], str):
            raise MalformedInput(f"attestation {name} must be a string or null")
    if att["verdict"] not in VERDICTS:
        raise MalformedInput(f"attestation verdict {att['verdict']!r} is not one of {VERDICTS}")
    c = _map(att["commitment"], "commitment", _COMMITMENT_KEYS)
    _hexstr(c["digest"], "commitment digest", 64)
    _int(c["seq"], "commitment seq")
    r = _map(att["range"], "range", _RANGE_KEYS)
    _int(r["first_seq"], "first_seq")
    _int(r["last_seq"], "last_seq")
    cp = _map(att["checkpoint"], "checkpoint", _CHECKPOINT_KEYS)
    _int(cp["size"], "checkpoint size")
    _hexstr(cp["root"], "checkpoint root", 64)
    if not isinstance(cp["note"], str):
        raise MalformedInput("attestation checkpoint note must be a string")
    a = _map(att["activity"], "activity", _ACTIVITY_KEYS)
    _int(a["count"], "activity count")
    _hexstr(a["digest"], "activity digest", 64)
    if not _is_map(a["kinds"]) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in a["kinds"].items()):
        raise MalformedInput("attestation activity kinds must map kinds to counts")
    o = _map(att["observation"], "observation", _OBSERVATION_KEYS)
    if o["trace"] is not None and not isinstance(o["trace"], str):
        raise MalformedInput("attestation observation trace must be a string or null")
    if not isinstance(o["transcript"], bool) or not isinstance(o["agent_started"], bool):
        raise MalformedInput("attestation observation flags must be booleans")
    ScanPolicy.check_data(att["scope"])
    if not isinstance(att["matches"], list):
        raise MalformedInput("attestation matches must be a list")
    for m in att["matches"]:
        mm = _map(m, "match", _MATCH_KEYS)
        _int(mm["seq"], "match seq")
        if mm["class"] not in MATCH_CLASSES:
            raise MalformedInput(f"attestation match class {mm['class']!r} is unknown")
        if not isinstance(mm["kind"], str) or not isinstance(mm["detail"], str):
            raise MalformedInput("attestation match kind and detail must be strings")
        _hexstr(mm["leaf_hash"], "match leaf hash", 64)
        if not isinstance(mm["digests"], list):
            raise MalformedInput("attestation match digests must be a list")
        for d in mm["digests"]:
            _hexstr(d, "match digest", 2 * dg.MARKER_BYTES)
        _int(mm["digest_count"], "match digest_count")
        p = _map(mm["proof"], "match proof", _PROOF_KEYS)
        _int(p["leaf_index"], "proof leaf_index")
        _int(p["tree_size"], "proof tree_size")
        if not isinstance(p["hashes"], list) or len(p["hashes"]) > 64:
            raise MalformedInput("attestation proof hashes must be a list of at most 64")
        for h in p["hashes"]:
            _hexstr(h, "proof hash", 64)
    _int(att["match_count"], "match_count")
    _hexstr(att["matches_digest"], "matches_digest", 64)
    _int(att["echoes"], "echoes")
    _int(att["answer_digests"], "answer_digests")
    if "results" in att:
        res = _map(att["results"], "results", _RESULTS_KEYS)
        if not isinstance(res["seqs"], list) or len(res["seqs"]) > MAX_RESULTS:
            raise MalformedInput(f"attestation results seqs must be a list of at most {MAX_RESULTS}")
        for s in res["seqs"]:
            _int(s, "results seq")
        if res["seqs"] != sorted(set(res["seqs"])):
            raise MalformedInput("attestation results seqs must be sorted and distinct")
        _hexstr(res["digest"], "results digest", 64)
    if "refused" in att:
        ref = _map(att["refused"], "refused", _REFUSED_KEYS)
        _int(ref["count"], "refused count")
        _hexstr(ref["digest"], "refused digest", 64)
        if not isinstance(ref["items"], list) or len(ref["items"]) > MAX_EMBEDDED_MATCHES:
            raise MalformedInput(f"attestation refused items must be a list of at most "
                                 f"{MAX_EMBEDDED_MATCHES}")
        for item in ref["items"]:
            it = _map(item, "refused item", _REFUSAL_KEYS)
            _int(it["seq"], "refused seq")
            _hexstr(it["leaf_hash"], "refused leaf hash", 64)
            if not isinstance(it["detail"], str):
                raise MalformedInput("attestation refused detail must be a string")
    if "isolation" in att and att["isolation"] not in ISOLATIONS:
        raise MalformedInput(f"attestation isolation {att['isolation']!r} is not one of {ISOLATIONS}")
    if "sandbox" in att and att["sandbox"] is not None and not _is_map(att["sandbox"]):
        raise MalformedInput("attestation sandbox must be a map or null")
    if "limits" in att and not _is_map(att["limits"]):
        raise MalformedInput("attestation limits must be a map")
    if "environment" in att:
        env = _map(att["environment"], "environment", _ENVIRONMENT_KEYS)
        if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in env.values()):
            raise MalformedInput("attestation environment digests and image_ids must be lists of strings")
    if "grading" in att:
        check_summary(att["grading"])
    return {k: att[k] for k in _BODY_KEYS if k in att}


def _parse(att: Any) -> dict[str, Any]:
    """A structurally valid attestation map (a DSSE envelope is accepted and unpacked)."""
    if _is_map(att) and "payloadType" in att:
        att = _from_dsse(att)
    if not _is_map(att):
        raise MalformedInput("an attestation must be a map")
    if not att.keys() <= _ATT_KEYS:
        raise MalformedInput(f"attestation has unknown fields {sorted(att.keys() - _ATT_KEYS)}")
    out = _parse_body_only(att)
    sig = _map(att.get("signature"), "signature", _SIGNATURE_KEYS)
    _hexstr(sig["keyid"], "signature keyid", 64)
    if not isinstance(sig["sig"], str):
        raise MalformedInput("attestation signature must be base64 text")
    out["signature"] = dict(sig)
    if "seal" in att:
        seal = _map(att["seal"], "seal", _SEAL_KEYS)
        _hexstr(seal["keyid"], "seal keyid", 16)
        _hexstr(seal["mac"], "seal mac", 64)
        out["seal"] = dict(seal)
    return out
