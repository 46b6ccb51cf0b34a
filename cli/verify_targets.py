"""``ledger verify [HASH]``: what a hash names, and the checks that apply to it.

HASH may be a run id (or unique prefix), an entry's leaf hash, a checkpoint root, or an
attestation hash. The whole journal (or bundle) is always verified first: every narrower claim
rests on it. Nothing here writes. It lives in cli/ because it builds the lines a person reads
(``report["lines"]``); the checks themselves are the journal's, the bundle's and attest's.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import KeyMaterialError, NotFound, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.journal.note import Verifier, open_checkpoint

if TYPE_CHECKING:  # imported where used: a plain verify (no --bundle, --no-remember) needs neither
    from ledger.journal.bundle import VerifiedBundle
    from ledger.journal.seen import Remembered

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def verify_target(journal: Journal | None, *, target: str | None, bundle: dict[str, Any] | None,
                  verifier: Verifier | None, since: str | None, deep: bool,
                  keys_dir: Path | None, remember: bool = True,
                  witnesses: Sequence[Verifier] = (), witness_threshold: int = 0) -> dict[str, Any]:
    lines: list[str] = []
    if bundle is not None:
        from ledger.journal.bundle import verify_bundle

        assert verifier is not None
        vb = verify_bundle(bundle, verifier)
        lines.append(f"bundle: checkpoint signature ok, {len(vb.entries)} entries "
                     f"({vb.first_seq}..{vb.last_seq}) included in tree of size {vb.tree_size}")
        report: dict[str, Any] = {"level": "public-key", "tree_size": vb.tree_size,
                                  "root": vb.root.hex(), "entries": len(vb.entries)}
        if remember:
            report["remembered"] = _remember_bundle(vb, verifier, lines)
        report["bundle_kind"] = vb.kind
        if vb.kind == "run":
            lines.append(f"bundle: the whole run {vb.run} (run.started .. run.finished and its view)")
            if vb.version == 2:
                lines.append(f"bundle: only run {vb.run}'s own entries; " + (
                    "none left out (the digest its run.finished records)" if vb.complete else
                    "that none is left out is not provable (the run was recorded before "
                    "run.finished held its entries' digest)"))
            report["complete"] = vb.complete
        elif vb.kind == "selection":
            lines.append(f"bundle: a selection of entries {vb.first_seq}..{vb.last_seq}, not a whole run "
                         "or log: it proves these entries are in the log, nothing about what is left out")
        if target is None:
            what = {"run": f"run {vb.run}", "log": "the whole log",
                    "selection": f"selected entries {vb.first_seq}..{vb.last_seq}"}[vb.kind]
            report["summary"] = (f"bundle verified: {what} ({len(vb.entries)} entries, "
                                 f"tree size {vb.tree_size})")
        else:
            report.update(_bundle_target(vb, target, verifier, lines))
        report["lines"] = lines
        return report

    assert journal is not None
    checked = journal.check(since=since, verifier=verifier, deep=deep, retain=True)
    verified = {"bodies": checked.bodies, "leaves": checked.leaves, "checkpoints": checked.checkpoints}
    summary = checked.summary
    lines.append(f"journal: {summary['entries']} entries, {summary['tiles']} tiles, "
                 f"{summary['heads']} heads recomputed from stored bytes")
    if summary["checkpoints"] or summary["external_checkpoints"]:
        lines.append(f"checkpoints: {summary['checkpoints']} in the database, "
                     f"{summary['external_checkpoints']} in the checkpoint folder: signatures and roots ok")
    else:
        lines.append("checkpoints: none yet (run `ledger checkpoint`); truncation cannot be detected")
    if summary.get("since"):
        lines.append(f"consistency: the journal extends the given checkpoint of size {summary['since']['size']}")
    report = {"level": "journal", **summary}
    if remember and verifier is not None:
        report["remembered"] = _remember_journal(journal, verifier, summary, lines)
    if witnesses:
        report["witnesses"] = _witnessed(journal, verifier, witnesses, witness_threshold, lines)
    if target is None:
        report["summary"] = f"journal verified (size {summary['size']}, root {summary['root'][:16]}...)"
    else:
        report.update(_journal_target(journal, target, verifier, keys_dir, lines))
    audit = _audit(journal, verifier, lines, verified)
    report["audit"] = audit.as_dict()
    report["findings"] = [f.as_dict() for f in audit.findings]
    report["lines"] = lines
    return report


def _witnessed(journal: Journal, verifier: Verifier | None, witnesses: Sequence[Verifier],
               threshold: int, lines: list[str]) -> dict[str, Any]:
    from ledger.journal.witness import check_witnesses

    if verifier is None:
        raise UsageError("--witness needs the log's verifier key (--vkey)")
    latest = journal.latest_checkpoint()
    if latest is None:
        raise VerificationError("witness-threshold", "the journal has no checkpoint for witnesses to cosign")
    size, note = latest
    got = check_witnesses(journal.cosigned_note(size) or note, verifier, witnesses, threshold)
    lines.append(f"witnesses: {len(got)} of {len(witnesses)} cosigned the latest checkpoint (size {size}): "
                 f"{', '.join(got)} (threshold {threshold})")
    return {"size": size, "cosigned_by": got, "threshold": threshold}


def _remembered_line(r: Remembered) -> str:
    if r.previous_size is None:
        head = f"remembered: first verify of {r.origin} here (trust on first use)"
    elif r.proved:
        head = (f"remembered: proved consistent with the checkpoint of size {r.previous_size} "
                f"(root {str(r.previous_root)[:16]}...) verified before")
    else:
        head = (f"remembered: checkpoint of size {r.previous_size} verified before; not proved "
                "(this input is older, or carries no consistency proof from it)")
    tail = f"; remembering size {r.size}" if r.size is not None else "; nothing signed to remember yet"
    return f"{head}{tail} ({r.path})"


def _remember_journal(journal: Journal, verifier: Verifier, summary: dict[str, Any],
                      lines: list[str]) -> dict[str, Any]:
    from ledger.journal.seen import check_and_remember

    size, root = int(summary["size"]), bytes.fromhex(summary["root"])
    latest = journal.latest_checkpoint()
    r = check_and_remember(verifier=verifier, size=size, root=root,
                           consistency=lambda old: journal.consistency_proof(old, size).hashes,
                           latest_note=latest[1] if latest is not None and latest[0] <= size else None)
    lines.append(_remembered_line(r))
    return r.as_dict()


def _remember_bundle(vb: VerifiedBundle, verifier: Verifier, lines: list[str]) -> dict[str, Any]:
    from ledger.journal.seen import check_and_remember
    from ledger.journal.verify import consistency_from_leaves

    def consistency(old: int) -> list[bytes] | None:
        if vb.first_seq != 0 or vb.last_seq != vb.tree_size - 1:
            return None  # a run bundle holds no prefix of the tree to prove from
        return consistency_from_leaves(b"".join(e.leaf_hash for e in vb.entries), old, vb.tree_size)

    r = check_and_remember(verifier=verifier, size=vb.tree_size, root=vb.root,
                           consistency=consistency, latest_note=vb.checkpoint_note, older_ok=True)
    lines.append(_remembered_line(r))
    return r.as_dict()


def _audit(journal: Journal, verifier: Verifier | None, lines: list[str],
           verified: dict[str, Any]) -> Any:
    """Every attestation (public-key level, bound to this journal), every recorded view against
    a replay, and every result where the run's structure puts it (evaluators/audit.py).

    ``verified``: what ``journal.verify`` just read and checked (``keep`` of verify_store): the
    entries' bytes, whose leaf hashes it recomputed into the verified tree, are decoded from
    there rather than read again, and its checkpoints (signature and root checked with this
    key) are reused rather than parsed again.
    """
    # decoding builds a few dicts per entry and nothing here makes reference cycles: pause the
    # cyclic collector, whose passes over the growing list of entries cost more than the decode
    # (and over the audit's modules while they are imported)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        from evaluators.audit import audit_runs
        from ledger.journal.codec import decode_entries_trusted

        return _audit_entries(decode_entries_trusted(verified["bodies"]),
                              journal, verifier, lines, verified, audit_runs)
    finally:
        if was_enabled:
            gc.enable()


def _audit_entries(entries: list[Entry], journal: Journal, verifier: Verifier | None, lines: list[str],
                   verified: dict[str, Any], audit_runs: Any) -> Any:
    if verifier is None and any(e.kind == "attestation" for e in entries):
        raise KeyMaterialError("attestations need the verifier key to check: pass --vkey or run "
                               "`ledger keys init` (verify never creates keys)")

    known = verified["checkpoints"]
    roots: dict[int, bytes] = {cp.size: cp.root for cp in known.values()}

    def root_at(size: int) -> bytes | None:
        if size in roots:
            return roots[size]
        return journal.root_at(size) if 0 < size <= journal.size else None
    audit = audit_runs(entries, public_key=verifier, root_at=root_at, verified_notes=known,
                       leaves=verified["leaves"])
    lines.append(f"runs: {audit.runs}; {audit.attestations} attestations checked (signature, checkpoint, "
                 f"attempt, results, place in the run); {audit.views} recorded views replayed")
    for f in audit.findings:
        lines.append(f"{f.check}: seq {f.seq} (run {f.run}): {f.message}")
    return audit


def _journal_target(journal: Journal, target: str, verifier: Verifier | None,
                    keys_dir: Path | None, lines: list[str]) -> dict[str, Any]:
    if _HEX64.fullmatch(target):
        raw = bytes.fromhex(target)
        seq = journal.find_leaf(raw)
        if seq is not None:
            entry = journal.entry(seq)
            return _entry_checks(journal, entry, verifier, keys_dir, lines)
        for e in journal.entries(kind="attestation"):
            if str(e.data.get("hash", "")).lower() == target.lower():
                return _entry_checks(journal, e, verifier, keys_dir, lines)
        for size, note in journal.store.checkpoints():
            if verifier is None:
                break
            cp = open_checkpoint(note, verifier)
            if cp.root == raw:
                lines.append(f"checkpoint: size {size}, signature ok, root matches the journal")
                return {"target": {"type": "checkpoint", "size": size, "root": target.lower()},
                        "summary": f"checkpoint of size {size} verified"}
        raise NotFound(f"no entry, attestation or checkpoint has hash {target}")
    run = journal.resolve_run(target)
    entries = list(journal.entries(run=run))
    kinds = {e.kind for e in entries}
    lines.append(f"run {run}: {len(entries)} entries, seq {entries[0].seq}..{entries[-1].seq}")
    attest_reports = []
    for e in entries:
        if e.kind == "attestation":
            attest_reports.append(_attestation_checks(journal, e, verifier, keys_dir, lines))
    state = "finished" if "run.finished" in kinds else "unfinished"
    return {"target": {"type": "run", "run": run, "entries": len(entries), "state": state,
                       "attestations": attest_reports},
            "summary": f"run {run} verified ({len(entries)} entries, {state}, "
                       f"{len(attest_reports)} attestations)"}


def _entry_checks(journal: Journal, entry: Entry, verifier: Verifier | None,
                  keys_dir: Path | None, lines: list[str]) -> dict[str, Any]:
    size = journal.size
    proof = journal.inclusion_proof(entry.seq, size)
    merkle.verify_inclusion(entry.seq, size, entry.leaf_hash, list(proof.hashes), proof.root)
    lines.append(f"entry {entry.seq} ({entry.kind}): leaf hash and inclusion proof in tree of size {size} ok")
    out: dict[str, Any] = {"target": {"type": "entry", "seq": entry.seq, "kind": entry.kind,
                                      "leaf_hash": entry.leaf_hash.hex()},
                           "summary": f"entry {entry.seq} verified"}
    if entry.kind == "attestation":
        out["target"]["attestation"] = _attestation_checks(journal, entry, verifier, keys_dir, lines)
        out["summary"] = f"attestation at seq {entry.seq} verified ({out['target']['attestation'].get('verdict')})"
    return out


def _attestation_checks(journal: Journal | None, entry: Entry, verifier: Verifier | None,
                        keys_dir: Path | None, lines: list[str],
                        bundle: VerifiedBundle | None = None) -> dict[str, Any]:
    try:
        from cli.attest_support import verify_attestation_entry
    except ImportError as exc:  # the attestation package is not built in this checkout
        raise UsageError("attestation verification is not available in this build") from exc
    return verify_attestation_entry(journal, entry, verifier=verifier, keys_dir=keys_dir, lines=lines,
                                    bundle=bundle)


def _bundle_target(vb: VerifiedBundle, target: str, verifier: Verifier,
                   lines: list[str]) -> dict[str, Any]:
    if _HEX64.fullmatch(target):
        e = vb.find(target)
        if e is None:
            for cand in vb.entries:
                if cand.kind == "attestation" and str(cand.data.get("hash", "")).lower() == target.lower():
                    e = cand
                    break
        if e is None:
            raise NotFound(f"the bundle holds no entry or attestation with hash {target}")
        lines.append(f"entry {e.seq} ({e.kind}): included in the signed tree")
        out: dict[str, Any] = {"target": {"type": "entry", "seq": e.seq, "kind": e.kind},
                               "summary": f"entry {e.seq} verified from the bundle"}
        if e.kind == "attestation":
            att = _attestation_checks(None, e, verifier, None, lines, bundle=vb)
            out["target"]["attestation"] = att
            out["summary"] = f"attestation at seq {e.seq} verified ({att.get('verdict')})"
        return out
    runs = {e.run for e in vb.entries if e.run and e.run.startswith(target)}
    if len(runs) != 1:
        raise NotFound(f"{target!r} names {'no' if not runs else 'more than one'} run in the bundle")
    run = runs.pop()
    atts = [_attestation_checks(None, e, verifier, None, lines, bundle=vb)
            for e in vb.entries if e.run == run and e.kind == "attestation"]
    return {"target": {"type": "run", "run": run, "attestations": atts},
            "summary": f"run {run} verified from the bundle ({len(atts)} attestations)"}
