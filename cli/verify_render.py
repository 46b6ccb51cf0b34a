"""The lines of ``ledger verify``: each typed step of a ``Verification`` (ledger/verify/steps.py)
as the text a person reads. Nothing here checks anything."""

from __future__ import annotations

from ledger.journal.seen import Remembered
from ledger.verify import steps


def render_lines(v: steps.Verification) -> list[str]:
    """Every step's lines, in the order the checks ran."""
    return [line for step in v.steps for line in _lines(step)]


def _lines(step: steps.Step) -> list[str]:
    if isinstance(step, steps.JournalChecked):
        return _journal(step.summary)
    if isinstance(step, steps.BundleChecked):
        return [f"bundle: checkpoint signature ok, {step.entries} entries "
                f"({step.first_seq}..{step.last_seq}) included in tree of size {step.tree_size}"]
    if isinstance(step, steps.BundleScope):
        return _scope(step)
    if isinstance(step, steps.RememberedChecked):
        return [_remembered(step.remembered)]
    if isinstance(step, steps.Witnessed):
        return [f"witnesses: {len(step.cosigned_by)} of {step.witnesses} cosigned the latest checkpoint "
                f"(size {step.size}): {', '.join(step.cosigned_by)} (threshold {step.threshold})"]
    if isinstance(step, steps.RunTarget):
        head = [] if step.from_bundle else [
            f"run {step.run}: {step.entries} entries, seq {step.first_seq}..{step.last_seq}"]
        return head + [line for a in step.attestations for line in _attestation(a)]
    if isinstance(step, steps.EntryTarget):
        head = (f"entry {step.seq} ({step.kind}): included in the signed tree" if step.leaf_hash is None else
                f"entry {step.seq} ({step.kind}): leaf hash and inclusion proof in tree of size {step.size} ok")
        return [head, *(_attestation(step.attestation) if step.attestation is not None else [])]
    if isinstance(step, steps.CheckpointTarget):
        return [f"checkpoint: size {step.size}, signature ok, root matches the journal"]
    if isinstance(step, steps.Audited):
        a = step.report
        return [f"runs: {a.runs}; {a.attestations} attestations checked (signature, checkpoint, "
                f"attempt, results, place in the run); {a.views} recorded views replayed",
                *(f"{f.check}: seq {f.seq} (run {f.run}): {f.message}" for f in a.findings)]
    raise TypeError(f"no lines for a {type(step).__name__}")


def _journal(summary: dict[str, object]) -> list[str]:
    s = summary
    lines = [f"journal: {s['entries']} entries, {s['tiles']} tiles, {s['heads']} heads recomputed "
             "from stored bytes"]
    if s["checkpoints"] or s["external_checkpoints"]:
        lines.append(f"checkpoints: {s['checkpoints']} in the database, "
                     f"{s['external_checkpoints']} in the checkpoint folder: signatures and roots ok")
    else:
        lines.append("checkpoints: none yet (run `ledger checkpoint`); truncation cannot be detected")
    since = s.get("since")
    if isinstance(since, dict):
        lines.append(f"consistency: the journal extends the given checkpoint of size {since['size']}")
    return lines


def _scope(b: steps.BundleScope) -> list[str]:
    if b.kind == "run":
        lines = [f"bundle: the whole run {b.run} (run.started .. run.finished and its view)"]
        if b.version == 2:
            lines.append(f"bundle: only run {b.run}'s own entries; " + (
                "none left out (the digest its run.finished records)" if b.complete else
                "that none is left out is not provable (the run was recorded before "
                "run.finished held its entries' digest)"))
        return lines
    if b.kind == "selection":
        return [f"bundle: a selection of entries {b.first_seq}..{b.last_seq}, not a whole run "
                "or log: it proves these entries are in the log, nothing about what is left out"]
    return []


def _remembered(r: Remembered) -> str:
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


def _attestation(a: steps.AttestationChecked) -> list[str]:
    r = a.report
    return [f"attestation {r.hash[:16]}... seq {a.seq}: {r.verdict} (level {r.level})",
            *(f"  {c}" for c in r.checks),
            *(f"  not checked: {s}" for s in a.skipped)]
