"""Write the HTML report of runs to a file (what ``ledger view -o FILE`` calls)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger.journal.journal import Journal
from ledger.view.html import page_size, render_html
from ledger.view.model import Read, as_stored, load_reports

Verification = Callable[[], tuple[bool, str]]
"""After the runs were read: whether they verified, and the line that says so (or what failed)."""


def build_page(journal_path: Path, runs: Sequence[str], *, refresh_s: int | None = None,
               read: Read = as_stored, verification: Verification | None = None
               ) -> tuple[str, list[Any]]:
    """The page (and the report models) of ``runs`` read from the journal at ``journal_path``
    through ``read`` (verified by cli/reading.py, or as stored)."""
    with Journal.open(journal_path, readonly=True) as journal:
        reports = load_reports(journal, runs, read=read)
    return render_html(reports, refresh_s=refresh_s,
                       verification=verification() if verification else None), reports


def write_report(journal_path: Path, runs: Sequence[str], output: Path, *, read: Read = as_stored,
                 verification: Verification | None = None) -> dict[str, Any]:
    """Write the page atomically (a temporary file renamed into place); what was written."""
    page, reports = build_page(journal_path, runs, read=read, verification=verification)
    data = page.encode("utf-8")
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(output)
    finally:
        tmp.unlink(missing_ok=True)  # no stray file when the write or the rename fails
    return {"path": str(output), "size_bytes": page_size(page),
            "runs": [r.run_id for r in reports],
            "attempts": sum(len(r.views["attempts"]) for r in reports),
            "content_digests": {r.run_id: r.content_digest for r in reports}}


def write_inspect(journal_path: Path, run: str | None, output: Path, *,
                  read: Read = as_stored) -> dict[str, Any]:
    """Write RUN as an Inspect AI ``.eval`` log (see ledger/view/inspect_export.py)."""
    from ledger.view.inspect_export import write_eval
    from ledger.view.model import load_report

    with Journal.open(journal_path, readonly=True) as journal:
        report = load_report(journal, run, read=read)

        def proof(seq: int, size: int) -> dict[str, Any] | None:
            if size > journal.size:
                return None
            p = journal.inclusion_proof(seq, size)
            return {"leaf_index": p.leaf_index, "tree_size": p.tree_size,
                    "leaf_hash": p.leaf_hash.hex(), "root": p.root.hex(),
                    "hashes": [h.hex() for h in p.hashes]}

        return write_eval(report, output, proof)


def _proof_of(journal: Journal) -> Callable[[int, int], dict[str, Any] | None]:
    def proof(seq: int, size: int) -> dict[str, Any] | None:
        if size > journal.size:
            return None
        p = journal.inclusion_proof(seq, size)
        return {"leaf_index": p.leaf_index, "tree_size": p.tree_size,
                "leaf_hash": p.leaf_hash.hex(), "root": p.root.hex(),
                "hashes": [h.hex() for h in p.hashes]}
    return proof


def write_atif(journal_path: Path, run: str | None, output: Path, *,
               read: Read = as_stored) -> dict[str, Any]:
    """Write RUN's attempts as ATIF trajectories under the folder ``output``
    (see ledger/view/atif_export.py)."""
    from ledger.view.atif_export import write_trajectories
    from ledger.view.model import load_report

    with Journal.open(journal_path, readonly=True) as journal:
        report = load_report(journal, run, read=read)
        return write_trajectories(report, output, _proof_of(journal))
