"""What each check of a verification established, as typed records (``ledger.verify``).

Every check of a policy returns one of these (or nothing); a ``Verification`` is the ordered
list of them. Each record gives its part of the ``--json`` report (``as_data``); the lines a
person reads are made from the same records in ``cli/verify_render.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attest.attestation import VerifyReport
    from evaluators.audit import AuditFinding, AuditReport
    from ledger.journal.seen import Remembered


@dataclass(frozen=True)
class JournalChecked:
    """The whole journal recomputed from its stored bytes (``Journal.check``)."""

    summary: dict[str, Any]

    def as_data(self) -> dict[str, Any]:
        return {"level": "journal", **self.summary}


@dataclass(frozen=True)
class BundleChecked:
    """A bundle's checkpoint signature, and every entry's inclusion in the signed tree."""

    entries: int
    first_seq: int
    last_seq: int
    tree_size: int
    root: str

    def as_data(self) -> dict[str, Any]:
        return {"level": "public-key", "tree_size": self.tree_size, "root": self.root,
                "entries": self.entries}


@dataclass(frozen=True)
class BundleScope:
    """What a verified bundle covers: a whole run (``complete``: provably none of its entries
    left out), the whole log, or a selection of entries that claims nothing about the rest."""

    kind: str  # "run" | "log" | "selection"
    run: str | None
    version: int
    complete: bool
    first_seq: int
    last_seq: int

    def as_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bundle_kind": self.kind}
        if self.kind == "run":
            out["complete"] = self.complete
        return out


@dataclass(frozen=True)
class RememberedChecked:
    """The tree proved consistent with the checkpoint remembered from an earlier verify."""

    remembered: Remembered

    def as_data(self) -> dict[str, Any]:
        return {"remembered": self.remembered.as_dict()}


@dataclass(frozen=True)
class Witnessed:
    """Witnesses' cosignatures on the latest checkpoint, at least ``threshold`` of them."""

    size: int
    cosigned_by: tuple[str, ...]
    witnesses: int
    threshold: int

    def as_data(self) -> dict[str, Any]:
        return {"witnesses": {"size": self.size, "cosigned_by": list(self.cosigned_by),
                              "threshold": self.threshold}}


@dataclass(frozen=True)
class AttestationChecked:
    """One attestation entry verified at the deepest level its inputs allow; ``skipped``: what
    could not be checked (the report's own, then the missing secret key's)."""

    seq: int
    report: VerifyReport
    skipped: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {**self.report.as_dict(), "seq": self.seq, "skipped": list(self.skipped)}


@dataclass(frozen=True)
class RunTarget:
    """HASH named a run: its entries, and each of its attestations checked."""

    run: str
    attestations: tuple[AttestationChecked, ...]
    entries: int = 0
    first_seq: int = 0
    last_seq: int = 0
    state: str = ""
    from_bundle: bool = False

    @property
    def summary(self) -> str:
        if self.from_bundle:
            return f"run {self.run} verified from the bundle ({len(self.attestations)} attestations)"
        return (f"run {self.run} verified ({self.entries} entries, {self.state}, "
                f"{len(self.attestations)} attestations)")

    def as_data(self) -> dict[str, Any]:
        target: dict[str, Any] = {"type": "run", "run": self.run}
        if not self.from_bundle:
            target.update(entries=self.entries, state=self.state)
        target["attestations"] = [a.as_dict() for a in self.attestations]
        return {"target": target, "summary": self.summary}


@dataclass(frozen=True)
class EntryTarget:
    """HASH named an entry (or an attestation's hash): its inclusion, and the attestation it holds."""

    seq: int
    kind: str
    size: int
    leaf_hash: str | None  # None: from a bundle (its inclusion is the bundle's check)
    attestation: AttestationChecked | None = None

    @property
    def summary(self) -> str:
        if self.attestation is not None:
            return f"attestation at seq {self.seq} verified ({self.attestation.report.verdict})"
        return f"entry {self.seq} verified" + (" from the bundle" if self.leaf_hash is None else "")

    def as_data(self) -> dict[str, Any]:
        target: dict[str, Any] = {"type": "entry", "seq": self.seq, "kind": self.kind}
        if self.leaf_hash is not None:
            target["leaf_hash"] = self.leaf_hash
        if self.attestation is not None:
            target["attestation"] = self.attestation.as_dict()
        return {"target": target, "summary": self.summary}


@dataclass(frozen=True)
class CheckpointTarget:
    """HASH named a stored checkpoint's root: its signature and root checked."""

    size: int
    root: str

    def as_data(self) -> dict[str, Any]:
        return {"target": {"type": "checkpoint", "size": self.size, "root": self.root},
                "summary": f"checkpoint of size {self.size} verified"}


@dataclass(frozen=True)
class Audited:
    """Every attestation, recorded view and result placement of every run (evaluators/audit.py)."""

    report: AuditReport

    @property
    def findings(self) -> Sequence[AuditFinding]:
        return self.report.findings

    def as_data(self) -> dict[str, Any]:
        return {"audit": self.report.as_dict(), "findings": [f.as_dict() for f in self.report.findings]}


Step = (JournalChecked | BundleChecked | BundleScope | RememberedChecked | Witnessed | RunTarget | EntryTarget
        | CheckpointTarget | Audited)


@dataclass
class Verification:
    """The outcome of ``Verifier.verify``: every step that held, in order, and the one-line
    summary of what was verified. Returned only when nothing failed; a failure raises
    (``ledger.verify.FindingsError`` carries the verification when the failures are findings)."""

    steps: list[Step] = field(default_factory=list)
    summary: str = ""

    @property
    def findings(self) -> list[AuditFinding]:
        return [f for s in self.steps if isinstance(s, Audited) for f in s.findings]

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict[str, Any]:
        """The JSON report (without the rendered lines, which cli/ adds)."""
        out: dict[str, Any] = {}
        for step in self.steps:
            out.update(step.as_data())
        out["summary"] = self.summary
        return out
