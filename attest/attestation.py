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
    grading      {trace, observed, commands, ...} (when the attempt was graded under the grading
                                                capture: attest/grading_scan.py) the grading phase;
                                                not observed makes the verdict UNOBSERVED
    environment  {digests, image_ids}          (when the attempt's boxes ran a container image) the
                                                digests and ids of the images its agent and grading
                                                boxes recorded; ``ledger verify`` checks each digest
                                                is the run's ``environment.ready`` one for the task
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

The format (fields, signed bytes, DSSE, parse) is ``attest.attestation_format``; the three
verification levels are ``attest.attestation_verify``. This module builds and signs, and is
the one import callers use: it re-exports both.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from attest import digests as dg
from attest.attestation_format import (
    COMMITMENT_KEY_LABEL,
    FORMAT_VERSION,
    ISOLATIONS,
    MAX_EMBEDDED_MATCHES,
    MAX_MATCH_DIGESTS,
    MAX_RESULTS,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    RESULT_KINDS,
    SEAL_KEY_LABEL,
    STATEMENT_TYPE,
    KeySource,
    PrivateKeyLike,
    PublicKeyLike,
    attestation_hash,
    canonical_json,
    open_bound_checkpoint,
    pae,
    private_key,
    public_key_bytes,
    results_digest,
    seal_mac,
    signature_keyid,
    signed_bytes,
    statement,
    to_dsse,
)
from attest.attestation_verify import VerifyReport, verify_attestation, verify_public_level
from attest.scan import Match, ScanResult, matches_digest, refusals_digest
from ledger.errors import UsageError
from ledger.journal import merkle
from ledger.journal.codec import Entry

__all__ = [
    "COMMITMENT_KEY_LABEL", "FORMAT_VERSION", "ISOLATIONS", "MAX_EMBEDDED_MATCHES",
    "MAX_MATCH_DIGESTS", "MAX_RESULTS", "PAYLOAD_TYPE", "PREDICATE_TYPE", "RESULT_KINDS",
    "SEAL_KEY_LABEL", "STATEMENT_TYPE", "KeySource", "PrivateKeyLike", "PublicKeyLike",
    "VerifyReport", "attestation_hash", "build_attestation", "canonical_json", "matches_digest",
    "open_bound_checkpoint", "pae", "private_key", "public_key_bytes", "results_digest",
    "seal_mac", "signature_keyid", "signed_bytes", "statement", "to_dsse", "verify_attestation",
    "verify_public_level",
]

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
    priv = private_key(signer)
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
    if scan.grading is not None:  # the grading phase (absent before it was traced)
        att["grading"] = dict(scan.grading)
    if scan.environment is not None:  # the images the attempt ran in (absent without one)
        att["environment"] = {k: list(v) for k, v in scan.environment.items()}
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
