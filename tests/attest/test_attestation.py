"""Attestations: build, sign, seal, DSSE export, and verification at three levels."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest.attestation import (
    MAX_EMBEDDED_MATCHES,
    PAYLOAD_TYPE,
    SEAL_KEY_LABEL,
    attestation_hash,
    build_attestation,
    pae,
    seal_mac,
    signature_keyid,
    signed_bytes,
    to_dsse,
    verify_attestation,
    verify_public_level,
)
from attest.commitment import build_commitment
from attest.redact import Redactor
from attest.scan import ScanPolicy, matches_digest, scan_attempt
from ledger.errors import MalformedInput, UsageError, VerificationError
from ledger.journal.codec import canonical_bytes
from ledger.journal.note import Signer
from tests.attest.conftest import (
    ATTEMPT,
    HIDDEN_TEST,
    MATERIAL,
    OTHER_ATTEMPT,
    PUBLIC,
    REPO_PAIRS,
    RUN,
    SOLUTION_PAIRS,
    TASK_ROOT,
    WORKTREE,
    FakeKeys,
    Recorder,
    attest,
    honest,
    scan,
)

SOLUTION_PATH = f"{TASK_ROOT}/solution/textkit/pairs.py"


def resign(att: dict[str, Any], signer: Signer, *, keyid_of: Signer | None = None,
           keys: FakeKeys | None = None) -> dict[str, Any]:
    """Re-sign (and optionally re-seal) an edited attestation, as a forger with that key would."""
    body = {k: v for k, v in att.items() if k not in ("signature", "seal")}
    sig = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(signed_bytes(body))
    named = keyid_of or signer
    body["signature"] = {"keyid": signature_keyid(named.public_key),
                         "sig": base64.b64encode(sig).decode()}
    if keys is not None:
        seal_key = keys.subkey(SEAL_KEY_LABEL)
        from attest import digests as dg

        body["seal"] = {"keyid": dg.key_id(seal_key), "mac": seal_mac(seal_key, body)}
    elif "seal" in att:
        body["seal"] = att["seal"]
    return body


def dirty(rec: Recorder) -> None:
    """An agent that cats the reference solution, then writes it."""
    rec.start()
    rec.read("textkit/pairs.py", REPO_PAIRS)
    rec.exec(["cat", SOLUTION_PATH])
    rec.read(SOLUTION_PATH, SOLUTION_PAIRS)
    rec.output(SOLUTION_PAIRS)
    rec.write("textkit/pairs.py")
    rec.finish()


def _check(err: pytest.ExceptionInfo[VerificationError]) -> str:
    return err.value.check


# --------------------------------------------------------------------------- honest paths


def test_clean_attestation_verifies_at_every_level(rec: Recorder, redactor: Redactor,
                                                   policy: ScanPolicy, signer: Signer,
                                                   keys: FakeKeys) -> None:
    """An honest attempt's CLEAN attestation passes public-key, journal and secret-key checks."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "CLEAN"
    pub = verify_attestation(att, verifier_public_key=signer.verifier)
    assert pub.level == "public-key" and pub.verdict == "CLEAN"
    jour = verify_attestation(att, verifier_public_key=signer.public_key,
                              journal_entries=rec.entries)
    assert jour.level == "journal"
    assert any("activity: all 14 entries" in c for c in jour.checks)
    full = verify_attestation(att, verifier_public_key=signer.verifier,
                              journal_entries=rec.entries, secret_key=keys)
    assert full.level == "secret-key"
    assert full.hash == attestation_hash(att)


def test_dirty_attestation_carries_provable_matches(rec: Recorder, redactor: Redactor,
                                                   policy: ScanPolicy, signer: Signer,
                                                   keys: FakeKeys) -> None:
    """DIRTY names each match with an inclusion proof and verifies at every level."""
    dirty(rec)
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "DIRTY"
    classes = {(m["seq"], m["class"]) for m in att["matches"]}
    assert {(4, "path"), (5, "path"), (5, "content"), (5, "read-scope"), (6, "content")} <= classes
    for m in att["matches"]:
        assert m["proof"]["leaf_index"] == m["seq"]
        assert m["proof"]["tree_size"] == att["checkpoint"]["size"]
    report = verify_attestation(att, verifier_public_key=signer.verifier,
                                journal_entries=rec.entries, secret_key=keys)
    assert report.verdict == "DIRTY" and report.level == "secret-key"


def test_unobserved_attestation_verifies(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                         signer: Signer, keys: FakeKeys) -> None:
    """UNOBSERVED is a verdict like the others: re-derived and checked."""
    rec.start(trace="none")
    rec.output("ok\n")
    att = attest(rec, redactor, policy, signer, keys)
    assert att["verdict"] == "UNOBSERVED"
    verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries,
                       secret_key=keys)


def test_no_plaintext_in_attestation(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                     signer: Signer, keys: FakeKeys) -> None:
    """The attestation of an agent that printed the hidden test holds none of it."""
    rec.start()
    rec.output(HIDDEN_TEST)
    att = attest(rec, redactor, policy, signer, keys)
    blob = canonical_bytes(att) + json.dumps(to_dsse(att)).encode()
    for fragment in (b"zeta", b"keeps_escaped_separator", b"dangling"):
        assert fragment not in blob
    assert b"zeta" not in b"".join(e.raw for e in rec.entries)


def test_dsse_envelope_verifies(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                signer: Signer, keys: FakeKeys) -> None:
    """The DSSE export carries an in-toto Statement v1 and verifies with the public key alone."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    env = to_dsse(att)
    assert env["payloadType"] == PAYLOAD_TYPE
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1"
    assert stmt["subject"][0]["digest"]["sha256"] == att["activity"]["digest"]
    assert stmt["predicate"]["verdict"] == "CLEAN"
    Ed25519PrivateKey.from_private_bytes(signer.seed).public_key().verify(
        base64.b64decode(env["signatures"][0]["sig"]), pae(PAYLOAD_TYPE, base64.b64decode(env["payload"])))
    report = verify_attestation(env, verifier_public_key=signer.verifier)
    assert report.verdict == "CLEAN"


def test_pae_matches_the_dsse_spec_vector() -> None:
    """PAE("http://example.com/HelloWorld", "hello world") from the DSSE protocol document."""
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")


def test_hash_names_the_exact_attestation(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                          signer: Signer, keys: FakeKeys) -> None:
    """Any change to the map changes attestation_hash; equal maps hash equally."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    h = attestation_hash(att)
    assert h == attestation_hash(copy.deepcopy(att))
    assert h != attestation_hash({**att, "echoes": att["echoes"] + 1})
    assert rec.entries[-1].data["hash"] == h


@pytest.mark.slow
def test_ten_thousand_entries_stay_under_64_kib(redactor: Redactor, policy: ScanPolicy,
                                                signer: Signer, keys: FakeKeys) -> None:
    """Counts and one digest, not every digest: 10,000 activity entries fit in 64 KiB."""
    rec = Recorder(redact=redactor, commitment=redactor.commitment)
    rec.start()
    words = REPO_PAIRS.split()
    for i in range(10_000):
        line = " ".join(words[(i + k) % len(words)] for k in range(34))
        if i % 3 == 0:
            rec.add("tool.result", {"tool": "Bash", "output": line, "is_error": False})
        elif i % 3 == 1:
            rec.add("fs.read", {"path": "textkit/pairs.py", "resolved": f"{WORKTREE}/x{i}.py",
                                "in_worktree": True, "content": line, "source": "strace"})
        else:
            rec.add("agent.output", {"stream": "stdout", "text": line, "total_bytes": 200,
                                     "truncated": False})
    att = attest(rec, redactor, policy, signer, keys)
    assert att["activity"]["count"] == 10_000
    assert len(canonical_bytes(att)) < 64 * 1024
    assert len(json.dumps(to_dsse(att))) < 64 * 1024


def test_embedded_matches_are_capped(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                     signer: Signer, keys: FakeKeys) -> None:
    """Many matches: at most MAX_EMBEDDED_MATCHES carry proofs; count and digest cover all."""
    rec.start()
    for _ in range(MAX_EMBEDDED_MATCHES + 8):
        rec.output(HIDDEN_TEST)
    att = attest(rec, redactor, policy, signer, keys)
    assert att["match_count"] == MAX_EMBEDDED_MATCHES + 8
    assert len(att["matches"]) == MAX_EMBEDDED_MATCHES
    verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries,
                       secret_key=keys)


# --------------------------------------------------------------------------- attacks


@pytest.fixture
def dirty_att(rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
              keys: FakeKeys) -> dict[str, Any]:
    """The attestation of the dirty agent (cat of the reference solution)."""
    dirty(rec)
    return attest(rec, redactor, policy, signer, keys)


def _forged_clean(att: dict[str, Any]) -> dict[str, Any]:
    forged = copy.deepcopy(att)
    forged.update(matches=[], match_count=0, verdict="CLEAN", matches_digest=matches_digest([]))
    return forged


def test_forged_clean_not_resigned(dirty_att: dict[str, Any], signer: Signer) -> None:
    """Attack: matches removed and verdict flipped, signature left as it was."""
    with pytest.raises(VerificationError) as err:
        verify_attestation(_forged_clean(dirty_att), verifier_public_key=signer.verifier)
    assert _check(err) == "attestation-signature"


def test_forged_clean_resigned_with_another_key(dirty_att: dict[str, Any], signer: Signer,
                                                impostor: Signer) -> None:
    """Attack: matches removed and re-signed with the forger's own key."""
    forged = resign(_forged_clean(dirty_att), impostor)
    with pytest.raises(VerificationError) as err:
        verify_attestation(forged, verifier_public_key=signer.verifier)
    assert _check(err) == "attestation-key"


def test_forged_clean_resigned_claiming_our_keyid(dirty_att: dict[str, Any], signer: Signer,
                                                  impostor: Signer) -> None:
    """Attack: re-signed with another key but naming the log's key id."""
    forged = resign(_forged_clean(dirty_att), impostor, keyid_of=signer)
    with pytest.raises(VerificationError) as err:
        verify_attestation(forged, verifier_public_key=signer.verifier)
    assert _check(err) == "attestation-signature"


def test_clean_with_a_match_is_rejected(dirty_att: dict[str, Any], signer: Signer) -> None:
    """Even correctly signed, a CLEAN verdict next to a match contradicts the evidence."""
    forged = resign({**dirty_att, "verdict": "CLEAN"}, signer)
    with pytest.raises(VerificationError) as err:
        verify_attestation(forged, verifier_public_key=signer.verifier)
    assert _check(err) == "verdict"


def test_dirty_without_a_match_is_rejected(dirty_att: dict[str, Any], signer: Signer) -> None:
    """A DIRTY verdict with no evidence is rejected too."""
    forged = _forged_clean(dirty_att)
    forged["verdict"] = "DIRTY"
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier)
    assert _check(err) == "verdict"


def test_partly_removed_matches_break_the_digest(dirty_att: dict[str, Any],
                                                 signer: Signer) -> None:
    """Dropping one match while keeping the count consistent breaks matches_digest."""
    forged = copy.deepcopy(dirty_att)
    forged["matches"] = forged["matches"][1:]
    forged["match_count"] -= 1
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier)
    assert _check(err) == "matches-digest"


def test_tampered_proof_is_rejected(dirty_att: dict[str, Any], signer: Signer) -> None:
    """A match whose proof does not lead to the checkpoint root is rejected."""
    forged = copy.deepcopy(dirty_att)
    h = forged["matches"][0]["proof"]["hashes"]
    h[0] = ("0" if h[0][0] != "0" else "1") + h[0][1:]
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier)
    assert _check(err) == "match-proof"


def test_checkpoint_note_swapped(dirty_att: dict[str, Any], rec: Recorder,
                                 signer: Signer) -> None:
    """A checkpoint body that does not name the attested size and root is rejected."""
    forged = copy.deepcopy(dirty_att)
    forged["checkpoint"]["note"] = rec.checkpoint(signer, size=3)
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier)
    assert _check(err) == "checkpoint-body"


def test_checkpoint_signed_by_another_key(dirty_att: dict[str, Any], rec: Recorder,
                                          signer: Signer, impostor: Signer) -> None:
    """A checkpoint note not signed by the log's key fails its signature check."""
    forged = copy.deepcopy(dirty_att)
    forged["checkpoint"]["note"] = rec.checkpoint(impostor, size=forged["checkpoint"]["size"])
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier)
    assert _check(err) == "checkpoint-signature"


def test_checkpoint_not_consistent_with_the_journal(redactor: Redactor, policy: ScanPolicy,
                                                    signer: Signer, keys: FakeKeys) -> None:
    """Attack: an attestation bound to a forked tree (an earlier entry differs) is rejected."""

    def journal(note: str) -> Recorder:
        r = Recorder(redact=redactor, commitment=redactor.commitment)
        r.add("run.started", {"note": note}, attempt=None)
        dirty(r)
        return r

    real, fork = journal("real"), journal("forked")
    att = attest(fork, redactor, policy, signer, keys)
    verify_attestation(att, verifier_public_key=signer.verifier)  # fine on its own
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.verifier,
                           journal_entries=real.entries)
    assert _check(err) == "checkpoint-journal"


def test_truncated_journal_is_detected(dirty_att: dict[str, Any], rec: Recorder,
                                       signer: Signer) -> None:
    """Attack: the journal cut before the bad read no longer reaches the bound checkpoint."""
    cut = rec.entries[:5]
    with pytest.raises(VerificationError) as err:
        verify_attestation(dirty_att, verifier_public_key=signer.verifier, journal_entries=cut)
    assert _check(err) == "checkpoint-journal"


def test_trimmed_activity_range(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                                signer: Signer, keys: FakeKeys) -> None:
    """Attack: even the log's own key cannot attest a range that stops before a bad read."""
    honest(rec)
    stop = len(rec.entries)
    bad = rec.read(SOLUTION_PATH, SOLUTION_PAIRS)
    trimmed = scan_attempt(rec.entries[:stop], attempt=ATTEMPT,
                           commitment=redactor.commitment, policy=policy, scanner=redactor)
    assert trimmed.verdict == "CLEAN"
    att = build_attestation(trimmed, checkpoint_note=rec.checkpoint(signer), signer=signer,
                            seal_key=keys.subkey(SEAL_KEY_LABEL), prove=rec.prove)
    verify_attestation(att, verifier_public_key=signer.verifier)  # public level cannot know
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries)
    assert _check(err) == "activity-range"
    assert err.value.seq == bad.seq


def test_activity_count_edited(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                               signer: Signer, keys: FakeKeys) -> None:
    """An activity count or digest that differs from the journal is rejected."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    fewer = copy.deepcopy(att)
    fewer["activity"]["count"] -= 1
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(fewer, signer), verifier_public_key=signer.verifier,
                           journal_entries=rec.entries)
    assert _check(err) == "activity-count"
    other = copy.deepcopy(att)
    other["activity"]["digest"] = "0" * 64
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(other, signer), verifier_public_key=signer.verifier,
                           journal_entries=rec.entries)
    assert _check(err) == "activity-digest"


def test_attestation_moved_to_another_attempt(rec: Recorder, redactor: Redactor,
                                              policy: ScanPolicy, signer: Signer,
                                              keys: FakeKeys) -> None:
    """Attack: a CLEAN attestation copied into another (dirty) attempt's attestation entry."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    rec.start(attempt=OTHER_ATTEMPT)
    rec.read(SOLUTION_PATH, SOLUTION_PAIRS, attempt=OTHER_ATTEMPT)
    rec.add("attestation", {"attestation": att, "hash": attestation_hash(att)},
            attempt=OTHER_ATTEMPT)
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries)
    assert _check(err) == "binding"


def test_attestation_relabelled_for_another_attempt_or_run(rec: Recorder, redactor: Redactor,
                                                           policy: ScanPolicy, signer: Signer,
                                                           keys: FakeKeys) -> None:
    """Attack: the attempt or run field edited; the signature covers them."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    for field, value in (("attempt", OTHER_ATTEMPT), ("run", RUN + "x")):
        with pytest.raises(VerificationError) as err:
            verify_attestation({**att, field: value}, verifier_public_key=signer.verifier)
        assert _check(err) == "attestation-signature"


def test_attestation_recorded_in_another_run(rec: Recorder, redactor: Redactor,
                                             policy: ScanPolicy, signer: Signer,
                                             keys: FakeKeys) -> None:
    """Attack: the same attestation appended under another run id."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    rec.add("attestation", {"attestation": att, "hash": attestation_hash(att)}, run="r-other")
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=rec.entries)
    assert _check(err) == "binding"


def test_commitment_swapped_after_the_fact(rec: Recorder, redactor: Redactor,
                                           policy: ScanPolicy, signer: Signer, keys: FakeKeys,
                                           ckey: bytes) -> None:
    """Attack: the attestation names a commitment other than the journal's for the attempt."""
    dirty(rec)
    att = attest(rec, redactor, policy, signer, keys)
    smaller = build_commitment(MATERIAL[2:], key=ckey)
    forged = copy.deepcopy(att)
    forged["commitment"]["digest"] = smaller.digest
    with pytest.raises(VerificationError) as err:
        verify_attestation(resign(forged, signer), verifier_public_key=signer.verifier,
                           journal_entries=rec.entries)
    assert _check(err) == "commitment"


def test_commitment_entry_edited_in_the_journal(rec: Recorder, redactor: Redactor,
                                                policy: ScanPolicy, signer: Signer,
                                                keys: FakeKeys) -> None:
    """A commitment entry whose digests were thinned out fails its own digest."""
    honest(rec)
    att = attest(rec, redactor, policy, signer, keys)
    entries = list(rec.entries)
    ce = entries[1]
    data = copy.deepcopy(ce.data)
    data["commitment"]["windows"] = data["commitment"]["windows"][16:]
    data["commitment"]["coverage"]["windows"] -= 1
    entries[1] = ce.__class__(seq=ce.seq, ts=ce.ts, run=ce.run, task=ce.task, kind=ce.kind,
                              data=data, raw=ce.raw)
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.verifier, journal_entries=entries,
                           journal_root=lambda size: rec.nodes.root(size))
    assert _check(err) == "commitment-digest"


def test_key_free_evidence_catches_a_resigned_clean(rec: Recorder, redactor: Redactor,
                                                    policy: ScanPolicy, signer: Signer,
                                                    keys: FakeKeys) -> None:
    """Even signed by the log's key, a CLEAN over a journal with a scope match is rejected."""
    rec.start()
    rec.connect("127.0.0.1", 8765)
    att = attest(rec, redactor, policy, signer, keys)
    forged = resign(_forged_clean(att), signer)
    verify_attestation(forged, verifier_public_key=signer.verifier)
    with pytest.raises(VerificationError) as err:
        verify_attestation(forged, verifier_public_key=signer.verifier,
                           journal_entries=rec.entries)
    assert _check(err) == "evidence"


def test_secret_rescan_catches_what_only_the_key_can_see(ckey: bytes, policy: ScanPolicy,
                                                         signer: Signer,
                                                         keys: FakeKeys) -> None:
    """A path match (needs the key) dropped from a re-signed, re-sealed CLEAN: rescan fails."""
    root = "/opt/py/lib/python3.11/site-packages/ledger/tasks/golden/smoke/t-pairs"
    com = build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=root)
    red = Redactor(com, ckey)
    rec = Recorder(redact=red, commitment=com)
    rec.start()
    rec.read(f"{root}/solution/textkit/pairs.py")
    att = attest(rec, red, policy, signer, keys)
    assert att["verdict"] == "DIRTY"
    forged = resign(_forged_clean(att), signer, keys=keys)
    verify_attestation(forged, verifier_public_key=signer.verifier, journal_entries=rec.entries)
    with pytest.raises(VerificationError) as err:
        verify_attestation(forged, verifier_public_key=signer.verifier,
                           journal_entries=rec.entries, secret_key=keys)
    assert _check(err) == "rescan"


def test_seal_from_another_secret(dirty_att: dict[str, Any], rec: Recorder, signer: Signer,
                                  other_keys: FakeKeys, keys: FakeKeys) -> None:
    """The HMAC seal only verifies under the log's secret; an edited seal fails."""
    with pytest.raises(VerificationError) as err:
        verify_attestation(dirty_att, verifier_public_key=signer.verifier, secret_key=other_keys)
    assert _check(err) == "attestation-seal"
    edited = copy.deepcopy(dirty_att)
    edited["seal"]["mac"] = "0" * 64
    with pytest.raises(VerificationError) as err:
        verify_attestation(edited, verifier_public_key=signer.verifier, secret_key=keys)
    assert _check(err) == "attestation-seal"


# --------------------------------------------------------------------------- input checks


def test_malformed_attestations_are_usage_errors(dirty_att: dict[str, Any],
                                                 signer: Signer) -> None:
    """Garbage is MalformedInput (exit 2), not a failed check (exit 1)."""
    for bad in ({}, {"v": 1}, {**dirty_att, "verdict": "MAYBE"},
                {**dirty_att, "extra": 1}, {**dirty_att, "matches": "none"},
                {"payloadType": PAYLOAD_TYPE, "payload": "!!", "signatures": []}):
        with pytest.raises(MalformedInput):
            verify_attestation(bad, verifier_public_key=signer.verifier)


def _flip_hex(value: str) -> str:
    return ("0" if value[0] != "0" else "1") + value[1:]


# (name, forge(dirty attestation, signer, impostor)): every forgery the public-key level catches,
# for the audit's report-free path (verify_public_level) to catch the same way
_PUBLIC_LEVEL_FORGERIES: list[tuple[str, Any]] = [
    ("as-signed", lambda a, s, i: a),
    ("forged-clean-not-resigned", lambda a, s, i: _forged_clean(a)),
    ("resigned-with-another-key", lambda a, s, i: resign(_forged_clean(a), i)),
    ("resigned-claiming-our-keyid", lambda a, s, i: resign(_forged_clean(a), i, keyid_of=s)),
    ("clean-with-a-match", lambda a, s, i: resign({**a, "verdict": "CLEAN"}, s)),
    ("dirty-without-a-match", lambda a, s, i: resign({**_forged_clean(a), "verdict": "DIRTY"}, s)),
    ("signature-not-base64", lambda a, s, i: {**a, "signature": {**a["signature"], "sig": "!!"}}),
    ("checkpoint-root-edited", lambda a, s, i: resign(
        {**a, "checkpoint": {**a["checkpoint"], "root": _flip_hex(a["checkpoint"]["root"])}}, s)),
    ("scope-worktree-relative", lambda a, s, i: {**a, "scope": {**a["scope"], "worktree": "wt"}}),
    ("scope-allowlist-relative", lambda a, s, i: {
        **a, "scope": {**a["scope"], "write_allowlist": [*a["scope"]["write_allowlist"], "tmp"]}}),
    ("unknown-field", lambda a, s, i: {**a, "extra": 1}),
    ("missing-field", lambda a, s, i: {k: v for k, v in a.items() if k != "echoes"}),
    ("hex-uppercase", lambda a, s, i: {**a, "matches_digest": a["matches_digest"].upper()}),
]


@pytest.mark.parametrize("forge", [f for _, f in _PUBLIC_LEVEL_FORGERIES],
                         ids=[n for n, _ in _PUBLIC_LEVEL_FORGERIES])
def test_public_level_path_agrees_with_verify_attestation(forge: Any, dirty_att: dict[str, Any],
                                                          signer: Signer, impostor: Signer) -> None:
    """verify_public_level accepts, refuses and names the failed check as verify_attestation does."""
    att = forge(copy.deepcopy(dirty_att), signer, impostor)

    def outcome(check: Any) -> tuple[str, str]:
        try:
            return "ok", check()
        except VerificationError as exc:
            return "VerificationError", exc.check
        except MalformedInput as exc:
            return "MalformedInput", str(exc)

    full = outcome(lambda: verify_attestation(att, verifier_public_key=signer.verifier).hash)
    fast = outcome(lambda: verify_public_level(att, verifier_public_key=signer.verifier)[0])
    assert fast == full


def test_build_refuses_a_checkpoint_that_does_not_cover(rec: Recorder, redactor: Redactor,
                                                        policy: ScanPolicy, signer: Signer,
                                                        keys: FakeKeys,
                                                        impostor: Signer) -> None:
    """The bound checkpoint must be the signer's and cover the attempt's last entry."""
    honest(rec)
    result = scan(rec, redactor, policy)
    with pytest.raises(UsageError):
        build_attestation(result, checkpoint_note=rec.checkpoint(signer, size=3), signer=signer,
                          seal_key=keys.subkey(SEAL_KEY_LABEL), prove=rec.prove)
    with pytest.raises(VerificationError):
        build_attestation(result, checkpoint_note=rec.checkpoint(impostor), signer=signer,
                          seal_key=keys.subkey(SEAL_KEY_LABEL), prove=rec.prove)


def test_verifier_key_forms(dirty_att: dict[str, Any], signer: Signer) -> None:
    """A note Verifier, a raw 32-byte key and an Ed25519PublicKey all work; junk does not."""
    pk = Ed25519PrivateKey.from_private_bytes(signer.seed).public_key()
    for key in (signer.verifier, signer.public_key, pk):
        verify_attestation(dirty_att, verifier_public_key=key)
    with pytest.raises(UsageError):
        verify_attestation(dirty_att, verifier_public_key=b"short")
