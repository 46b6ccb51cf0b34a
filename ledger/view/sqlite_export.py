"""``ledger export RUN... --format sqlite``: an analysis copy of runs as a SQLite database written
with sqlite-utils (docs/export-sqlite.md). The journal store stays on plain ``sqlite3``
(ledger/journal/store.py); this module is the only other one that touches SQLite, and only to
write this copy.

Tables: runs, agents, tasks, attempts, tests, signals, costs, verdicts, statistics, events (every
raw entry, with a full-text index over its text). Every row names the entry it came from
(``seq``, ``leaf_hash`` hex), so any number traces back to its inclusion proof. The figures are
the evaluators' (the golden view and the statistics view of each run), never recomputed here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from evaluators import stats_view, views
from evaluators.stats_view import infra_kind
from ledger.journal.codec import Entry

if TYPE_CHECKING:
    import sqlite_utils

def _sqlite_utils() -> ModuleType:
    """``sqlite_utils``, imported without pandas and numpy when neither is loaded yet.

    sqlite-utils imports both at its own import when they are installed, only to map their types
    (``pandas.Timestamp``, numpy's integers and floats) to column types; this export never passes
    such values, and importing pandas costs about 0.4 s CPU. Any later import of pandas or numpy
    in the process works as usual; sqlite-utils, once loaded this way, keeps no mapping for them.
    """
    loaded = sys.modules.get("sqlite_utils")
    if loaded is not None:
        return loaded
    blocked = [m for m in ("pandas", "numpy") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import sqlite_utils
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]
    return sqlite_utils


# kinds whose text goes into the full-text index (what the agent said and did)
TRANSCRIPT_KINDS = frozenset({"agent.output", "tool.call", "tool.result", "model.request",
                              "model.response"})
TEXT_LIMIT = 20_000  # characters of an entry's text indexed


def _text(e: Entry) -> str:
    d = e.data
    parts = [str(d[k]) for k in ("text", "output", "content", "command", "result", "message")
             if isinstance(d.get(k), str)]
    if not parts:
        parts = [json.dumps(d, sort_keys=True, default=str)]
    return "\n".join(parts)[:TEXT_LIMIT]


_NO_REF = (None, None)

# one encoder for every entry (``json.dumps`` with options builds a new one per call). The keys
# of a verified entry's maps are sorted already (the canonical form sorts them by their UTF-8
# bytes, which is the order of ``sorted`` on str), so sort_keys re-sorts nothing: it is kept so
# that the text never depends on that
_ENCODER = json.JSONEncoder(sort_keys=True, default=lambda b: b.hex() if isinstance(b, bytes)
                            else str(b))
_json = _ENCODER.encode
_CELL = frozenset({str, int, float, bool, bytes, type(None)})


def _cell(value: Any) -> Any:
    """A value from an entry's data as a cell: maps and lists as JSON text (as sqlite-utils'
    ``insert_all`` stores them), anything else as it is."""
    if type(value) in _CELL:
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


# every table's columns, in the order its rows are built (the ``id`` columns are the rowid)
COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id", "status", "harness_version", "score", "attempts", "passed",
             "infra_failures", "seq", "leaf_hash"),
    "agents": ("id", "run_id", "name", "spec", "kind", "version", "seq", "leaf_hash"),
    "tasks": ("id", "run_id", "task", "tier", "title", "hash", "cluster", "seq", "leaf_hash"),
    "attempts": ("attempt", "run_id", "task_id", "agent_id", "task", "agent", "repeat", "try",
                 "status", "passed", "score", "infra_kind", "wall_s", "cost_usd", "attestation",
                 "category", "seq", "leaf_hash"),
    "tests": ("attempt", "suite", "test_id", "outcome", "message", "seq", "leaf_hash"),
    "signals": ("attempt", "idx", "passed", "detail", "seq", "leaf_hash"),
    "costs": ("attempt", "cost_usd", "cost_source", "tokens_in", "tokens_out", "wall_s", "seq",
              "leaf_hash"),
    "verdicts": ("attempt", "kind", "verdict", "detail", "seq", "leaf_hash"),
    "statistics": ("run_id", "scope", "name", "attempts", "passed", "pass_rate", "pass_low",
                   "pass_high", "score_mean", "score_low", "score_high", "clustered_se",
                   "design_effect", "min_detectable_effect", "seq", "leaf_hash"),
    "events": ("seq", "run_id", "task", "kind", "ts", "attempt", "data", "text", "leaf_hash"),
}


def export_sqlite(runs: Sequence[str], read: Callable[[str], Sequence[Entry]], out: Path, *,
                  leaves: Callable[[str], bytes | None] | None = None) -> dict[str, Any]:
    """Write ``runs`` (their entries from ``read``, already verified by the caller) to ``out``
    (replaced if it exists; removed again if the export fails); returns the row counts per table.

    ``leaves(run)``: the tree's level 0 that the run's entries were verified against (32 bytes
    per seq, as ``ledger.journal.reading.RunReading.leaves``): each row's leaf hash is read from it rather
    than hashed again; None (or no ``leaves``): each entry is hashed.
    """
    if out.exists():
        out.unlink()
    counts = dict.fromkeys(COLUMNS, 0)
    # the reading, the fold and the rows hold about ten objects per entry: with the cyclic
    # collector running, its passes over them (during the inserts too) cost more than the rows
    # themselves (none of them forms a cycle; reference counting frees them)
    with views.cyclic_gc_paused():
        db = _sqlite_utils().Database(out)
        try:
            _write(db, runs, read, leaves, counts)
        except BaseException:
            db.conn.close()
            out.unlink(missing_ok=True)
            raise
        db.conn.close()
    return {"out": str(out), "runs": list(runs), "rows": counts}


def _write(db: sqlite_utils.Database, runs: Sequence[str], read: Callable[[str], Sequence[Entry]],
           leaves: Callable[[str], bytes | None] | None, counts: dict[str, int]) -> None:
    conn = db.conn
    conn.execute("PRAGMA journal_mode = OFF")  # the analysis copy only: rebuilt if cut short
    conn.execute("PRAGMA synchronous = OFF")
    # the index builds after the rows sort in memory (a sort spilled to temporary files cost
    # more wall time than every insert together on a busy disk)
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -262144")  # KiB: 256 MiB at most, for this copy only
    _create(db)
    # the FTS5 table (sqlite-utils' schema, external content: events) made while events is
    # empty, so that enable_fts' own populate indexes nothing and each transcript row is indexed
    # once, below (populating again after it doubled every row of the index)
    db["events"].enable_fts(["kind", "text"], create_triggers=False)
    sql = {name: f"INSERT INTO [{name}] ({', '.join(f'[{c}]' for c in cols)}) "
                 f"VALUES ({', '.join('?' for _ in cols)})" for name, cols in COLUMNS.items()}
    with conn:  # one transaction
        for run_id in runs:
            entries = read(run_id)
            level = leaves(run_id) if leaves is not None else None
            tables: dict[str, list[tuple[Any, ...]]] = {n: [] for n in COLUMNS if n != "events"}
            # the events rows go straight into SQLite as they are made; making them fills the
            # entry-level tables (tests, signals, costs, verdicts) on the way
            events = _entry_rows(run_id, entries, level, _summary(run_id, entries, tables), tables)
            cur = conn.executemany(sql["events"], events)
            counts["events"] += cur.rowcount
            del entries, events
            for name, rows in tables.items():
                if rows:
                    conn.executemany(sql[name], rows)
                    counts[name] += len(rows)
        # only the transcript entries have text: the others need no place in the index
        conn.execute("INSERT INTO [events_fts] (rowid, [kind], [text]) "
                     "SELECT rowid, [kind], [text] FROM [events] WHERE [text] != ''")
    _indexes(db)  # after the rows: one sort per index rather than an update per row


def _create(db: sqlite_utils.Database) -> None:
    ref = {"seq": int, "leaf_hash": str}
    db["runs"].create({"run_id": str, "status": str, "harness_version": str, "score": float,
                       "attempts": int, "passed": int, "infra_failures": int, **ref},
                      pk="run_id")
    db["agents"].create({"id": str, "run_id": str, "name": str, "spec": str, "kind": str,
                         "version": str, **ref}, pk="id", foreign_keys=[("run_id", "runs")])
    db["tasks"].create({"id": str, "run_id": str, "task": str, "tier": str, "title": str,
                        "hash": str, "cluster": str, **ref}, pk="id",
                       foreign_keys=[("run_id", "runs")])
    db["attempts"].create({"attempt": str, "run_id": str, "task_id": str, "agent_id": str,
                           "task": str, "agent": str, "repeat": int, "try": int, "status": str,
                           "passed": int, "score": float, "infra_kind": str, "wall_s": float,
                           "cost_usd": float, "attestation": str, "category": str, **ref},
                          pk="attempt", foreign_keys=[("run_id", "runs"), ("task_id", "tasks"),
                                                      ("agent_id", "agents")])
    db["tests"].create({"id": int, "attempt": str, "suite": str, "test_id": str,
                        "outcome": str, "message": str, **ref}, pk="id",
                       foreign_keys=[("attempt", "attempts")])
    db["signals"].create({"id": int, "attempt": str, "idx": int, "passed": int, "detail": str,
                          **ref}, pk="id", foreign_keys=[("attempt", "attempts")])
    db["costs"].create({"attempt": str, "cost_usd": float, "cost_source": str, "tokens_in": int,
                        "tokens_out": int, "wall_s": float, **ref}, pk="attempt",
                       foreign_keys=[("attempt", "attempts")])
    db["verdicts"].create({"id": int, "attempt": str, "kind": str, "verdict": str,
                           "detail": str, **ref}, pk="id",
                          foreign_keys=[("attempt", "attempts")])
    db["statistics"].create({"id": int, "run_id": str, "scope": str, "name": str,
                             "attempts": int, "passed": int, "pass_rate": float,
                             "pass_low": float, "pass_high": float, "score_mean": float,
                             "score_low": float, "score_high": float, "clustered_se": float,
                             "design_effect": float, "min_detectable_effect": float, **ref},
                            pk="id", foreign_keys=[("run_id", "runs")])
    db["events"].create({"seq": int, "run_id": str, "task": str, "kind": str, "ts": int,
                         "attempt": str, "data": str, "text": str, "leaf_hash": str}, pk="seq",
                        foreign_keys=[("run_id", "runs")])


def _indexes(db: sqlite_utils.Database) -> None:
    for table, cols in (("attempts", ["run_id"]), ("attempts", ["task"]), ("attempts", ["agent"]),
                        ("tests", ["attempt"]), ("signals", ["attempt"]),
                        ("verdicts", ["attempt"]), ("events", ["run_id", "kind"]),
                        ("events", ["attempt"]), ("statistics", ["run_id"])):
        db[table].create_index(cols)


class _Summary:
    """What the entry-level rows need from the run's fold: the scored attempts, and the rows of
    the attempts table, made once the entries are through (each names its attempt.finished)."""

    def __init__(self, scored: set[str], attempts: Callable[[dict[str, tuple[Any, Any]]], None]):
        self.scored = scored
        self.attempts = attempts


def _ref(e: Entry | None) -> tuple[Any, Any]:
    return _NO_REF if e is None else (e.seq, e.leaf_hash.hex())


def _summary(run_id: str, entries: Sequence[Entry],
             t: dict[str, list[tuple[Any, ...]]]) -> _Summary:
    """The run-level rows (runs, agents, tasks, statistics) from one fold of the run; the
    attempts rows are made by the returned summary once the entries' refs are known."""
    from evaluators import score as sc
    from evaluators.facts import facts_of
    from evaluators.fold import fold_all, new_state

    state = fold_all(entries, new_state(run_id))  # one fold for both views and the rows
    v = views.view(state)
    stats = stats_view.view(state)
    scored, _ = facts_of(state)
    started = next((e for e in entries if e.kind == "run.started"), None)
    first = started or (entries[0] if entries else None)
    stats_entry = next((e for e in reversed(entries) if e.kind == "view.recorded"
                        and e.data.get("evaluator") == "stats"), None)
    t["runs"].append((run_id, v["status"], v["harness_version"], v["score"],
                      v["counts"]["attempts"], v["counts"]["passed"], stats["infra"]["failures"],
                      *_ref(first)))
    if started is not None:
        ref = _ref(started)
        for ag in started.data.get("agents", []):
            t["agents"].append((f"{run_id}/{ag.get('name')}", run_id, *map(_cell, (
                ag.get("name"), ag.get("spec"), ag.get("kind"), ag.get("version"))), *ref))
        for tk in started.data.get("tasks", []):
            info = state.tasks.get(str(tk.get("id")))
            t["tasks"].append((f"{run_id}/{tk.get('id')}", run_id, *map(_cell, (
                tk.get("id"), tk.get("tier"), tk.get("title"), tk.get("hash"))),
                info.cluster if info else None, *ref))
    _statistics(run_id, stats, _ref(stats_entry), t["statistics"])
    by_attempt_row = {a["attempt"]: a for a in v["attempts"]}

    def attempts(finished: dict[str, tuple[Any, Any]]) -> None:
        for f in scored:
            mark = infra_kind(f, state.attempts.get(f.attempt))
            t["attempts"].append((
                f.attempt, run_id, f"{run_id}/{f.task}", f"{run_id}/{f.agent}", f.task, f.agent,
                f.repeat, f.try_no, f.status, int(f.passed), sc.golden(sc.components([f])),
                mark[0] if mark else None, f.wall_s, f.cost_usd, f.attestation,
                by_attempt_row.get(f.attempt, {}).get("category"),
                *finished.get(f.attempt, _NO_REF)))

    return _Summary({f.attempt for f in scored}, attempts)


def _statistics(run_id: str, stats: dict[str, Any], ref: tuple[Any, Any],
                rows: list[tuple[Any, ...]]) -> None:
    groups: Iterable[tuple[str, str, dict[str, Any]]] = [
        ("overall", "all", stats["overall"]),
        *(("agent", a, r) for a, r in stats["per_agent"].items()),
        *(("tier", k, r) for k, r in stats["per_tier"].items())]
    for scope, name, r in groups:
        pr, score, cl = r["pass_rate"], r["score"], r["clustered"]["pass_rate"]
        rows.append((run_id, scope, name, r["attempts"], r["passed"], pr["value"], pr["low"],
                     pr["high"], score["mean"], score["low"], score["high"], cl["stderr"],
                     cl["design_effect"], r["min_detectable_effect"], *ref))


def _entry_rows(run_id: str, entries: Sequence[Entry], level: bytes | None, summary: _Summary,
                t: dict[str, list[tuple[Any, ...]]]) -> Iterator[tuple[Any, ...]]:
    """The events row of every entry, in seq order; on the way, the rows of the entry-level
    tables of the scored attempts, and at the end those of the attempts table."""
    finished: dict[str, tuple[Any, Any]] = {}
    scored_ids = summary.scored
    tests, signals, costs, verdicts = t["tests"], t["signals"], t["costs"], t["verdicts"]
    transcript, cell, kept = TRANSCRIPT_KINDS, _cell, _CELL
    for e in entries:
        d = e.data
        kind = e.kind
        attempt = d.get("attempt")
        if type(attempt) is not str:
            attempt = None
        seq = e.seq
        # once per entry: every row of the entry names it
        leaf = (e.leaf_hash if level is None else level[32 * seq:32 * seq + 32]).hex()
        yield (seq, run_id, e.task, kind, e.ts, attempt,
               _json(d) if kind != "view.recorded" else "{}",
               _text(e) if kind in transcript else "", leaf)
        if attempt is None or attempt not in scored_ids:
            continue
        if kind == "attempt.finished":
            finished[attempt] = (seq, leaf)
        elif kind == "test.result" or kind == "test.baseline":
            suite = ("baseline:" if kind == "test.baseline" else "") + str(d.get("suite"))
            for test in d.get("tests") or []:
                tid, outcome, message = test.get("id"), test.get("outcome"), test.get("message")
                tests.append((attempt, suite, tid if type(tid) in kept else cell(tid),
                              outcome if type(outcome) in kept else cell(outcome),
                              message if type(message) in kept else cell(message), seq, leaf))
        elif kind == "signal.result":
            signals.append((attempt, cell(d.get("index")), int(bool(d.get("passed"))),
                            cell(d.get("detail")), seq, leaf))
        elif kind == "agent.finished":
            costs.append((attempt, *map(cell, (d.get("cost_usd"), d.get("cost_source"),
                          d.get("tokens_in"), d.get("tokens_out"), d.get("wall_s"))), seq, leaf))
        elif kind == "judge.verdict":
            verdicts.append((attempt, "judge", _json(d.get("scores")),
                             f"{d.get('judge')} {d.get('version')}", seq, leaf))
        elif kind == "attestation":
            att = d.get("attestation") if isinstance(d.get("attestation"), dict) else {}
            verdicts.append((attempt, "attestation", cell(att.get("verdict")),
                             cell(att.get("isolation")), seq, leaf))
    summary.attempts(finished)


__all__ = ["COLUMNS", "TRANSCRIPT_KINDS", "export_sqlite"]
