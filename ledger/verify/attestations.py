"""An attestation entry checked against the journal (or a bundle) at the deepest level the inputs
allow, and the compact summary ``ledger attest show`` prints.

Not pure: it reads the journal and, when present, the secret keys; the checks themselves are
``attest.attestation``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.attestation import KeySource, attestation_hash, verify_attestation
from ledger.errors import KeyMaterialError, MalformedInput, UsageError, VerificationError
from ledger.journal.codec import Entry
from ledger.verify.steps import AttestationChecked

if TYPE_CHECKING:
    from ledger.journal.bundle import VerifiedBundle
    from ledger.journal.journal import Journal
    from ledger.journal.note import Verifier as NoteVerifier


def _secret(keys_dir: Path | None, skipped: list[str]) -> KeySource | None:
    if keys_dir is None:
        return None
    from ledger.journal.keys import MASTER_FILE, load_keys

    if not (Path(keys_dir) / MASTER_FILE).is_file():
        skipped.append("secret-key level: no master secret in the keys folder")
        return None
    try:
        return load_keys(Path(keys_dir))
    except KeyMaterialError as exc:
        skipped.append(f"secret-key level: keys unusable ({exc})")
        return None


def check_attestation_entry(journal: Journal | None, entry: Entry, *, key: NoteVerifier | None,
                            keys_dir: Path | None, bundle: VerifiedBundle | None = None,
                            ) -> AttestationChecked:
    """Verify the attestation held by ``entry``: against ``bundle``'s entries and root when given
    (public-key and journal levels), else against ``journal`` and, when ``keys_dir`` holds the
    master secret, at the secret-key level too. Raises the failed check's error."""
    att = entry.data.get("attestation")
    if not isinstance(att, dict):
        raise MalformedInput(f"entry {entry.seq} holds no attestation map")
    computed = attestation_hash(att)
    if entry.data.get("hash") != computed:
        raise VerificationError("attestation-hash", "the entry's hash field is not the hash of "
                                "its attestation", seq=entry.seq,
                                expected=str(entry.data.get("hash")), computed=computed)
    if key is None:
        raise UsageError("verifying an attestation needs the public key (--vkey)")
    skipped: list[str] = []
    if bundle is not None:
        entries = list(bundle.entries)
        tree_size, tree_root = bundle.tree_size, bytes(bundle.root)

        def root_at(size: int) -> bytes | None:
            return tree_root if size == tree_size else None

        secret = None
    else:
        assert journal is not None
        j = journal
        entries = list(j.entries(run=entry.run))

        def root_at(size: int) -> bytes | None:
            if size > j.size:
                raise VerificationError("checkpoint-journal", "the journal is shorter than the "
                                        "checkpoint the attestation is bound to (truncated?)",
                                        expected=str(size), computed=str(j.size))
            return bytes(j.root_at(size)) if size > 0 else None

        secret = _secret(keys_dir, skipped)
    report = verify_attestation(att, verifier_public_key=key, journal_entries=entries,
                                journal_root=root_at, secret_key=secret)
    return AttestationChecked(entry.seq, report, (*report.skipped, *skipped))


def show_attestation(att: dict[str, Any]) -> dict[str, Any]:
    """A compact, JSON-ready summary of an attestation for ``ledger attest show``."""
    return {
        "hash": attestation_hash(att),
        "attempt": att.get("attempt"),
        "run": att.get("run"),
        "task": att.get("task"),
        "verdict": att.get("verdict"),
        "commitment": att.get("commitment"),
        "range": att.get("range"),
        "checkpoint": {k: v for k, v in dict(att.get("checkpoint") or {}).items() if k != "note"},
        "activity": att.get("activity"),
        "observation": att.get("observation"),
        "match_count": att.get("match_count"),
        "matches": [{k: m.get(k) for k in ("seq", "class", "kind", "detail")}
                    for m in att.get("matches") or []],
        "echoes": att.get("echoes"),
        "answer_digests": att.get("answer_digests"),
        "refused": att.get("refused"),
    }
