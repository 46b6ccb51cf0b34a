"""Verifying a clean-run attestation at three levels (public-key, journal, secret-key; the
levels are described in ``attest.attestation``). Pure: keys, checkpoint notes and entries come
in as values; every failed check raises ``VerificationError`` naming it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature

from attest import digests as dg
from attest.attestation_format import (
    COMMITMENT_KEY_LABEL,
    MAX_EMBEDDED_MATCHES,
    RESULT_KINDS,
    SEAL_KEY_LABEL,
    KeySource,
    PublicKeyLike,
    _parse,
    _verifier_key,
    attestation_hash,
    open_bound_checkpoint,
    public_key_bytes,
    results_digest,
    seal_mac,
    signed_bytes,
)
from attest.grading_scan import grading_observed
from attest.scan import (
    ACTIVITY_KINDS,
    ActivityDigest,
    ScanPolicy,
    ScanResult,
    derive_verdict,
    matches_digest,
    observed_trace,
    refusals_digest,
    scan_attempt,
)
from ledger.errors import KeyMaterialError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import Entry
from ledger.journal.note import Checkpoint

if TYPE_CHECKING:
    from attest.commitment import Commitment

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
    return observed_trace(obs)


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
    derived = derive_verdict(count, _observed(att["observation"])
                             and grading_observed(att.get("grading")))
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
    from attest.redact import MarkerScanner

    by_seq = {e.seq: e for e in entries}
    attempt = att["attempt"]
    last = att["range"]["last_seq"]
    _check_journal_root(cp, by_seq, journal_root, checks, skipped)
    _check_binding(att, h, entries, checks)
    commitment = _check_commitment(att, entries, checks)
    _check_activity(att, entries, commitment_seq=att["commitment"]["seq"], checks=checks)
    _check_results(att, cp, by_seq, checks)

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


def _check_journal_root(cp: Checkpoint, by_seq: Mapping[int, Entry],
                        journal_root: Callable[[int], bytes | None] | None, checks: list[str],
                        skipped: list[str]) -> None:
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


def _check_binding(att: dict[str, Any], h: str, entries: Sequence[Entry], checks: list[str]) -> None:
    attempt, last = att["attempt"], att["range"]["last_seq"]
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


def _check_commitment(att: dict[str, Any], entries: Sequence[Entry], checks: list[str]) -> Commitment:
    from attest.commitment import Commitment

    attempt = att["attempt"]
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
    return commitment


def _check_activity(att: dict[str, Any], entries: Sequence[Entry], *, commitment_seq: int,
                    checks: list[str]) -> None:
    attempt = att["attempt"]
    first, last = att["range"]["first_seq"], att["range"]["last_seq"]
    digest = ActivityDigest()
    for e in entries:
        if e.data.get("attempt") != attempt:
            continue
        if e.kind == "agent.started" and e.seq < commitment_seq:
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


def _check_results(att: dict[str, Any], cp: Checkpoint, by_seq: Mapping[int, Entry],
                   checks: list[str]) -> None:
    attempt = att["attempt"]
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
    if (dict(scan.grading) if scan.grading is not None else None) != att.get("grading"):
        raise VerificationError(check, "the grading summary differs from the journal's",
                                expected=str(scan.grading), computed=str(att.get("grading")))
    if (dict(scan.environment) if scan.environment is not None else None) != att.get("environment"):
        raise VerificationError(check, "the container images differ from the journal's",
                                expected=str(scan.environment), computed=str(att.get("environment")))
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
