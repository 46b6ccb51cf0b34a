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
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlite_utils

from evaluators import stats_view, views
from evaluators.stats_view import infra_kind
from ledger.journal.codec import Entry

# kinds whose text goes into the full-text index (what the agent said and did)
TRANSCRIPT_KINDS = frozenset({"agent.output", "tool.call", "tool.result", "model.request",
                              "model.response"})
TEXT_LIMIT = 20_000  # characters of an entry's text indexed
_BULK = frozenset({"events", "tests"})


def _text(e: Entry) -> str:
    d = e.data
    parts = [str(d[k]) for k in ("text", "output", "content", "command", "result", "message")
             if isinstance(d.get(k), str)]
    if not parts:
        parts = [json.dumps(d, sort_keys=True, default=str)]
    return "\n".join(parts)[:TEXT_LIMIT]


def _ref(e: Entry) -> dict[str, Any]:
    return {"seq": e.seq, "leaf_hash": e.leaf_hash.hex()}


# one encoder for every entry (``json.dumps`` with options builds a new one per call)
_ENCODER = json.JSONEncoder(sort_keys=True, default=lambda b: b.hex() if isinstance(b, bytes)
                            else str(b))


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def export_sqlite(runs: Sequence[str], read: Callable[[str], Sequence[Entry]],
                  out: Path) -> dict[str, Any]:
    """Write ``runs`` (their entries from ``read``, already verified by the caller) to ``out``
    (replaced if it exists); returns the row counts per table."""
    if out.exists():
        out.unlink()
    db = sqlite_utils.Database(out)
    db.conn.execute("PRAGMA journal_mode = OFF")
    db.conn.execute("PRAGMA synchronous = OFF")
    # the index builds after the rows sort in memory (a sort spilled to temporary files cost
    # more wall time than every insert together on a busy disk)
    db.conn.execute("PRAGMA temp_store = MEMORY")
    db.conn.execute("PRAGMA cache_size = -262144")  # KiB: 256 MiB at most, for this copy only
    counts: dict[str, int] = {}
    tables: dict[str, list[dict[str, Any]]] = {n: [] for n in (
        "runs", "agents", "tasks", "attempts", "tests", "signals", "costs", "verdicts",
        "statistics", "events")}
    # the reading and the rows hold about ten objects per entry: building them with the cyclic
    # collector running cost more than the rows themselves (none of them forms a cycle)
    with views.cyclic_gc_paused():
        for run_id in runs:
            entries = list(read(run_id))
            _rows(run_id, entries, tables)
            del entries
    _create(db)
    # the FTS5 table (sqlite-utils' schema, external content: events) made while events is
    # empty, so that enable_fts' own populate indexes nothing and each transcript row is indexed
    # once, below (populating again after it doubled every row of the index)
    db["events"].enable_fts(["kind", "text"], create_triggers=False)
    with db.conn:
        for name, rows in tables.items():
            if rows and name in _BULK:
                # the big tables: one executemany over sqlite-utils' connection (its insert_all
                # inspects every value; these rows are plain str/int/None already)
                cols = list(rows[0])
                db.conn.executemany(
                    f"INSERT INTO [{name}] ({', '.join(f'[{c}]' for c in cols)}) "
                    f"VALUES ({', '.join('?' for _ in cols)})",
                    list(map(itemgetter(*cols), rows)))
            elif rows:
                db[name].insert_all(rows, batch_size=5000)
            counts[name] = len(rows)
        # only the transcript entries have text: the others need no place in the index
        db.conn.execute("INSERT INTO [events_fts] (rowid, [kind], [text]) "
                        "SELECT rowid, [kind], [text] FROM [events] WHERE [text] != ''")
    _indexes(db)  # after the rows: one sort per index rather than an update per row
    db.conn.close()
    return {"out": str(out), "runs": list(runs), "rows": counts}


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


def _rows(run_id: str, entries: Sequence[Entry], t: dict[str, list[dict[str, Any]]]) -> None:
    from evaluators import score as sc
    from evaluators.facts import facts_of
    from evaluators.fold import fold_all, new_state

    state = fold_all(entries, new_state(run_id))  # one fold for both views and the rows
    v = views.view(state)
    stats = stats_view.view(state)
    scored, _ = facts_of(state)
    by_attempt_row = {a["attempt"]: a for a in v["attempts"]}
    started = next((e for e in entries if e.kind == "run.started"), None)
    first = started or (entries[0] if entries else None)
    stats_entry = next((e for e in reversed(entries) if e.kind == "view.recorded"
                        and e.data.get("evaluator") == "stats"), None)
    infra = {f.attempt: infra_kind(f, state.attempts.get(f.attempt)) for f in scored}
    t["runs"].append({"run_id": run_id, "status": v["status"],
                      "harness_version": v["harness_version"], "score": v["score"],
                      "attempts": v["counts"]["attempts"], "passed": v["counts"]["passed"],
                      "infra_failures": stats["infra"]["failures"],
                      **(_ref(first) if first else {"seq": None, "leaf_hash": None})})
    if started is not None:
        for ag in started.data.get("agents", []):
            t["agents"].append({"id": f"{run_id}/{ag.get('name')}", "run_id": run_id,
                                "name": ag.get("name"), "spec": ag.get("spec"),
                                "kind": ag.get("kind"), "version": ag.get("version"),
                                **_ref(started)})
        for tk in started.data.get("tasks", []):
            info = state.tasks.get(str(tk.get("id")))
            t["tasks"].append({"id": f"{run_id}/{tk.get('id')}", "run_id": run_id,
                               "task": tk.get("id"), "tier": tk.get("tier"),
                               "title": tk.get("title"), "hash": tk.get("hash"),
                               "cluster": info.cluster if info else None, **_ref(started)})
    finished: dict[str, Entry] = {}
    scored_ids = {f.attempt for f in scored}
    events, tests = t["events"], t["tests"]
    for e in entries:
        d = e.data
        attempt = d.get("attempt") if isinstance(d.get("attempt"), str) else None
        leaf = e.leaf_hash.hex()  # once per entry: every row of the entry names it
        events.append({"seq": e.seq, "run_id": run_id, "task": e.task, "kind": e.kind,
                       "ts": e.ts, "attempt": attempt,
                       "data": _json(d) if e.kind not in ("view.recorded",) else "{}",
                       "text": _text(e) if e.kind in TRANSCRIPT_KINDS else "", "leaf_hash": leaf})
        if attempt is None or attempt not in scored_ids:
            continue
        ref = {"seq": e.seq, "leaf_hash": leaf}
        if e.kind == "attempt.finished":
            finished[attempt] = e
        elif e.kind in ("test.result", "test.baseline"):
            suite = ("baseline:" if e.kind == "test.baseline" else "") + str(d.get("suite"))
            for test in d.get("tests") or []:
                tests.append({"attempt": attempt, "suite": suite, "test_id": test.get("id"),
                              "outcome": test.get("outcome"), "message": test.get("message"),
                              **ref})
        elif e.kind == "signal.result":
            t["signals"].append({"attempt": attempt, "idx": d.get("index"),
                                 "passed": int(bool(d.get("passed"))), "detail": d.get("detail"),
                                 **ref})
        elif e.kind == "agent.finished":
            t["costs"].append({"attempt": attempt, "cost_usd": d.get("cost_usd"),
                               "cost_source": d.get("cost_source"),
                               "tokens_in": d.get("tokens_in"), "tokens_out": d.get("tokens_out"),
                               "wall_s": d.get("wall_s"), **ref})
        elif e.kind == "judge.verdict":
            t["verdicts"].append({"attempt": attempt, "kind": "judge",
                                  "verdict": _json(d.get("scores")),
                                  "detail": f"{d.get('judge')} {d.get('version')}", **ref})
        elif e.kind == "attestation":
            att = d.get("attestation") if isinstance(d.get("attestation"), dict) else {}
            t["verdicts"].append({"attempt": attempt, "kind": "attestation",
                                  "verdict": att.get("verdict"),
                                  "detail": att.get("isolation"), **ref})
    for f in scored:
        row = by_attempt_row.get(f.attempt, {})
        src = finished.get(f.attempt)
        mark = infra[f.attempt]
        t["attempts"].append({
            "attempt": f.attempt, "run_id": run_id, "task_id": f"{run_id}/{f.task}",
            "agent_id": f"{run_id}/{f.agent}", "task": f.task, "agent": f.agent,
            "repeat": f.repeat, "try": f.try_no, "status": f.status, "passed": int(f.passed),
            "score": sc.golden(sc.components([f])), "infra_kind": mark[0] if mark else None,
            "wall_s": f.wall_s, "cost_usd": f.cost_usd, "attestation": f.attestation,
            "category": row.get("category"),
            **(_ref(src) if src else {"seq": None, "leaf_hash": None})})
    ref = _ref(stats_entry) if stats_entry else {"seq": None, "leaf_hash": None}
    groups: Iterable[tuple[str, str, dict[str, Any]]] = [
        ("overall", "all", stats["overall"]),
        *(("agent", a, r) for a, r in stats["per_agent"].items()),
        *(("tier", k, r) for k, r in stats["per_tier"].items())]
    for scope, name, r in groups:
        pr, score = r["pass_rate"], r["score"]
        t["statistics"].append({
            "run_id": run_id, "scope": scope, "name": name, "attempts": r["attempts"],
            "passed": r["passed"], "pass_rate": pr["value"], "pass_low": pr["low"],
            "pass_high": pr["high"], "score_mean": score["mean"], "score_low": score["low"],
            "score_high": score["high"], "clustered_se": r["clustered"]["pass_rate"]["stderr"],
            "design_effect": r["clustered"]["pass_rate"]["design_effect"],
            "min_detectable_effect": r["min_detectable_effect"], **ref})


__all__ = ["TRANSCRIPT_KINDS", "export_sqlite"]
