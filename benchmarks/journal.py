"""Journal speed benchmark: eval-ledger's journal against bare SQLite and `eventsourcing`.

    python benchmarks/journal.py            # human summary (a few minutes)
    python benchmarks/journal.py --json     # the figures as one JSON object
    python benchmarks/journal.py --quick    # small sizes, a smoke run of a few seconds

Every workload and its baseline run in the same process, on the same disk, with the same SQLite
settings (WAL, the same ``synchronous`` level), on entries with 200-byte printable payloads. What
is measured, and the target each figure is held to (issue 2, "Speed"):

- ``append_batched``  1000 entries per transaction; ratio = journal rate / raw rate (>= 0.5),
  where "raw" msgpack-encodes the same entries and ``executemany``s the bytes into a two-column
  table, one transaction per 1000 rows. ``mixed_kinds_ratio`` (no target) is the journal on
  entries whose kind changes every entry: the span index's worst case.
- ``append_single``   one entry per transaction, against raw one row per transaction (>= 0.6).
- ``eventsourcing``   the same two workloads on ``eventsourcing``'s SQLite application recorder
  (StoredEvent rows whose state is the same msgpack bytes); the journal should beat it in both.
- ``verify``          full ``Journal.verify()`` over N entries in entries/s (>= 300k), next to a
  bare ``sha256(b"\\x00" + body)`` loop over the same bytes held in memory.
- ``proofs``          inclusion and consistency proof latency in a tree of 1,000,000 entries:
  median and p95 over 200 random proofs (median < 1 ms).
- ``disk``            (database bytes after ``wal_checkpoint(TRUNCATE)`` - entry bytes) / n
  (<= 200 bytes per entry).

Rates are the median over ``--rounds`` rounds; each round uses fresh databases, and within a
round the systems write in interleaved chunks (10 transactions batched, 100 single appends) in a
shuffled order, so a warm cache or a slow stretch of the disk does not favour one of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import sqlite3
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import msgpack

from ledger.journal import merkle
from ledger.journal.journal import Journal

RUN_ID = "r-20261129T203000Z-1a2b3c"
TASK_ID = "smoke-fizzbuzz"
KIND = "agent.output"
PAYLOAD_BYTES = 200
BATCH = 1000
BUILD_BATCH = 10_000
SEED = 20261129

TARGETS = {
    "append_batched_ratio": 0.5,
    "append_single_ratio": 0.6,
    "eventsourcing_ratio": 1.0,
    "verify_entries_per_s": 300_000,
    "proof_median_ms": 1.0,
    "disk_overhead_bytes_per_entry": 200,
}


@dataclass(frozen=True)
class Sizes:
    batched: int
    single: int
    verify_n: int
    proof_n: int
    proof_samples: int
    rounds: int
    audit_attempts: int = 1000


FULL = Sizes(batched=100_000, single=2_000, verify_n=200_000, proof_n=1_000_000,
             proof_samples=200, rounds=5)
QUICK = Sizes(batched=5_000, single=200, verify_n=5_000, proof_n=20_000, proof_samples=50,
              rounds=1, audit_attempts=50)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def payloads(count: int = 1024) -> list[dict[str, Any]]:
    """Entry data maps, each holding one printable 200-byte string (cycled by the workloads)."""
    rng = random.Random(SEED)
    alphabet = string.ascii_letters + string.digits + string.punctuation + " "
    return [{"text": "".join(rng.choices(alphabet, k=PAYLOAD_BYTES))} for _ in range(count)]


def raw_entry(seq: int, ts: int, data: dict[str, Any]) -> bytes:
    """What the baselines store: the same entry map, msgpack-encoded without canonical checks."""
    raw: bytes = msgpack.packb({"v": 1, "seq": seq, "ts": ts, "run": RUN_ID, "task": TASK_ID,
                                "kind": KIND, "data": data}, use_bin_type=True)
    return raw


def file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


def disk_overhead(db: Path, body_sql: str) -> dict[str, Any]:
    """Bytes per entry beyond the entry bytes, after folding the WAL into the database file."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        n, body = conn.execute(body_sql).fetchone()
        by_object: dict[str, float] = {}
        try:
            for name, size in conn.execute(
                    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"):
                by_object[name] = round(size / max(n, 1), 1)
        except sqlite3.OperationalError:
            by_object = {}
    finally:
        conn.close()
    size = db.stat().st_size
    return {"entries": n, "db_bytes": size, "entry_bytes": body,
            "overhead_per_entry": round((size - body) / max(n, 1), 1),
            "bytes_per_entry_by_object": by_object}


# --------------------------------------------------------------------------- append workloads

Writer = Callable[[int, int, int], None]
"""``write(start, stop, per_tx)``: append entries start..stop-1, per_tx to a transaction."""


class Workload:
    """One system under test: ``open`` makes a fresh database and returns a writer and a closer."""

    name = ""

    def open(self, db: Path, data: Sequence[dict[str, Any]],
             synchronous: str) -> tuple[Writer, Callable[[], None]]:
        raise NotImplementedError


class JournalWorkload(Workload):
    name = "journal"

    def open(self, db: Path, data: Sequence[dict[str, Any]],
             synchronous: str) -> tuple[Writer, Callable[[], None]]:
        j = Journal.open(db, create=True, synchronous=synchronous, harness=True)
        m = len(data)

        def write(start: int, stop: int, per_tx: int) -> None:
            if per_tx == 1:
                for i in range(start, stop):
                    j.append(KIND, data[i % m], run=RUN_ID, task=TASK_ID)
            else:
                for first in range(start, stop, per_tx):
                    j.append_many([(KIND, data[i % m], RUN_ID, TASK_ID)
                                   for i in range(first, min(first + per_tx, stop))])

        return write, j.close


MIXED_KINDS = ("agent.output", "agent.tool", "trace.exec", "agent.output")
MIXED_TASKS = ("smoke-fizzbuzz", "smoke-wordcount")


class MixedJournalWorkload(Workload):
    """The journal on entries whose kind changes with every entry (and task every 4 entries).

    The span index then needs one row per entry, its worst case; the homogeneous workload above
    needs one per transaction. Reported next to the raw baseline, without a target.
    """

    name = "journal_mixed"

    def open(self, db: Path, data: Sequence[dict[str, Any]],
             synchronous: str) -> tuple[Writer, Callable[[], None]]:
        j = Journal.open(db, create=True, synchronous=synchronous, harness=True)
        m = len(data)

        def write(start: int, stop: int, per_tx: int) -> None:
            for first in range(start, stop, per_tx):
                j.append_many([(MIXED_KINDS[i % 4], data[i % m], RUN_ID, MIXED_TASKS[(i >> 2) % 2])
                               for i in range(first, min(first + per_tx, stop))])

        return write, j.close


class RawWorkload(Workload):
    name = "raw"

    def open(self, db: Path, data: Sequence[dict[str, Any]],
             synchronous: str) -> tuple[Writer, Callable[[], None]]:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE raw(seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        m = len(data)

        def write(start: int, stop: int, per_tx: int) -> None:
            for first in range(start, stop, per_tx):
                ts = time.time_ns()
                rows = [(i, raw_entry(i, ts, data[i % m])) for i in range(first, min(first + per_tx, stop))]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO raw(seq, body) VALUES (?, ?)", rows)
                conn.execute("COMMIT")

        return write, conn.close


class EventsourcingWorkload(Workload):
    """``eventsourcing``'s SQLiteApplicationRecorder (globally ordered, like the journal)."""

    name = "eventsourcing"

    def __init__(self) -> None:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.stored_event = StoredEvent
        self.recorder_class = SQLiteApplicationRecorder
        self.datastore_class = SQLiteDatastore
        self.version = metadata.version("eventsourcing")
        self.synchronous_seen: int | None = None

    def open(self, db: Path, data: Sequence[dict[str, Any]],
             synchronous: str) -> tuple[Writer, Callable[[], None]]:
        import uuid

        datastore = self.datastore_class(str(db))
        # The library leaves `synchronous` at SQLite's default; give its connections our level.
        pool = datastore.pool
        create = pool._create_connection

        def create_with_level() -> Any:
            conn = create()
            conn._sqlite_conn.execute(f"PRAGMA synchronous = {synchronous}")
            return conn

        pool._create_connection = create_with_level  # type: ignore[method-assign]
        recorder = self.recorder_class(datastore)
        recorder.create_table()
        with datastore.transaction(commit=False) as c:
            c.execute("PRAGMA synchronous")
            self.synchronous_seen = int(c.fetchone()[0])
        oid = uuid.UUID(int=random.Random(SEED).getrandbits(128), version=4)
        event = self.stored_event
        m = len(data)

        def write(start: int, stop: int, per_tx: int) -> None:
            for first in range(start, stop, per_tx):
                ts = time.time_ns()
                recorder.insert_events([
                    event(originator_id=oid, originator_version=i, topic=KIND,
                          state=raw_entry(i, ts, data[i % m]))
                    for i in range(first, min(first + per_tx, stop))])

        return write, datastore.close


def load_eventsourcing() -> tuple[EventsourcingWorkload | None, str | None]:
    try:
        return EventsourcingWorkload(), None
    except Exception as exc:  # ImportError, or an API this script does not know
        return None, f"eventsourcing unavailable: {type(exc).__name__}: {exc}"


def run_appends(workloads: list[Workload], n: int, per_tx: int, rounds: int, tmp: Path,
                data: Sequence[dict[str, Any]], synchronous: str, label: str, chunk: int,
                keep_last: bool = False) -> tuple[dict[str, list[float]], dict[str, Path]]:
    """Entries per second of each workload, one figure per round.

    In a round every workload writes n entries into a fresh database, interleaved: chunks of
    ``chunk`` entries, the order of the workloads shuffled for every chunk. A slow stretch of the
    disk (fsync latency drifts) then falls on all of them alike instead of on whichever ran then.
    """
    rates: dict[str, list[float]] = {w.name: [] for w in workloads}
    kept: dict[str, Path] = {}
    rng = random.Random(SEED)
    for r in range(rounds):
        opened = []
        for w in workloads:
            db = tmp / f"{label}-{w.name}-{r}" / "journal.db"
            db.parent.mkdir()
            write, close = w.open(db, data, synchronous)
            opened.append((w, db, write, close))
        spent = {w.name: 0.0 for w in workloads}
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            for w, _db, write, _close in rng.sample(opened, len(opened)):
                t0 = time.perf_counter()
                write(start, stop, per_tx)
                spent[w.name] += time.perf_counter() - t0
        for w, db, _write, close in opened:
            close()
            rates[w.name].append(n / spent[w.name])
            log(f"{label} round {r + 1}/{rounds} {w.name}: {n / spent[w.name]:,.0f} entries/s")
            if keep_last and r == rounds - 1:
                kept[w.name] = db
            else:
                _remove_db(db)
    return rates, kept


def _remove_db(db: Path) -> None:
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)


def append_figures(rates: dict[str, list[float]], target: float, n: int, per_tx: int) -> dict[str, Any]:
    journal = statistics.median(rates["journal"])
    raw = statistics.median(rates["raw"])
    ratio = journal / raw
    out = {"entries": n, "per_transaction": per_tx, "rounds": len(rates["journal"]),
           "journal_rate": round(journal), "raw_rate": round(raw), "ratio": round(ratio, 3),
           "journal_rates": [round(x) for x in rates["journal"]],
           "raw_rates": [round(x) for x in rates["raw"]],
           "target_ratio": target, "ok": ratio >= target}
    if rates.get("journal_mixed"):
        mixed = statistics.median(rates["journal_mixed"])
        out.update(mixed_kinds_rate=round(mixed), mixed_kinds_ratio=round(mixed / raw, 3))
    return out


# --------------------------------------------------------------------------- build, verify, proofs

def build_journal(db: Path, n: int, batch: int, data: Sequence[dict[str, Any]], label: str) -> float:
    """Fill a journal with n entries (synchronous=NORMAL, to save time); return seconds taken."""
    start = time.perf_counter()
    m = len(data)
    step = max(n // 10, batch)
    with Journal.open(db, create=True, synchronous="NORMAL", harness=True) as j:
        for s in range(0, n, batch):
            j.append_many([(KIND, data[i % m], RUN_ID, TASK_ID) for i in range(s, min(s + batch, n))])
            done = min(s + batch, n)
            if done % step < batch or done == n:
                log(f"building {label}: {done:,}/{n:,} entries")
    return time.perf_counter() - start


def verify_figures(db: Path, n: int, rounds: int) -> dict[str, Any]:
    times = []
    for r in range(rounds):
        with Journal.open(db, readonly=True) as j:
            start = time.perf_counter()
            summary = j.verify()
            times.append(time.perf_counter() - start)
        if summary["entries"] != n:
            raise RuntimeError(f"verify saw {summary['entries']} entries, expected {n}")
        log(f"verify round {r + 1}/{rounds}: {n / times[-1]:,.0f} entries/s")
    conn = sqlite3.connect(db)
    try:
        start = time.perf_counter()
        bodies = [bytes(b) for (b,) in conn.execute("SELECT body FROM entries ORDER BY seq")]
        read_s = time.perf_counter() - start
    finally:
        conn.close()
    sha256 = hashlib.sha256
    hash_times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for b in bodies:
            sha256(b"\x00" + b).digest()
        hash_times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    hash_s = statistics.median(hash_times)
    rate = n / seconds
    return {"entries": n, "rounds": rounds, "seconds": round(seconds, 3),
            "rate": round(rate), "raw_sha256_rate": round(n / hash_s),
            "raw_read_and_sha256_rate": round(n / (hash_s + read_s)),
            "ratio_to_raw_sha256": round(rate / (n / hash_s), 3),
            "target_rate": TARGETS["verify_entries_per_s"],
            "ok": rate >= TARGETS["verify_entries_per_s"]}


def _quantiles(samples_ns: list[int]) -> dict[str, float]:
    ms = sorted(s / 1e6 for s in samples_ns)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return {"median": round(statistics.median(ms), 4), "p95": round(p95, 4),
            "max": round(ms[-1], 4)}


def proof_figures(db: Path, n: int, samples: int, build_s: float) -> dict[str, Any]:
    rng = random.Random(SEED)
    incl: list[int] = []
    cons: list[int] = []
    clock = time.perf_counter_ns
    with Journal.open(db, readonly=True) as j:
        size, root = j.head()
        if size != n:
            raise RuntimeError(f"proof journal holds {size} entries, expected {n}")
        for _ in range(5):  # warm the statement cache; not counted
            j.inclusion_proof(rng.randrange(n), n)
            j.consistency_proof(rng.randrange(1, n), n)
        for _ in range(samples):
            seq = rng.randrange(n)
            t0 = clock()
            p = j.inclusion_proof(seq, n)
            incl.append(clock() - t0)
            merkle.verify_inclusion(seq, n, p.leaf_hash, p.hashes, root)
        for _ in range(samples):
            old = rng.randrange(1, n)
            t0 = clock()
            c = j.consistency_proof(old, n)
            cons.append(clock() - t0)
            merkle.verify_consistency(old, n, c.old_root, root, c.hashes)
    inclusion, consistency = _quantiles(incl), _quantiles(cons)
    target = TARGETS["proof_median_ms"]
    return {"tree_size": n, "samples": samples, "build_seconds": round(build_s, 1),
            "build_batch": BUILD_BATCH, "inclusion_ms": inclusion, "consistency_ms": consistency,
            "target_median_ms": target,
            "ok": inclusion["median"] < target and consistency["median"] < target}


# --------------------------------------------------------------------------- the run

def benchmark(sizes: Sizes, synchronous: str, tmp: Path, *, quick: bool) -> dict[str, Any]:
    load_start = os.getloadavg()
    data = payloads()
    es, es_reason = load_eventsourcing()
    workloads: list[Workload] = [JournalWorkload(), RawWorkload()]
    if es is not None:
        workloads.append(es)

    batched, kept_batched = run_appends([*workloads, MixedJournalWorkload()], sizes.batched, BATCH,
                                        sizes.rounds, tmp, data, synchronous, "batched",
                                        chunk=10 * BATCH, keep_last=True)
    single, kept_single = run_appends(workloads, sizes.single, 1, sizes.rounds, tmp, data,
                                      synchronous, "single", chunk=100, keep_last=True)
    batched_disk = disk_overhead(kept_batched["journal"],
                              "SELECT count(*), sum(length(body)) FROM entries")
    raw_disk = disk_overhead(kept_batched["raw"], "SELECT count(*), sum(length(body)) FROM raw")
    single_disk = disk_overhead(kept_single["journal"],
                                "SELECT count(*), sum(length(body)) FROM entries")
    mixed_disk = disk_overhead(kept_batched["journal_mixed"],
                               "SELECT count(*), sum(length(body)) FROM entries")
    for db in (*kept_batched.values(), *kept_single.values()):
        _remove_db(db)

    es_fig: dict[str, Any] = {"available": es is not None, "reason": es_reason,
                              "version": None, "recorder": None,
                              "batched_rate": None, "single_rate": None,
                              "ratio_batched": None, "ratio_single": None,
                              "target_ratio": TARGETS["eventsourcing_ratio"], "ok": None}
    if es is not None:
        es_b = statistics.median(batched["eventsourcing"])
        es_s = statistics.median(single["eventsourcing"])
        rb = statistics.median(batched["journal"]) / es_b
        rs = statistics.median(single["journal"]) / es_s
        es_fig.update(version=es.version, recorder="eventsourcing.sqlite.SQLiteApplicationRecorder",
                      synchronous_applied=es.synchronous_seen,
                      batched_rate=round(es_b), single_rate=round(es_s),
                      ratio_batched=round(rb, 3), ratio_single=round(rs, 3),
                      ok=rb >= TARGETS["eventsourcing_ratio"] and rs >= TARGETS["eventsourcing_ratio"])

    vdb = tmp / "verify" / "journal.db"
    vdb.parent.mkdir()
    build_journal(vdb, sizes.verify_n, BATCH, data, "verify journal")
    verify = verify_figures(vdb, sizes.verify_n, sizes.rounds)
    disk = disk_overhead(vdb, "SELECT count(*), sum(length(body)) FROM entries")
    disk.update(journal_built_with_per_transaction=BATCH,
                overhead_one_entry_per_transaction=single_disk["overhead_per_entry"],
                overhead_batched_workload=batched_disk["overhead_per_entry"],
                overhead_mixed_kinds_workload=mixed_disk["overhead_per_entry"],
                raw_baseline_overhead_per_entry=raw_disk["overhead_per_entry"],
                mean_entry_bytes=round(disk["entry_bytes"] / max(disk["entries"], 1), 1),
                target_bytes_per_entry=TARGETS["disk_overhead_bytes_per_entry"],
                ok=disk["overhead_per_entry"] <= TARGETS["disk_overhead_bytes_per_entry"])
    _remove_db(vdb)

    pdb = tmp / "proofs" / "journal.db"
    pdb.parent.mkdir()
    build_s = build_journal(pdb, sizes.proof_n, BUILD_BATCH, data, "proof journal")
    proofs = proof_figures(pdb, sizes.proof_n, sizes.proof_samples, build_s)
    _remove_db(pdb)

    result: dict[str, Any] = {
        "benchmark": "eval-ledger journal",
        "quick": quick,
        "machine": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                    "msgpack": metadata.version("msgpack"), "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                    # other work on the machine skews every figure; ratios suffer least
                    "loadavg_start": [round(x, 2) for x in load_start],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "settings": {"journal_mode": "wal", "synchronous": synchronous,
                     "payload_bytes": PAYLOAD_BYTES, "batch": BATCH, "rounds": sizes.rounds,
                     "entry": {"run": RUN_ID, "task": TASK_ID, "kind": KIND},
                     "build_synchronous": "NORMAL"},
        "append_batched": append_figures(batched, TARGETS["append_batched_ratio"], sizes.batched, BATCH),
        "append_single": append_figures(single, TARGETS["append_single_ratio"], sizes.single, 1),
        "eventsourcing": es_fig,
        "verify": verify,
        "proofs": proofs,
        "disk": disk,
        "verify_audit": verify_audit(sizes, tmp),
    }
    result["targets_met"] = {k: result[k]["ok"] for k in
                             ("append_batched", "append_single", "eventsourcing", "verify",
                              "proofs", "disk", "verify_audit")}
    return result


def verify_audit(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """Plain ``ledger verify`` (attestations and views too) vs the journal-only verify of the same
    journal of smoke-sized attempts, each a whole process (benchmarks/verify_audit.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import verify_audit as va

    folder = tmp / "verify-audit"
    folder.mkdir()
    log(f"verify audit: {sizes.audit_attempts} smoke-sized attempts with attestations")
    return va.measure(sizes.audit_attempts, max(sizes.rounds, 3), folder)


def summary(r: dict[str, Any]) -> str:
    def mark(ok: bool | None) -> str:
        return "n/a " if ok is None else ("ok  " if ok else "MISS")

    b, s, e = r["append_batched"], r["append_single"], r["eventsourcing"]
    v, p, d = r["verify"], r["proofs"], r["disk"]
    lines = [
        f"eval-ledger journal benchmark (WAL, synchronous={r['settings']['synchronous']}, "
        f"{r['settings']['payload_bytes']}-byte payloads{', quick' if r['quick'] else ''})",
        f"{mark(b['ok'])} batched x{b['per_transaction']}: journal {b['journal_rate']:,}/s, raw "
        f"{b['raw_rate']:,}/s, ratio {b['ratio']} (target >= {b['target_ratio']}); "
        f"kind changing every entry: {b.get('mixed_kinds_rate', 0):,}/s, ratio {b.get('mixed_kinds_ratio')}",
        f"{mark(s['ok'])} one per tx:   journal {s['journal_rate']:,}/s, raw {s['raw_rate']:,}/s, "
        f"ratio {s['ratio']} (target >= {s['target_ratio']})",
    ]
    if e["available"]:
        lines.append(f"{mark(e['ok'])} eventsourcing {e['version']}: batched {e['batched_rate']:,}/s "
                     f"(journal x{e['ratio_batched']}), one per tx {e['single_rate']:,}/s "
                     f"(journal x{e['ratio_single']})")
    else:
        lines.append(f"n/a  eventsourcing: {e['reason']}")
    lines += [
        f"{mark(v['ok'])} verify {v['entries']:,} entries: {v['rate']:,}/s (raw sha256 loop "
        f"{v['raw_sha256_rate']:,}/s; target >= {v['target_rate']:,})",
        f"{mark(p['ok'])} proofs at {p['tree_size']:,}: inclusion median "
        f"{p['inclusion_ms']['median']} ms p95 {p['inclusion_ms']['p95']} ms; consistency median "
        f"{p['consistency_ms']['median']} ms p95 {p['consistency_ms']['p95']} ms (target < "
        f"{p['target_median_ms']} ms)",
        f"{mark(r['verify_audit']['ok'])} plain verify of {r['verify_audit']['attempts']:,} attempts "
        f"(attestations, views): {r['verify_audit']['ratio']}x the journal-only verify "
        f"(CPU; wall {r['verify_audit']['wall_ratio']}x; target <= {r['verify_audit']['target_ratio']}x)",
        f"{mark(d['ok'])} disk: {d['overhead_per_entry']} bytes/entry beyond the entry bytes "
        f"(one per tx: {d['overhead_one_entry_per_transaction']}; raw table: "
        f"{d['raw_baseline_overhead_per_entry']}; target <= {d['target_bytes_per_entry']})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--out", type=Path, help="also write the JSON figures to this file")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of seconds")
    ap.add_argument("--verify-n", type=int, help="entries in the verify journal (default 200000)")
    ap.add_argument("--proof-n", type=int, help="entries in the proof journal (default 1000000)")
    ap.add_argument("--rounds", type=int, help="rounds per append workload (median is reported)")
    ap.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL",
                    help="SQLite synchronous level for every append workload (default FULL, "
                         "what the journal uses)")
    ap.add_argument("--tmpdir", type=Path, help="where the temporary databases go")
    args = ap.parse_args(argv)

    sizes = QUICK if args.quick else FULL
    overrides = {k: v for k, v in (("verify_n", args.verify_n), ("proof_n", args.proof_n),
                                   ("rounds", args.rounds)) if v is not None}
    for k, v in overrides.items():
        if v < (1 if k == "rounds" else 2):
            ap.error(f"--{k.replace('_', '-')} is too small: {v}")
    if overrides:
        sizes = Sizes(**{**sizes.__dict__, **overrides})
    with tempfile.TemporaryDirectory(prefix="ledger-bench-", dir=args.tmpdir) as tmp:
        result = benchmark(sizes, args.synchronous, Path(tmp), quick=args.quick)
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text if args.json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
