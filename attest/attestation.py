"""Clean-run attestations: build, sign, seal, hash, export as DSSE, and verify at three levels.

Pure: keys, checkpoint notes, proofs and entries come in as values.

An attestation is one map (stored in the ``attestation`` entry, shown by ``ledger attest show``)::

    v, run, task, attempt, verdict
    commitment   {digest, seq}                  the attempt's commitment entry
    range        {first_seq, last_seq}          commitment .. the attempt's last entry scanned
    checkpoint   {size, root, note}             the signed tree head the proofs lead to
    activity     {count, digest, kinds}         digest over the leaf hashes of every activity entry
    observation  {trace, transcript, agent_started}
    scope        the ScanPolicy (worktree, allowlists)
    matches      [{seq, class, kind, leaf_hash, digests, digest_count, detail, proof}]  (<= 32)
    match_count, matches_digest                 over ALL matches' (seq, class)
    echoes, answer_digests                      inflow excused by the echo rule; committed digests
                                                the agent produced itself (its answer)
    results      {seqs, digest}                 (optional) the attempt's result entries the harness
                                                itself wrote (RESULT_KINDS): their seqs, and SHA-256
                                                over their leaf hashes in seq order; evaluators count
                                                no other result of the attempt
    refused      {count, digest, items}         (when any) requests the proxy refused: findings,
                                                never matches; at most 32 items {seq, leaf_hash,
                                                detail}, the digest over all their leaf hashes
    signature    {keyid, sig}                   Ed25519 over DSSE PAE(in-toto Statement v1)
    seal         {keyid, mac}                   HMAC-SHA256 (seal subkey) over the same PAE bytes

The signed payload is the in-toto Statement v1 whose predicate is the map without ``signature``
and ``seal``, serialized as canonical JSON (sorted keys, no spaces, UTF-8); ``to_dsse`` exports
it as a DSSE envelope. ``attestation_hash`` is SHA-256 of the canonical msgpack of the whole map.

Verification levels (``verify_attestation``), each adding to the previous one:

public-key   signature and key, the checkpoint's signature and body, every match's inclusion
             proof against the checkpoint root, and the verdict re-derived from the embedded
             evidence (a CLEAN with a match, a DIRTY without one, are rejected)
journal      the checkpoint root equals the journal's root at that size, the attestation entry
             names the same attempt/run/task, the commitment entry matches, every activity entry of
             the attempt lies in the range and the count and digest match, match leaves are the
             journal's, and a key-free re-scan (markers, scope) finds no evidence that is missing
secret-key   the HMAC seal, and a full re-scan with the commitment key gives the same matches
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest import digests as dg
from attest.scan import (
    ACTIVITY_KINDS,
    MATCH_CLASSES,
    OBSERVED_TRACES,
    VERDICTS,
    ActivityDigest,
    Match,
    ScanPolicy,
    ScanResult,
    derive_verdict,
    matches_digest,
    refusals_digest,
    scan_attempt,
)
from ledger.errors import KeyMaterialError, MalformedInput, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import Entry, canonical_bytes
from ledger.journal.note import Checkpoint, Signer, Verifier, open_note, parse_note

if TYPE_CHECKING:
    from attest.commitment import Commitment

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
# Signed when present (older attestations lack them): results, isolation, sandbox, limits;
# refused (requests the proxy refused) is present when there was at least one.
_OPTIONAL_BODY_KEYS = frozenset({"results", "isolation", "sandbox", "refused", "limits"})
ISOLATIONS = ("sandbox", "none")
_REQUIRED_BODY_KEYS = _BODY_KEYS
_BODY_KEYS = _BODY_KEYS | _OPTIONAL_BODY_KEYS
_ATT_KEYS = _BODY_KEYS | {"signature", "seal"}
RESULT_KINDS = frozenset({
    "attempt.started", "commitment", "test.baseline", "agent.started", "agent.finished", "diff",
    "signal.result", "test.result", "attempt.finished", "grading", "canary.commitment",
    "canary.result",
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


def _private_key(signer: PrivateKeyLike) -> Ed25519PrivateKey:
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


# --------------------------------------------------------------------------- build


def _match_data(m: Match, size: int, proof: Sequence[bytes]) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "class": m.cls,
        "kind": m.kind,
        "leaf_hash": m.leaf_hash.hex(),
        "digests": [d[: dg.MARKER_BYTES].hex() for d in m.digests[:MAX_MATCH_DIGESTS]],
        "digest_count": len(m.digests),
        "detail": m.detail[:512],
        "proof": {"leaf_index": m.seq, "tree_size": size, "hashes": [h.hex() for h in proof]},
    }


def build_attestation(
    scan: ScanResult,
    *,
    checkpoint_note: str,
    signer: PrivateKeyLike,
    seal_key: bytes,
    prove: Callable[[int, int], Sequence[bytes]],
    results: Sequence[Entry] | None = None,
) -> dict[str, Any]:
    """Sign and seal the attestation of ``scan``, bound to ``checkpoint_note``.

    ``prove(seq, size)`` returns the inclusion proof hashes of entry ``seq`` in the tree of
    ``size`` (``journal.inclusion_proof(seq, size).hashes``). The checkpoint must be signed by
    ``signer`` and cover the attempt's last scanned entry; every proof is checked before it is
    embedded. ``results``: the attempt's result entries the harness itself appended; the
    attestation binds them (seqs and a digest of their leaf hashes) so that evaluators count no
    other result of the attempt (evaluators/structure.py).
    """
    priv = _private_key(signer)
    pub = priv.public_key().public_bytes_raw()
    seal_key = dg.check_key(seal_key, "seal key")
    cp = open_bound_checkpoint(checkpoint_note, pub)
    if cp.size <= scan.last_seq:
        raise UsageError(f"checkpoint of size {cp.size} does not cover seq {scan.last_seq}")
    embedded: list[dict[str, Any]] = []
    for m in scan.matches[:MAX_EMBEDDED_MATCHES]:
        proof = list(prove(m.seq, cp.size))
        merkle.verify_inclusion(m.seq, cp.size, m.leaf_hash, proof, cp.root)
        embedded.append(_match_data(m, cp.size, proof))
    att: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "run": scan.run,
        "task": scan.task,
        "attempt": scan.attempt,
        "verdict": scan.verdict,
        "commitment": {"digest": scan.commitment_digest, "seq": scan.commitment_seq},
        "range": {"first_seq": scan.first_seq, "last_seq": scan.last_seq},
        "checkpoint": {"size": cp.size, "root": cp.root.hex(), "note": checkpoint_note},
        "activity": {"count": scan.activity_count, "digest": scan.activity_digest,
                     "kinds": dict(scan.kinds)},
        "observation": dict(scan.observation),
        "scope": scan.policy.as_data(),
        "matches": embedded,
        "match_count": len(scan.matches),
        "matches_digest": scan.matches_digest,
        "echoes": scan.echoes,
        "answer_digests": scan.answer_digests,
        "isolation": scan.isolation,
        "sandbox": dict(scan.sandbox) if scan.sandbox is not None else None,
    }
    if scan.refusals:
        att["refused"] = {
            "count": len(scan.refusals), "digest": refusals_digest(scan.refusals),
            "items": [{"seq": r.seq, "leaf_hash": r.leaf_hash.hex(), "detail": r.detail}
                      for r in scan.refusals[:MAX_EMBEDDED_MATCHES]]}
    if scan.limits is not None:  # the resource limits the agent ran under (absent before them)
        att["limits"] = dict(scan.limits)
    if results is not None:
        bound = sorted((e for e in results if e.kind in RESULT_KINDS), key=lambda e: e.seq)
        if any(e.seq >= cp.size or e.data.get("attempt") != scan.attempt for e in bound):
            raise UsageError("a bound result is not an entry of the attempt inside the checkpoint")
        att["results"] = {"seqs": [e.seq for e in bound],
                          "digest": results_digest(e.leaf_hash for e in bound)}
    sig = priv.sign(signed_bytes(att))
    att["signature"] = {"keyid": signature_keyid(pub), "sig": base64.b64encode(sig).decode("ascii")}
    att["seal"] = {"keyid": dg.key_id(seal_key), "mac": seal_mac(seal_key, att)}
    return att


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


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class VerifyReport:
    """What was checked, at which level, and the verdict that survived the checks."""

    level: str  # "public-key" | "journal" | "secret-key"
    hash: str
    attempt: str
    run: str | None
    task: str | None
    verdict: str
    match_count: int
    activity_count: int
    checks: tuple[str, ...]
    skipped: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "hash": self.hash,
            "attempt": self.attempt,
            "run": self.run,
            "task": self.task,
            "verdict": self.verdict,
            "match_count": self.match_count,
            "activity_count": self.activity_count,
            "checks": list(self.checks),
            "skipped": list(self.skipped),
        }


def _observed(obs: Mapping[str, Any]) -> bool:
    return bool(obs["agent_started"]) and (obs["trace"] in OBSERVED_TRACES or bool(obs["transcript"]))


def _verify_public(att: dict[str, Any], pub: bytes, checks: list[str] | None,
                   verified_notes: Mapping[str, Checkpoint] | None = None) -> Checkpoint:
    """The public-key level; ``checks`` (None: not wanted) receives a line per check passed."""
    sig = att["signature"]
    keyid, verifier = _verifier_key(pub)
    if sig["keyid"] != keyid:
        raise VerificationError("attestation-key", "signed by another key",
                                expected=keyid, computed=sig["keyid"])
    try:
        raw_sig = base64.b64decode(sig["sig"], validate=True)
        if verifier is None:
            raise ValueError("not an Ed25519 public key")
        verifier.verify(raw_sig, signed_bytes(att))
    except (binascii.Error, ValueError, InvalidSignature):
        raise VerificationError("attestation-signature",
                                "the Ed25519 signature does not verify") from None
    if checks is not None:
        checks.append("signature: Ed25519 over the DSSE/in-toto statement, key " + sig["keyid"][:16])

    cp_data = att["checkpoint"]
    known = verified_notes.get(cp_data["note"]) if verified_notes is not None else None
    cp = known if known is not None else open_bound_checkpoint(cp_data["note"], pub)
    if cp.size != cp_data["size"] or cp.root.hex() != cp_data["root"]:
        raise VerificationError("checkpoint-body", "the checkpoint note names another tree head",
                                expected=f"{cp_data['size']}/{cp_data['root']}",
                                computed=f"{cp.size}/{cp.root.hex()}")
    if checks is not None:
        checks.append(f"checkpoint: signature ok, tree size {cp.size}")

    first, last = att["range"]["first_seq"], att["range"]["last_seq"]
    if not first <= last < cp.size or att["commitment"]["seq"] != first:
        raise VerificationError("range", "the covered range is not inside the checkpoint or does "
                                "not start at the commitment", expected=f"<{cp.size}",
                                computed=f"{first}..{last}")

    seen: list[tuple[int, str]] = []
    for m in att["matches"]:
        key = (m["seq"], m["class"])
        if not first <= m["seq"] <= last:
            raise VerificationError("range", "a match lies outside the covered range",
                                    seq=m["seq"])
        if seen and key <= seen[-1]:
            raise VerificationError("matches-digest", "matches are not sorted and distinct",
                                    seq=m["seq"])
        seen.append(key)
        p = m["proof"]
        if p["leaf_index"] != m["seq"] or p["tree_size"] != cp.size:
            raise VerificationError("match-proof", "proof is not for this entry and checkpoint",
                                    seq=m["seq"])
        try:
            merkle.verify_inclusion(m["seq"], cp.size, bytes.fromhex(m["leaf_hash"]),
                                    [bytes.fromhex(h) for h in p["hashes"]], cp.root)
        except VerificationError as exc:
            raise VerificationError("match-proof", f"inclusion proof fails ({exc})",
                                    seq=m["seq"]) from None
    if checks is not None:
        checks.append(f"evidence: {len(seen)} match proof(s) lead to the checkpoint root")

    if "refused" in att:
        ref = att["refused"]
        seqs = [it["seq"] for it in ref["items"]]
        if seqs != sorted(set(seqs)) or any(not first <= q <= last for q in seqs) \
                or len(seqs) != min(ref["count"], MAX_EMBEDDED_MATCHES):
            raise VerificationError("refused", "the refused requests listed do not agree with "
                                    "their count or the covered range",
                                    expected=str(min(ref["count"], MAX_EMBEDDED_MATCHES)),
                                    computed=str(len(seqs)))
        if checks is not None:
            checks.append(f"refused: {ref['count']} request(s) the proxy refused (findings, not "
                          "matches)")

    count = att["match_count"]
    if len(seen) != min(count, MAX_EMBEDDED_MATCHES):
        raise VerificationError("verdict", "embedded matches do not agree with match_count",
                                expected=str(min(count, MAX_EMBEDDED_MATCHES)),
                                computed=str(len(seen)))
    if count == len(seen) and matches_digest(seen) != att["matches_digest"]:
        raise VerificationError("matches-digest", "embedded matches do not hash to matches_digest",
                                expected=att["matches_digest"], computed=matches_digest(seen))
    derived = derive_verdict(count, _observed(att["observation"]))
    if derived != att["verdict"]:
        raise VerificationError("verdict", "the verdict does not follow from the evidence",
                                expected=derived, computed=att["verdict"])
    if checks is not None:
        checks.append(f"verdict: {derived} re-derived from {count} match(es) and the observation")
    return cp


def _journal_root(entries: Mapping[int, Entry], size: int) -> bytes | None:
    if size == 0 or any(s not in entries for s in range(size)):
        return None
    return merkle.root_from_leaves([entries[s].leaf_hash for s in range(size)])


def _verify_journal(att: dict[str, Any], h: str, cp: Checkpoint, entries: Sequence[Entry],
                    journal_root: Callable[[int], bytes | None] | None, checks: list[str],
                    skipped: list[str]) -> tuple[Commitment, ScanPolicy]:
    # the journal level needs the commitment and the marker scanner; the public-key level (all
    # that plain ``ledger verify`` runs per attestation) imports neither
    from attest.commitment import Commitment
    from attest.redact import MarkerScanner

    by_seq = {e.seq: e for e in entries}
    attempt = att["attempt"]
    first, last = att["range"]["first_seq"], att["range"]["last_seq"]
    top = max(by_seq) + 1 if by_seq else 0
    contiguous = all(s in by_seq for s in range(top))
    root = journal_root(cp.size) if journal_root is not None else None
    if root is None and contiguous and top < cp.size:
        raise VerificationError("checkpoint-journal", "the journal is shorter than the checkpoint "
                                "the attestation is bound to (truncated?)",
                                expected=str(cp.size), computed=str(top))
    if root is None:
        root = _journal_root(by_seq, cp.size)
    if root is None:
        skipped.append("checkpoint root vs journal: the journal prefix is not available")
    elif root != cp.root:
        raise VerificationError("checkpoint-journal", "the checkpoint root is not the journal's "
                                "root at that size", expected=cp.root.hex(), computed=root.hex())
    else:
        checks.append(f"journal: root at size {cp.size} equals the checkpoint root")

    for e in entries:
        if e.kind != "attestation" or not isinstance(e.data.get("attestation"), Mapping):
            continue
        if e.data.get("hash") != h and attestation_hash(e.data["attestation"]) != h:
            continue
        if (e.data.get("attempt") != attempt or e.run != att["run"] or e.task != att["task"]
                or e.seq <= last):
            raise VerificationError("binding", "the attestation is recorded for another attempt, "
                                    "run or task", seq=e.seq, expected=attempt,
                                    computed=str(e.data.get("attempt")))
        checks.append(f"binding: recorded at seq {e.seq} for the same attempt")

    commits = [e for e in entries if e.kind == "commitment" and e.data.get("attempt") == attempt]
    if len(commits) != 1:
        raise VerificationError("commitment", f"the journal holds {len(commits)} commitment "
                                "entries for the attempt")
    ce = commits[0]
    commitment = Commitment.from_data(ce.data.get("commitment"))
    if commitment.digest != att["commitment"]["digest"] or ce.seq != att["commitment"]["seq"]:
        raise VerificationError("commitment", "the attestation names another commitment than the "
                                "journal's", seq=ce.seq, expected=commitment.digest,
                                computed=att["commitment"]["digest"])
    if ce.run != att["run"] or ce.task != att["task"]:
        raise VerificationError("binding", "the commitment entry belongs to another run or task",
                                seq=ce.seq)
    checks.append(f"commitment: seq {ce.seq} digest {commitment.digest[:16]}... matches")

    digest = ActivityDigest()
    for e in entries:
        if e.data.get("attempt") != attempt:
            continue
        if e.kind == "agent.started" and e.seq < ce.seq:
            raise VerificationError("commitment-order", "the agent started before the commitment",
                                    seq=e.seq)
        if e.kind not in ACTIVITY_KINDS:
            continue
        if not first <= e.seq <= last:
            raise VerificationError("activity-range", "activity of the attempt lies outside the "
                                    "attested range", seq=e.seq, expected=f"{first}..{last}")
        digest.add(e.leaf_hash)
    if digest.count != att["activity"]["count"]:
        raise VerificationError("activity-count", "activity count differs from the journal",
                                expected=str(digest.count), computed=str(att["activity"]["count"]))
    if digest.hexdigest() != att["activity"]["digest"]:
        raise VerificationError("activity-digest", "activity digest differs from the journal",
                                expected=digest.hexdigest(), computed=att["activity"]["digest"])
    checks.append(f"activity: all {digest.count} entries in {first}..{last} scanned "
                  "(count and digest match)")

    if "results" in att:
        bound = [by_seq.get(s) for s in att["results"]["seqs"]]
        for s, bound_e in zip(att["results"]["seqs"], bound, strict=True):
            if (bound_e is None or bound_e.kind not in RESULT_KINDS
                    or bound_e.data.get("attempt") != attempt
                    or s >= cp.size):
                raise VerificationError("results-binding", "a bound result is not a result entry of "
                                        "this attempt inside the checkpoint", seq=s)
        got = results_digest(e.leaf_hash for e in bound if e is not None)
        if got != att["results"]["digest"]:
            raise VerificationError("results-binding", "the bound results' leaf hashes differ from "
                                    "the signed digest", expected=att["results"]["digest"], computed=got)
        checks.append(f"results: {len(bound)} result entries bound by leaf hash")

    for m in att["matches"]:
        hit = by_seq.get(m["seq"])
        if (hit is None or hit.leaf_hash.hex() != m["leaf_hash"] or hit.kind != m["kind"]
                or hit.data.get("attempt") != attempt):
            raise VerificationError("match-entry", "a match does not name this attempt's journal "
                                    "entry", seq=m["seq"])

    policy = ScanPolicy.from_data(att["scope"])
    free = scan_attempt([e for e in entries if e.seq <= last], attempt=attempt,
                        commitment=commitment, policy=policy,
                        scanner=MarkerScanner(commitment))
    _compare_evidence(att, free, exact=False)
    checks.append(f"evidence: key-free re-scan (markers, scope) finds {len(free.matches)} "
                  "match(es), all attested")
    return commitment, policy


def _compare_evidence(att: dict[str, Any], scan: ScanResult, *, exact: bool) -> None:
    check = "rescan" if exact else "evidence"
    if scan.last_seq != att["range"]["last_seq"]:
        raise VerificationError(check, "the attempt's entries end elsewhere than the range",
                                expected=str(scan.last_seq),
                                computed=str(att["range"]["last_seq"]))
    if scan.isolation != att.get("isolation", "none") or (
            scan.sandbox is not None and dict(scan.sandbox) != att.get("sandbox")):
        raise VerificationError(check, "the isolation differs from the journal's",
                                expected=scan.isolation, computed=str(att.get("isolation")))
    if (dict(scan.limits) if scan.limits is not None else None) != att.get("limits"):
        raise VerificationError(check, "the resource limits differ from the journal's",
                                expected=str(scan.limits), computed=str(att.get("limits")))
    if dict(scan.observation) != dict(att["observation"]):
        raise VerificationError(check, "the observation differs from the journal's",
                                expected=str(dict(scan.observation)),
                                computed=str(dict(att["observation"])))
    if "refused" in att:  # older attestations lack it (and journals before `reason` still scan)
        ref = att["refused"]
        if len(scan.refusals) != ref["count"] or refusals_digest(scan.refusals) != ref["digest"]:
            raise VerificationError(check, "the refused requests differ from the journal's",
                                    expected=f"{len(scan.refusals)}/{refusals_digest(scan.refusals)}",
                                    computed=f"{ref['count']}/{ref['digest']}")
    listed = {(m["seq"], m["class"]) for m in att["matches"]}
    complete = att["match_count"] == len(listed)
    found = [m.key for m in scan.matches]
    if exact:
        if len(found) != att["match_count"] or scan.matches_digest != att["matches_digest"]:
            raise VerificationError(check, "the matches differ from a full re-scan",
                                    expected=f"{len(found)}/{scan.matches_digest}",
                                    computed=f"{att['match_count']}/{att['matches_digest']}")
        if scan.verdict != att["verdict"]:
            raise VerificationError(check, "the verdict differs from a full re-scan",
                                    expected=scan.verdict, computed=att["verdict"])
        return
    for key in found:
        if complete and key not in listed:
            raise VerificationError(check, f"the journal shows a {key[1]} match the attestation "
                                    "leaves out", seq=key[0])
    if len(found) > att["match_count"]:
        raise VerificationError(check, "the journal shows more matches than attested",
                                expected=str(len(found)), computed=str(att["match_count"]))


def verify_public_level(att: Mapping[str, Any], *, verifier_public_key: PublicKeyLike,
                        verified_notes: Mapping[str, Checkpoint] | None = None,
                        ) -> tuple[str, dict[str, Any]]:
    """The public-key level of :func:`verify_attestation` (the same checks, in the same order,
    raising the same errors) for a caller that checks many attestations and needs no report:
    returns the attestation's hash and its parsed map. ``ledger verify``'s audit runs it once
    per attestation of the journal (evaluators/audit.py)."""
    parsed = _parse(att)
    h = attestation_hash(parsed)
    _verify_public(parsed, public_key_bytes(verifier_public_key), None, verified_notes)
    return h, parsed


def verify_attestation(
    att: Mapping[str, Any],
    *,
    verifier_public_key: PublicKeyLike,
    journal_entries: Iterable[Entry] | None = None,
    journal_root: Callable[[int], bytes | None] | None = None,
    secret_key: KeySource | None = None,
    verified_notes: Mapping[str, Checkpoint] | None = None,
) -> VerifyReport:
    """Verify an attestation (or its DSSE envelope); return what was checked or raise.

    ``journal_entries``: the journal (or the attested run's entries, from a bundle).
    ``journal_root(size)``: the journal's root at ``size`` when the caller can compute it
    (``Journal.root_at``); otherwise it is computed from ``journal_entries`` when they hold the
    whole prefix. ``secret_key``: a ``KeyRing`` (or anything with ``subkey(label)``).
    ``verified_notes``: checkpoint notes the caller already verified with the same public key
    (note text -> its checkpoint), e.g. the journal's own checkpoints after ``Journal.verify``;
    their signature is not checked twice.
    Raises VerificationError naming the failed check, MalformedInput for unusable input.
    """
    parsed = _parse(att)
    h = attestation_hash(parsed)
    pub = public_key_bytes(verifier_public_key)
    checks: list[str] = []
    skipped: list[str] = []
    cp = _verify_public(parsed, pub, checks, verified_notes)
    level = "public-key"
    entries: list[Entry] | None = None
    commitment: Commitment | None = None
    policy: ScanPolicy | None = None
    if journal_entries is not None:
        entries = sorted(journal_entries, key=lambda e: e.seq)
        commitment, policy = _verify_journal(parsed, h, cp, entries, journal_root, checks, skipped)
        level = "journal"
    if secret_key is not None:
        seal = parsed.get("seal")
        if seal is None:
            raise VerificationError("attestation-seal", "the attestation carries no seal")
        seal_key = secret_key.subkey(SEAL_KEY_LABEL)
        if seal["keyid"] != dg.key_id(seal_key):
            raise VerificationError("attestation-seal", "sealed with another secret",
                                    expected=dg.key_id(seal_key), computed=seal["keyid"])
        if not hmac.compare_digest(seal["mac"], seal_mac(seal_key, parsed)):
            raise VerificationError("attestation-seal", "the HMAC seal does not verify")
        checks.append("seal: HMAC-SHA256 under the seal subkey verifies")
        if entries is not None and commitment is not None and policy is not None:
            from attest.redact import Redactor

            try:
                redactor = Redactor(commitment, secret_key.subkey(COMMITMENT_KEY_LABEL))
            except KeyMaterialError:
                raise VerificationError("commitment-key", "the commitment was made with another "
                                        "secret") from None
            last = parsed["range"]["last_seq"]
            full = scan_attempt([e for e in entries if e.seq <= last], attempt=parsed["attempt"], commitment=commitment,
                                policy=policy, scanner=redactor)
            _compare_evidence(parsed, full, exact=True)
            checks.append(f"rescan: every digest re-derived with the commitment key; "
                          f"{len(full.matches)} match(es), verdict {full.verdict}")
            level = "secret-key"
        else:
            skipped.append("full re-scan: needs the journal")
    return VerifyReport(
        level=level,
        hash=h,
        attempt=parsed["attempt"],
        run=parsed["run"],
        task=parsed["task"],
        verdict=parsed["verdict"],
        match_count=parsed["match_count"],
        activity_count=parsed["activity"]["count"],
        checks=tuple(checks),
        skipped=tuple(skipped),
    )
