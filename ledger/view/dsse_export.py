"""Gather what an exported attestation's Statement names (diff, task, bundle digests) and sign it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attest.dsse import export_statement, sign_envelope
from evaluators.explore import AttemptDetail, explore_attempt_patch
from ledger.errors import MalformedInput, NotFound
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal


def _task_digests(journal: Journal, run: str | None) -> dict[str, str]:
    started = next(journal.entries(run=run, kind="run.started"), None) if run else None
    tasks = started.data.get("tasks", []) if started is not None else []
    return {t["id"]: t["hash"] for t in tasks
            if isinstance(t, dict) and isinstance(t.get("id"), str) and isinstance(t.get("hash"), str)}


def export_envelopes(journal: Journal, entries: Sequence[Entry], keys_dir: Path, *,
                     bundle_file: Path | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(attempt, signed DSSE envelope) for each attestation entry, signed with the ledger's key."""
    from ledger.journal.keys import load_keys

    keys = load_keys(keys_dir)
    bundle = None
    if bundle_file is not None:
        try:
            bundle = (bundle_file.name, hashlib.sha256(bundle_file.read_bytes()).hexdigest())
        except OSError as exc:
            raise NotFound(f"cannot read bundle {bundle_file}: {exc.strerror}") from None
    digests: dict[str | None, dict[str, str]] = {}
    out = []
    for entry in entries:
        att = entry.data.get("attestation")
        if not isinstance(att, dict):
            raise MalformedInput(f"entry {entry.seq} holds no attestation map")
        attempt = str(att.get("attempt"))
        if entry.run not in digests:
            digests[entry.run] = _task_digests(journal, entry.run)
        detail: AttemptDetail = explore_attempt_patch(
            e for e in journal.entries(run=entry.run, kind="diff") if e.data.get("attempt") == attempt)
        statement = export_statement(
            att, diff_sha256=detail.diff_sha256,
            task_digest=digests[entry.run].get(str(att.get("task"))), bundle=bundle)
        out.append((attempt, sign_envelope(statement, keys.signer)))
    return out
