"""What plain ``ledger verify`` checks above the bytes: every attestation, every recorded view, and
that every result sits where the run's structure puts it.

Pure: the journal's entries, the verifier's public key and the journal's roots come in as values
(``root_at(size)``, the root the verified journal has at ``size``); findings come out. The journal
itself (hashes, tiles, heads, checkpoints) is verified before, by ``ledger.journal.verify``.

Per run:
- ``injected``: an entry the run's structure does not place (evaluators/structure.py);
- every attestation the structure counts, at the public-key level (``attest.attestation``:
  signature and key, the checkpoint note it embeds, its match proofs, the verdict re-derived from
  the evidence), then bound to this journal: the checkpoint's root is the journal's root at that
  size (``attestation-checkpoint``), the entry names the attempt, run and task the signed body
  names (``attestation-binding``), and the result entries it binds are the journal's, by leaf
  hash (``results-binding``);
- ``view-replay``: every recorded view recomputed from the entries before it by the evaluator
  that recorded it (evaluators/registry.py), field by field;
- ``environment-binding``: every image digest an attestation binds (``environment.digests``, the
  images the attempt's boxes ran) is the digest of an ``environment.ready`` entry the run
  journaled for the attempt's task before the attempt began.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attest.attestation import RESULT_KINDS, results_digest, verify_public_level
from evaluators.registry import replay_run
from ledger.errors import LedgerError, MalformedInput, VerificationError
from ledger.journal.codec import Entry


@dataclass(frozen=True)
class AuditFinding:
    check: str
    seq: int
    run: str | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "seq": self.seq, "run": self.run, "message": self.message}


@dataclass
class AuditReport:
    runs: int = 0
    attestations: int = 0
    views: int = 0
    findings: list[AuditFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "attestations": self.attestations, "views": self.views,
                "findings": [f.as_dict() for f in self.findings]}


def _check_attestation(e: Entry, public_key: Any, root_at: Callable[[int], bytes | None],
                       by_seq: dict[int, Entry], verified_notes: Mapping[str, Any] | None,
                       leaves: bytes | None = None) -> None:
    """Raise VerificationError / MalformedInput when the attestation in ``e`` does not hold."""
    att = e.data.get("attestation")
    if not isinstance(att, dict):
        raise MalformedInput("the entry holds no attestation map")
    h, _ = verify_public_level(att, verifier_public_key=public_key, verified_notes=verified_notes)
    if h != e.data.get("hash"):
        raise VerificationError("attestation-hash", "the entry's hash field is not the hash of its "
                                "attestation", seq=e.seq, expected=h,
                                computed=str(e.data.get("hash")))
    if (e.data.get("attempt") != att["attempt"] or e.run != att["run"] or e.task != att["task"]
            or e.seq <= att["range"]["last_seq"]):
        raise VerificationError("attestation-binding", "the entry is filed under another attempt, run "
                                "or task than the signed attestation names, or inside its own range",
                                seq=e.seq, expected=str(att["attempt"]), computed=str(e.data.get("attempt")))
    cp = att["checkpoint"]
    if cp["size"] > e.seq:
        raise VerificationError("attestation-checkpoint", "the attestation is bound to a checkpoint "
                                "that covers its own entry", seq=e.seq)
    root = root_at(cp["size"])
    if root is None or root.hex() != cp["root"]:
        raise VerificationError("attestation-checkpoint", "the signed checkpoint's root is not the "
                                f"journal's root at size {cp['size']}", seq=e.seq,
                                expected=cp["root"], computed=root.hex() if root else None)
    results = att.get("results")
    if results is not None:
        attempt = att["attempt"]
        hashes: list[bytes] = []  # the bound entries' leaf hashes, in the signed order
        for s in results["seqs"]:
            b = by_seq.get(s)
            if b is None or b.kind not in RESULT_KINDS or b.data.get("attempt") != attempt:
                raise VerificationError("results-binding", "a bound result is not a result entry of "
                                        "the attested attempt", seq=s)
            hashes.append(leaves[32 * b.seq:32 * b.seq + 32] if leaves is not None else b.leaf_hash)
        got = results_digest(hashes)
        if got != results["digest"]:
            raise VerificationError("results-binding", "the bound results' leaf hashes differ from "
                                    "the signed digest", seq=e.seq, expected=results["digest"], computed=got)


def _ready_digests(run_entries: Iterable[Entry]) -> dict[str | None, list[tuple[int, str]]]:
    """Per task, (seq, digest) of every ``environment.ready`` entry of the run."""
    out: dict[str | None, list[tuple[int, str]]] = {}
    for e in run_entries:
        if e.kind == "environment.ready" and isinstance(e.data.get("digest"), str):
            out.setdefault(e.task, []).append((e.seq, e.data["digest"]))
    return out


def _check_environment(att: Mapping[str, Any], ready: Mapping[str | None, list[tuple[int, str]]]) -> None:
    """Raise when a digest the attestation binds is not its task's ``environment.ready`` one."""
    env = att.get("environment")
    if not isinstance(env, Mapping):
        return
    first = att["range"]["first_seq"]
    journaled = {d for seq, d in ready.get(att["task"], ()) if seq < first}
    for digest in env.get("digests") or ():
        if digest not in journaled:
            raise VerificationError(
                "environment-binding", "the attempt ran in an image whose digest is not the one the "
                "run made ready for its task (environment.ready)", expected=", ".join(sorted(journaled))
                or "an environment.ready entry", computed=str(digest))


def _environment_finding(e: Entry, ready: Mapping[str | None, list[tuple[int, str]]], run_id: str,
                         add: Callable[[AuditFinding], None]) -> None:
    """The ``environment-binding`` finding of attestation entry ``e`` (checked on its own: a
    rewritten journal fails the other checks too, and this one still names the image)."""
    att = e.data.get("attestation")
    try:
        if isinstance(att, Mapping) and isinstance(att.get("range"), Mapping):
            _check_environment(att, ready)
    except VerificationError as exc:
        add(AuditFinding(exc.check, e.seq, run_id, f"attestation of {e.data.get('attempt')}: {exc}"))


def audit_runs(entries: Iterable[Entry], *, public_key: Any,
               root_at: Callable[[int], bytes | None],
               verified_notes: Mapping[str, Any] | None = None,
               leaves: bytes | None = None) -> AuditReport:
    """Audit every run in ``entries`` (the whole journal, in seq order); never raises on content.

    ``verified_notes``: checkpoint notes already verified with ``public_key`` (text -> Checkpoint),
    whose signatures an attestation that embeds them need not check again.
    ``leaves``: the verified journal's leaf hashes packed 32 bytes per seq (entry ``seq`` at
    ``[32 * seq:32 * seq + 32]``), so bound results are not hashed again; only for ``entries``
    decoded from the very bytes those hashes were computed from.
    """
    by_run: dict[str, list[Entry]] = {}
    for e in entries:
        run = e.run
        if run is not None:
            group = by_run.get(run)
            if group is None:
                by_run[run] = group = []
            group.append(e)
    report = AuditReport(runs=len(by_run))
    add = report.findings.append
    for run_id, run_entries in by_run.items():
        result = replay_run(run_entries, run_id)
        for f in result.injected:
            add(AuditFinding("injected", f.seq, run_id, f"{f.kind}"
                             f"{' of ' + f.attempt if f.attempt else ''}: {f.reason}"))
        injected = {f.seq for f in result.injected}
        for v in result.views:
            if v.replayed:
                report.views += 1
                if v.diff_count:
                    first = v.diffs[0].path if v.diffs else "?"
                    add(AuditFinding("view-replay", v.seq, run_id, f"the recorded {v.evaluator} view "
                                     f"differs from a replay in {v.diff_count} field(s) (first: {first})"))
        by_seq = {e.seq: e for e in run_entries if e.kind in RESULT_KINDS}
        ready = _ready_digests(run_entries)
        for e in run_entries:
            if e.kind != "attestation" or e.seq in injected:
                continue
            report.attestations += 1
            try:
                _check_attestation(e, public_key, root_at, by_seq, verified_notes, leaves)
            except VerificationError as exc:
                add(AuditFinding(exc.check, e.seq, run_id, f"attestation of {e.data.get('attempt')}: {exc}"))
            except LedgerError as exc:
                add(AuditFinding("attestation-format", e.seq, run_id,
                                 f"attestation of {e.data.get('attempt')}: {exc}"))
            _environment_finding(e, ready, run_id, add)
    report.findings.sort(key=lambda f: f.seq)
    return report
