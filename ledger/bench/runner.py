"""Run a bench: dispatch one task to several agents in parallel, run the extra rounds, judge, and
journal every step; the leaderboard is then a projection of those entries.

    run_bench(home, task, BenchOptions(...), progress=print) -> BenchResult

Steps, each journaled (kinds in docs/bench.md): ``run.started`` + ``bench.started`` -> the code
round (``bench.response``, ``bench.activity``) -> corpus checks (``bench.check``) -> review rounds
(``bench.review``, revised ``bench.response``) -> tests round (``bench.response``, executed:
``bench.tests``) -> static checks (``bench.static``) -> judging (``bench.judge_prompt``,
``bench.judge_raw``, ``bench.verdict``; a reversed-order pass with ``swap_check``) ->
``view.recorded`` (the leaderboard) -> ``bench.finished`` -> ``run.finished`` -> a signed
checkpoint. Agents run in worker threads (each a bounded process group); only this thread
appends to the journal, through the bench's ``ledger.session.Session`` (the one writer, no
attestation policy: a bench journals no commitment), and the leaderboard is folded as the
entries are appended.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluators import bench_judge as jd
from evaluators.leaderboard import (
    BENCH_EVALUATOR,
    BENCH_VERSION,
    fold_leaderboard,
    leaderboard_view,
    new_leaderboard_state,
)
from ledger.bench.calls import kill_run_processes
from ledger.bench.confine import Confinement, confinement
from ledger.bench.inputs import BenchTask
from ledger.bench.options import BenchOptions, BenchResult, Say
from ledger.bench.panel import Contestant, resolve_contestants, resolve_judges
from ledger.bench.rounds import Rounds
from ledger.errors import UsageError
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.session import Session, new_run_id


def new_bench_run_id(now: datetime, rng: Callable[[int], bytes] = os.urandom) -> str:
    """``b-<UTC time>-<6 hex>``: a run id (``ledger.session.new_run_id``) marked as a bench."""
    return new_run_id(now, rng, prefix="b")


def run_bench(home: LedgerHome, task: BenchTask, opts: BenchOptions, *,
              progress: Say | None = None,
              now: Callable[[], datetime] = lambda: datetime.now(UTC),
              rng: Callable[[int], bytes] = os.urandom,
              on_view: Callable[[dict[str, Any]], list[str]] | None = None) -> BenchResult:
    """Run a whole bench and return the leaderboard view (recorded as ``view.recorded``).

    ``on_view`` (e.g. writing the report files) is called with the view before the run is closed;
    the paths it returns are recorded in ``bench.finished``.
    """
    say: Say = progress or (lambda _line: None)
    if opts.with_test_review and not opts.with_tests:
        raise UsageError("--with-test-review (--with-test-adversarial) needs --with-tests")
    if opts.timeout_s <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    contestants, skipped = resolve_contestants(opts.agents, home)
    for reason in skipped:
        say(f"warning: skipping {reason}")
    judges, fallback, why = resolve_judges(opts.judges, contestants, home)
    from ledger.agents.costs import resolve_pricing

    pricing, _file = resolve_pricing(home.path, opts.pricing_file)
    confine = _confinement(home, opts)
    run_id = new_bench_run_id(now(), rng)
    seed = opts.seed if opts.seed is not None else int.from_bytes(rng(4), "big")
    board = new_leaderboard_state(None)  # as replay folds it: from the first bench.* entry
    bench: Rounds | None = None
    with Session.open(home) as session:
        try:
            judge_records = ([{"name": jd.OFFLINE_JUDGE, "spec": jd.OFFLINE_JUDGE,
                               "kind": "builtin", "version": None, "family": "offline"}]
                             if fallback else [j.record() for j in judges])
            writer = session.start(run_id, {
                "config": {"kind": "bench", "agents": [c.spec for c in contestants],
                           "judges": [j["spec"] for j in judge_records], "repeat": 1,
                           "parallel": opts.parallel or len(contestants),
                           "timeout_s": opts.timeout_s, "trace": "none", "executor": "bench",
                           "tiers": [], "task_ids": []},
                "tasks": [], "agents": [{k: v for k, v in c.record().items() if k != "family"}
                                        for c in contestants],
            }, fold=False, listeners=[lambda e: fold_leaderboard(board, e)])
            writer.append("bench.started", {
                **_started_record(task, opts, contestants, skipped, judge_records, fallback,
                                  why, seed), "sandbox": confine.record()}, task="bench")
            say(f"sandbox: {confine.name} ({confine.reason})")
            if fallback:
                say(f"judge: offline deterministic judge (fallback: {why})")
            else:
                say(f"judge: {', '.join(j.name for j in judges)} ({why})")
            bench = Rounds(home, writer, task, opts, run_id, seed, contestants, judges, fallback,
                           say, pricing, confine)
            try:
                bench.run()
            except KeyboardInterrupt:
                killed = kill_run_processes(run_id)
                bench.pool.shutdown(wait=False, cancel_futures=True)
                writer.append("bench.finished", {"status": "interrupted", "killed": killed},
                              task="bench")
                session.finish("interrupted", len(contestants), 0)
                raise
            view = leaderboard_view(board)  # folded as the entries were appended: no read-back
            session.record_view(BENCH_EVALUATOR, BENCH_VERSION, view)
            files = on_view(view) if on_view is not None else []
            counts = view["counts"]
            writer.append("bench.finished", {
                "status": view["verdict"], "attempted": counts["attempted"],
                "succeeded": counts["succeeded"], "scored": counts["scored"], "reports": files,
            }, task="bench")
            session.finish("finished", counts["attempted"], counts["succeeded"])
            session.checkpoint()
        finally:
            if bench is not None:
                bench.pool.shutdown(wait=True)
    verdict = str(view["verdict"])
    exit_code = 3 if verdict == "FAIL" else 0
    return BenchResult(run_id, view, verdict, exit_code)


def _confinement(home: LedgerHome, opts: BenchOptions) -> Confinement:
    """The bench's boxes: ``opts.sandbox``, else ``[run] sandbox`` of ledger.toml, else auto;
    the ledger folder (keys, journal) hidden from every one."""
    from ledger.run.config import load_config

    requested = opts.sandbox or load_config(home.config_path).run.sandbox or "auto"
    return confinement([str(home.path)], requested)


def _started_record(task: BenchTask, opts: BenchOptions, contestants: Sequence[Contestant],
                    skipped: Sequence[str], judge_records: list[dict[str, Any]], fallback: bool,
                    why: str, seed: int) -> dict[str, Any]:
    """The data of ``bench.started``: the task, the options, the panel, the seed."""
    options = {"with_tests": opts.with_tests, "with_adversarial": opts.with_review,
               "with_test_adversarial": opts.with_test_review,
               "with_static_checks": opts.with_static, "swap_check": opts.swap_check}
    return {
        "version": BENCH_VERSION, "mode": task.mode, "task_source": task.source,
        "task_hash": task.task_hash, "task_chars": len(task.text),
        "task_title": None if opts.no_snapshot else task.title,
        "task_snapshot": task.snapshot(not opts.no_snapshot),
        "snapshot_stored": not opts.no_snapshot, "detail": dict(task.detail),
        "options": options, "agents": [c.record() for c in contestants],
        "skipped_agents": list(skipped), "judges": judge_records, "judge_fallback": fallback,
        "judge_choice": why, "seed": seed, "timeout_s": opts.timeout_s,
        "project": opts.project if opts.project is not None else str(Path.cwd()),
        "corpus_version": task.corpus.version if task.corpus else None,
    }


def bench_runs(journal: Journal) -> list[tuple[str, dict[str, Any], int]]:
    """``(run_id, bench.started data, ts)`` of every bench run, newest first."""
    out = [(str(e.run), dict(e.data), e.ts) for e in journal.entries(kind="bench.started")
           if e.run is not None]
    out.reverse()
    return out


def entries_of(journal: Journal, run_id: str) -> Iterable[Any]:
    return journal.entries(run=run_id)


__all__ = ["BenchOptions", "BenchResult", "bench_runs", "entries_of", "new_bench_run_id",
           "resolve_contestants", "resolve_judges", "run_bench"]
