"""Several processes appending at once get one linear, gap-free log that verifies."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, load_keys

WORKERS = 4
SINGLES = 40
BATCHES = 6
BATCH = 4
PER_WORKER = SINGLES + BATCHES * BATCH


def _worker(home: str, wid: int, barrier: Barrier, results: Any) -> None:
    """Open the journal (creating it if no one has yet) and append as fast as possible."""
    try:
        barrier.wait(timeout=60)
        j = Journal.open(Path(home) / "journal.db", create=True, harness=True)
        keys = load_keys(Path(home) / "keys")
        acked: list[tuple[int, int]] = []
        n = 0
        for step in range(SINGLES + BATCHES):
            if step % 7 == 6:
                done = j.append_many([{"kind": "load.batch", "data": {"w": wid, "n": n + k},
                                       "run": f"w{wid}"} for k in range(BATCH)])
            else:
                done = [j.append("load.one", {"w": wid, "n": n}, run=f"w{wid}")]
            n += len(done)
            acked += [(e.seq, e.data["n"]) for e in done]
            if step % 10 == 9:
                j.checkpoint(keys)
        j.close()
        results.put((wid, acked, None))
    except BaseException as exc:  # report, never hang the parent
        results.put((wid, [], repr(exc)))


@pytest.mark.slow
def test_parallel_appenders_build_one_log(home: Path, keyring: KeyRing) -> None:
    """4 processes creating and appending to one journal at once: no gap, no loss, verifies."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(home), w, barrier, results))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [(w, err) for w, _, err in got if err]
    assert not errors, errors

    total = WORKERS * PER_WORKER
    all_seqs = [seq for _, acked, _ in got for seq, _ in acked]
    assert len(all_seqs) == len(set(all_seqs)) == total  # no seq handed out twice
    with Journal.open(home / "journal.db", readonly=True) as j:
        summary = j.verify(verifier=keyring.verifier)
        assert summary["size"] == j.size == total
        entries = {e.seq: e for e in j.entries()}
        assert sorted(entries) == list(range(total))
        for wid, acked, _ in got:
            assert [n for _, n in acked] == list(range(PER_WORKER))
            seqs = [s for s, _ in acked]
            assert seqs == sorted(seqs)  # each writer's appends are in its own order
            for seq, n in acked:
                assert entries[seq].data == {"w": wid, "n": n}
                assert entries[seq].run == f"w{wid}"
            assert [e.seq for e in j.entries(run=f"w{wid}")] == seqs
            batches = [s for s, _ in acked if entries[s].kind == "load.batch"]
            for k in range(0, len(batches), BATCH):  # a batch is contiguous: one transaction
                chunk = batches[k:k + BATCH]
                assert chunk == list(range(chunk[0], chunk[0] + BATCH))
        assert summary["checkpoints"] >= 1
