"""The comparison ``ledger run`` prints at its end: the run against the latest earlier run of the
same task set, both read through verified reading (``reader``: the run's entries, checked against
the tree and the signed checkpoint first, ``ledger.journal.reading``), so a tampered earlier run
is refused rather than compared."""

from __future__ import annotations

from typing import Any, Protocol

from evaluators.compare import compare
from evaluators.views import compute_views
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal


class RunReader(Protocol):
    """What reads a run's entries verified (``cli.reading.Reader``)."""

    def entries(self, journal: Journal, run_id: str) -> list[Entry]: ...


def _task_set(j: Journal, run_id: str) -> list[str]:
    started = next(j.entries(run=run_id, kind="run.started"), None)
    tasks = started.data.get("tasks", []) if started is not None else []
    return sorted(str(t.get("id")) for t in tasks if isinstance(t, dict))


def compare_with_previous(j: Journal, run_id: str, reader: RunReader) -> dict[str, Any] | None:
    """Compare a run with the latest earlier run of the same task set (None when there is none);
    raises ``VerificationError`` when either does not verify."""
    runs = j.runs()
    ids = [r.run_id for r in runs]
    if run_id not in ids:
        return None
    want = _task_set(j, run_id)
    for r in runs[ids.index(run_id) + 1:]:
        if r.config.get("kind") == "bench" or _task_set(j, r.run_id) != want:
            continue
        va = compute_views(reader.entries(j, r.run_id), r.run_id)
        vb = compute_views(reader.entries(j, run_id), run_id)
        return compare(va, vb)
    return None
