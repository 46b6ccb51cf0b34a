"""``Verifier``: what ``ledger verify`` checks, as a library object with composable checks.

    Verifier(key, keys_dir=...).verify(subject, policy) -> Verification   (or raises)

The *subject* is an open ``Journal`` or a ``Bundle`` (an exported bundle's parsed data). The
*policy* is a sequence of checks run in order; each takes the ``Context`` (subject, key, what
earlier checks established) and returns a typed step (``ledger.verify.steps``) or nothing.
``journal_policy`` / ``bundle_policy`` build the policy ``ledger verify`` runs from its options.

One error channel: every failure raises an error of ``ledger.errors`` (``VerificationError``
naming the failed check and the first bad seq, ``NotFound`` for a HASH that names nothing,
``KeyMaterialError`` / ``UsageError`` for missing input). Findings of the audit (checks that do
not stop the others) raise ``FindingsError`` at the end, a ``VerificationError`` for the first
finding that carries the whole ``Verification`` so a caller can still show every step.
A ``Verification`` is returned only when every check held. Nothing here writes, except the
remembered checkpoint (``RememberCheckpoint``, ``ledger.journal.seen``).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.errors import KeyMaterialError, NotFound, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.note import open_checkpoint
from ledger.verify.attestations import check_attestation_entry
from ledger.verify.steps import (
    Audited,
    BundleChecked,
    BundleScope,
    CheckpointTarget,
    EntryTarget,
    JournalChecked,
    RememberedChecked,
    RunTarget,
    Step,
    Verification,
    Witnessed,
)

if TYPE_CHECKING:
    from ledger.journal.bundle import VerifiedBundle
    from ledger.journal.codec import Entry
    from ledger.journal.note import Verifier as NoteVerifier
    from ledger.journal.verify import StoreCheck

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class Bundle:
    """An exported bundle to verify (``ledger.journal.bundle.load_bundle_bytes``' result)."""

    data: dict[str, Any]


@dataclass
class Context:
    """What a check sees: the subject, the keys, and what earlier checks established."""

    key: NoteVerifier | None
    keys_dir: Path | None
    journal: Journal | None = None
    bundle_data: dict[str, Any] | None = None
    bundle: VerifiedBundle | None = None  # set by BundleSignature
    store: StoreCheck | None = None  # set by JournalIntegrity
    summary: str = ""


class Check(Protocol):
    """One check of a policy: raises to fail, returns the step it established (or None)."""

    def __call__(self, ctx: Context) -> Step | None: ...


class FindingsError(VerificationError):
    """The audit found something: the first finding, with the whole verification attached."""

    def __init__(self, verification: Verification) -> None:
        findings = verification.findings
        first = findings[0]
        more = f" (and {len(findings) - 1} more finding(s) above)" if len(findings) > 1 else ""
        super().__init__(first.check, f"{first.message}{more}", seq=first.seq)
        self.verification = verification


class Verifier:
    """Runs a policy against a journal or a bundle with one verifier key (and, for the
    secret-key level of attestations, the keys folder)."""

    def __init__(self, key: NoteVerifier | None, *, keys_dir: Path | None = None) -> None:
        self.key, self.keys_dir = key, keys_dir

    def verify(self, subject: Journal | Bundle, policy: Sequence[Check]) -> Verification:
        ctx = Context(self.key, self.keys_dir)
        if isinstance(subject, Bundle):
            ctx.bundle_data = subject.data
        else:
            ctx.journal = subject
        out = Verification()
        for check in policy:
            step = check(ctx)
            if step is not None:
                out.steps.append(step)
        out.summary = ctx.summary
        if out.findings:
            raise FindingsError(out)
        return out


# --------------------------------------------------------------------------- the checks


@dataclass(frozen=True)
class JournalIntegrity:
    """Every stored byte, tile, head and checkpoint recomputed (``Journal.check``); ``since``:
    prove the journal extends that checkpoint; ``deep``: re-check every entry's encoding."""

    since: str | None = None
    deep: bool = False

    def __call__(self, ctx: Context) -> Step:
        j = _journal(ctx)
        ctx.store = j.check(since=self.since, verifier=ctx.key, deep=self.deep, retain=True)
        s = ctx.store.summary
        ctx.summary = f"journal verified (size {s['size']}, root {s['root'][:16]}...)"
        return JournalChecked(s)


@dataclass(frozen=True)
class BundleSignature:
    """The bundle's checkpoint signature, and every entry's inclusion in the signed tree."""

    def __call__(self, ctx: Context) -> Step:
        from ledger.journal.bundle import verify_bundle

        if ctx.bundle_data is None or ctx.key is None:
            raise UsageError("a bundle is verified with its publisher's verifier key (--vkey)")
        vb = ctx.bundle = verify_bundle(ctx.bundle_data, ctx.key)
        what = {"run": f"run {vb.run}", "log": "the whole log",
                "selection": f"selected entries {vb.first_seq}..{vb.last_seq}"}[vb.kind]
        ctx.summary = f"bundle verified: {what} ({len(vb.entries)} entries, tree size {vb.tree_size})"
        return BundleChecked(len(vb.entries), vb.first_seq, vb.last_seq, vb.tree_size, vb.root.hex())


@dataclass(frozen=True)
class BundleCoverage:
    """What the verified bundle covers (a run, the log, a selection): ``verify_bundle`` proved
    it; this step states it."""

    def __call__(self, ctx: Context) -> Step:
        vb = ctx.bundle
        if vb is None:
            raise UsageError("BundleCoverage runs after BundleSignature")
        return BundleScope(vb.kind, vb.run, vb.version, vb.complete, vb.first_seq, vb.last_seq)


@dataclass(frozen=True)
class RememberCheckpoint:
    """Prove the tree consistent with the checkpoint an earlier verify remembered, then
    remember the newest (``$XDG_CONFIG_HOME/eval-ledger/seen/``; ``directory`` elsewhere)."""

    directory: Path | None = None

    def __call__(self, ctx: Context) -> Step | None:
        from ledger.journal.seen import check_and_remember

        if ctx.key is None:
            return None
        if ctx.bundle is not None:
            vb = ctx.bundle

            def consistency(old: int) -> list[bytes] | None:
                from ledger.journal.verify import consistency_from_leaves

                if vb.first_seq != 0 or vb.last_seq != vb.tree_size - 1:
                    return None  # a run bundle holds no prefix of the tree to prove from
                return consistency_from_leaves(b"".join(e.leaf_hash for e in vb.entries), old, vb.tree_size)

            r = check_and_remember(verifier=ctx.key, size=vb.tree_size, root=vb.root, consistency=consistency,
                                   latest_note=vb.checkpoint_note, older_ok=True, directory=self.directory)
            return RememberedChecked(r)
        j, store = _journal(ctx), _store(ctx)
        size, root = int(store.summary["size"]), bytes.fromhex(store.summary["root"])
        latest = j.latest_checkpoint()
        r = check_and_remember(verifier=ctx.key, size=size, root=root,
                               consistency=lambda old: j.consistency_proof(old, size).hashes,
                               latest_note=latest[1] if latest is not None and latest[0] <= size else None,
                               directory=self.directory)
        return RememberedChecked(r)


@dataclass(frozen=True)
class WitnessCosignatures:
    """At least ``threshold`` of ``witnesses`` cosigned the journal's latest checkpoint."""

    witnesses: tuple[NoteVerifier, ...]
    threshold: int

    def __call__(self, ctx: Context) -> Step:
        from ledger.journal.witness import check_witnesses

        j = _journal(ctx)
        if ctx.key is None:
            raise UsageError("--witness needs the log's verifier key (--vkey)")
        latest = j.latest_checkpoint()
        if latest is None:
            raise VerificationError("witness-threshold", "the journal has no checkpoint for witnesses to cosign")
        size, note = latest
        got = check_witnesses(j.cosigned_note(size) or note, ctx.key, self.witnesses, self.threshold)
        return Witnessed(size, tuple(got), len(self.witnesses), self.threshold)


@dataclass(frozen=True)
class Target:
    """What HASH names (a run id or prefix, an entry's leaf hash, an attestation's hash, a
    checkpoint root), and the checks that apply to it."""

    hash: str

    def __call__(self, ctx: Context) -> Step:
        step = _bundle_target(ctx, self.hash) if ctx.bundle is not None else _journal_target(ctx, self.hash)
        ctx.summary = step.as_data()["summary"]
        return step


@dataclass(frozen=True)
class AuditRuns:
    """Every attestation (public-key level, bound to this journal), every recorded view against
    a replay, every result where the run's structure puts it (evaluators/audit.py); over the
    bytes ``JournalIntegrity`` read and checked, not read again."""

    def __call__(self, ctx: Context) -> Step:
        # decoding builds a few dicts per entry and nothing here makes reference cycles: pause the
        # cyclic collector, whose passes over the growing list of entries cost more than the decode
        # (and over the audit's modules while they are imported)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            from evaluators.audit import audit_runs
            from ledger.journal.codec import decode_entries_trusted

            store = _store(ctx)
            return _audit(decode_entries_trusted(store.bodies or []), _journal(ctx), ctx.key, store, audit_runs)
        finally:
            if was_enabled:
                gc.enable()


def _audit(entries: list[Entry], journal: Journal, key: NoteVerifier | None, store: StoreCheck,
           audit_runs: Callable[..., Any]) -> Audited:
    if key is None and any(e.kind == "attestation" for e in entries):
        raise KeyMaterialError("attestations need the verifier key to check: pass --vkey or run "
                               "`ledger keys init` (verify never creates keys)")
    known = store.checkpoints
    roots: dict[int, bytes] = {cp.size: cp.root for cp in known.values()}

    def root_at(size: int) -> bytes | None:
        if size in roots:
            return roots[size]
        return journal.root_at(size) if 0 < size <= journal.size else None
    return Audited(audit_runs(entries, public_key=key, root_at=root_at, verified_notes=known,
                              leaves=store.leaves))


def _journal(ctx: Context) -> Journal:
    if ctx.journal is None:
        raise UsageError("this check needs a journal, not a bundle")
    return ctx.journal


def _store(ctx: Context) -> StoreCheck:
    if ctx.store is None:
        raise UsageError("this check runs after JournalIntegrity (it reads what that verified)")
    return ctx.store


def _journal_target(ctx: Context, target: str) -> Step:
    journal = _journal(ctx)
    if _HEX64.fullmatch(target):
        raw = bytes.fromhex(target)
        seq = journal.find_leaf(raw)
        if seq is not None:
            return _entry_target(ctx, journal, journal.entry(seq))
        for e in journal.entries(kind="attestation"):
            if str(e.data.get("hash", "")).lower() == target.lower():
                return _entry_target(ctx, journal, e)
        for size, note in journal.store.checkpoints():
            if ctx.key is None:
                break
            if open_checkpoint(note, ctx.key).root == raw:
                return CheckpointTarget(size, target.lower())
        raise NotFound(f"no entry, attestation or checkpoint has hash {target}")
    run = journal.resolve_run(target)
    entries = list(journal.entries(run=run))
    atts = tuple(check_attestation_entry(journal, e, key=ctx.key, keys_dir=ctx.keys_dir)
                 for e in entries if e.kind == "attestation")
    state = "finished" if any(e.kind == "run.finished" for e in entries) else "unfinished"
    return RunTarget(run, atts, entries=len(entries), first_seq=entries[0].seq,
                     last_seq=entries[-1].seq, state=state)


def _entry_target(ctx: Context, journal: Journal, entry: Entry) -> Step:
    size = journal.size
    proof = journal.inclusion_proof(entry.seq, size)
    merkle.verify_inclusion(entry.seq, size, entry.leaf_hash, list(proof.hashes), proof.root)
    att = (check_attestation_entry(journal, entry, key=ctx.key, keys_dir=ctx.keys_dir)
           if entry.kind == "attestation" else None)
    return EntryTarget(entry.seq, entry.kind, size, entry.leaf_hash.hex(), att)


def _bundle_target(ctx: Context, target: str) -> Step:
    vb = ctx.bundle
    assert vb is not None
    if _HEX64.fullmatch(target):
        e = vb.find(target)
        if e is None:
            e = next((c for c in vb.entries if c.kind == "attestation"
                      and str(c.data.get("hash", "")).lower() == target.lower()), None)
        if e is None:
            raise NotFound(f"the bundle holds no entry or attestation with hash {target}")
        att = (check_attestation_entry(None, e, key=ctx.key, keys_dir=None, bundle=vb)
               if e.kind == "attestation" else None)
        return EntryTarget(e.seq, e.kind, vb.tree_size, None, att)
    runs = {e.run for e in vb.entries if e.run and e.run.startswith(target)}
    if len(runs) != 1:
        raise NotFound(f"{target!r} names {'no' if not runs else 'more than one'} run in the bundle")
    run = runs.pop()
    atts = tuple(check_attestation_entry(None, e, key=ctx.key, keys_dir=None, bundle=vb)
                 for e in vb.entries if e.run == run and e.kind == "attestation")
    return RunTarget(run, atts, from_bundle=True)


# --------------------------------------------------------------------------- the policies


@dataclass(frozen=True)
class VerifyOptions:
    """What ``ledger verify`` was asked: HASH, ``--since``, ``--deep``, ``--no-remember``,
    ``--witness`` / ``--witness-threshold``."""

    target: str | None = None
    since: str | None = None
    deep: bool = False
    remember: bool = True
    witnesses: tuple[NoteVerifier, ...] = ()
    witness_threshold: int = 0
    remember_dir: Path | None = None  # the remembered checkpoints' folder (None: the default)


def journal_policy(o: VerifyOptions) -> tuple[Check, ...]:
    """The journal, then what was remembered and witnessed, then HASH, then the audit."""
    checks: list[Check] = [JournalIntegrity(o.since, o.deep)]
    if o.remember:
        checks.append(RememberCheckpoint(o.remember_dir))
    if o.witnesses:
        checks.append(WitnessCosignatures(o.witnesses, o.witness_threshold))
    if o.target is not None:
        checks.append(Target(o.target))
    checks.append(AuditRuns())
    return tuple(checks)


def bundle_policy(o: VerifyOptions) -> tuple[Check, ...]:
    """The bundle's signature and inclusion, what was remembered, what it covers, then HASH."""
    checks: list[Check] = [BundleSignature()]
    if o.remember:
        checks.append(RememberCheckpoint(o.remember_dir))
    checks.append(BundleCoverage())
    if o.target is not None:
        checks.append(Target(o.target))
    return tuple(checks)


def verify(subject: Journal | Bundle, key: NoteVerifier | None, options: VerifyOptions, *,
           keys_dir: Path | None = None) -> Verification:
    """``ledger verify`` in one call: the policy its options ask for, run against ``subject``."""
    policy = bundle_policy(options) if isinstance(subject, Bundle) else journal_policy(options)
    return Verifier(key, keys_dir=keys_dir).verify(subject, policy)
