"""Read one run (or several) from the journal into :class:`evaluators.explore.RunReport`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from evaluators.compare import BOOTSTRAP_SEED
from evaluators.explore import RunReport, explore, fold_report
from evaluators.stats_view import stats_of
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal


def covering_checkpoint(journal: Journal, last_seq: int | None) -> dict[str, Any] | None:
    """The first signed checkpoint that covers every entry of a run (None when none does yet)."""
    if last_seq is None:
        return None
    for size, note in journal.store.checkpoints():
        if size > last_seq:
            lines = note.splitlines()
            return {"size": size, "root": lines[2] if len(lines) > 2 else None,
                    "origin": lines[0] if lines else None, "note": note}
    return None


def _bench_view(entries: Sequence[Any]) -> dict[str, Any] | None:
    if not any(e.kind.startswith("bench.") for e in entries):
        return None
    from evaluators.leaderboard import leaderboard_from_entries

    return leaderboard_from_entries(entries)


Read = Callable[[Journal, str], list[Entry]]
"""How a run's entries are read: verified first (cli/reading.py), or as stored (the default)."""


def as_stored(journal: Journal, run_id: str) -> list[Entry]:
    return list(journal.entries(run=run_id))


def load_report(journal: Journal, run_prefix: str | None, *, seed: int = BOOTSTRAP_SEED,
                read: Read = as_stored) -> RunReport:
    """The report model of one run (RUN defaults to the latest; a unique prefix is accepted)."""
    run_id = journal.resolve_run(run_prefix)
    entries = read(journal, run_id)
    folded = fold_report(entries, run_id)
    last_seq = entries[-1].seq if entries else None
    report = explore(entries, run_id, views=folded.views,
                     checkpoint=covering_checkpoint(journal, last_seq),
                     bench=_bench_view(entries), seed=seed, folded=folded)
    # the comparison page's figures: the statistics view, infra failures excluded (a bench run
    # has no scored attempts, so no statistics)
    stats = stats_of(entries, run_id) if folded.views["counts"]["attempts"] else None
    return dataclasses.replace(report, stats=stats)


def load_reports(journal: Journal, run_prefixes: Sequence[str], *, seed: int = BOOTSTRAP_SEED,
                 read: Read = as_stored) -> list[RunReport]:
    """One report per named run, in the order given (the latest run when none is named)."""
    prefixes: Sequence[str | None] = list(run_prefixes) or [None]
    return [load_report(journal, p, seed=seed, read=read) for p in prefixes]
