"""Write the HTML report of runs to a file (what ``ledger view -o FILE`` calls)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger.journal.journal import Journal
from ledger.view.html import page_size, render_comparison, render_html
from ledger.view.model import Read, as_stored, load_reports

Verification = Callable[[], tuple[bool, str]]
"""After the runs were read: whether they verified, and the line that says so (or what failed)."""


COMPARISON_PAGE = "compare.html"  # where ``--serve`` serves the comparison page


def comparison_path(output: Path) -> Path:
    """Where ``write_report`` puts the comparison page of the report at ``output``:
    ``report.html`` -> ``report.compare.html``, beside it."""
    return output.with_name(f"{output.stem}.compare{output.suffix or '.html'}")


def build_page(journal_path: Path, runs: Sequence[str], *, refresh_s: int | None = None,
               read: Read = as_stored, verification: Verification | None = None,
               compare_href: str | None = None) -> tuple[str, list[Any]]:
    """The page (and the report models) of ``runs`` read from the journal at ``journal_path``
    through ``read`` (verified by cli/reading.py, or as stored); ``compare_href``: the link to
    the comparison page."""
    with Journal.open(journal_path, readonly=True) as journal:
        reports = load_reports(journal, runs, read=read)
    return render_html(reports, refresh_s=refresh_s, compare_href=compare_href,
                       verification=verification() if verification else None), reports


def build_comparison(journal_path: Path, runs: Sequence[str], *, index_href: str,
                     refresh_s: int | None = None, read: Read = as_stored,
                     verification: Verification | None = None) -> tuple[str, list[Any]]:
    """The comparison page of ``runs`` (who passed what, task by task), linking back to the
    report at ``index_href``."""
    with Journal.open(journal_path, readonly=True) as journal:
        reports = load_reports(journal, runs, read=read)
    return render_comparison(reports, index_href=index_href, refresh_s=refresh_s,
                             verification=verification() if verification else None), reports


def _write_atomic(path: Path, data: bytes) -> None:
    """Through a temporary file renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # no stray file when the write or the rename fails


def write_report(journal_path: Path, runs: Sequence[str], output: Path, *, read: Read = as_stored,
                 verification: Verification | None = None) -> dict[str, Any]:
    """Write the page and, beside it, its comparison page (``comparison_path``), each
    atomically; what was written."""
    other = comparison_path(output)
    page, reports = build_page(journal_path, runs, read=read, verification=verification,
                               compare_href=other.name)
    check = verification() if verification else None
    comparison = render_comparison(reports, index_href=output.name, verification=check)
    _write_atomic(output, page.encode("utf-8"))
    _write_atomic(other, comparison.encode("utf-8"))
    return {"path": str(output), "size_bytes": page_size(page), "comparison": str(other),
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
