"""Glue between ``ledger verify`` / ``ledger attest show`` and the pure attestation code.

In cli/ because it reads the journal and key files and builds the lines a person reads.

Not pure (it reads the journal and, when present, the secret keys); the checks themselves are in
``attest.attestation``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attest.attestation import KeySource, attestation_hash, verify_attestation
from ledger.errors import KeyMaterialError, MalformedInput, UsageError, VerificationError
from ledger.journal.codec import Entry


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


def verify_attestation_entry(journal: Any, entry: Entry, *, verifier: Any, keys_dir: Path | None,
                             lines: list[str], bundle: Any = None) -> dict[str, Any]:
    """Verify the attestation held by ``entry`` at the deepest level the inputs allow."""
    att = entry.data.get("attestation")
    if not isinstance(att, dict):
        raise MalformedInput(f"entry {entry.seq} holds no attestation map")
    computed = attestation_hash(att)
    if entry.data.get("hash") != computed:
        raise VerificationError("attestation-hash", "the entry's hash field is not the hash of "
                                "its attestation", seq=entry.seq,
                                expected=str(entry.data.get("hash")), computed=computed)
    if verifier is None:
        raise UsageError("verifying an attestation needs the public key (--vkey)")
    skipped: list[str] = []
    if bundle is not None:
        entries = list(bundle.entries)

        def root_at(size: int) -> bytes | None:
            return bytes(bundle.root) if size == bundle.tree_size else None

        secret = None
    else:
        entries = list(journal.entries(run=entry.run))

        def root_at(size: int) -> bytes | None:
            if size > journal.size:
                raise VerificationError("checkpoint-journal", "the journal is shorter than the "
                                        "checkpoint the attestation is bound to (truncated?)",
                                        expected=str(size), computed=str(journal.size))
            return bytes(journal.root_at(size)) if size > 0 else None

        secret = _secret(keys_dir, skipped)
    report = verify_attestation(att, verifier_public_key=verifier, journal_entries=entries,
                                journal_root=root_at, secret_key=secret)
    lines.append(f"attestation {report.hash[:16]}... seq {entry.seq}: {report.verdict} "
                 f"(level {report.level})")
    lines.extend(f"  {c}" for c in report.checks)
    lines.extend(f"  not checked: {s}" for s in (*report.skipped, *skipped))
    out = report.as_dict()
    out["seq"] = entry.seq
    out["skipped"] = [*report.skipped, *skipped]
    return out


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
