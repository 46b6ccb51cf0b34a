"""Crash safety: a writer killed with SIGKILL at random moments never loses an acknowledged append."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing

TRIALS = 24
SEED = 20_240_611

# The child appends forever: single entries, batches of three, and a checkpoint every few
# appends. After each commit returns it prints one line per entry, "seq trial i", in one write.
CHILD = r"""
import sys
from pathlib import Path
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys

home, trial = Path(sys.argv[1]), int(sys.argv[2])
keys = load_keys(home / "keys")
j = Journal.open(home / "journal.db", create=True, harness=True)
i = 0
out = sys.stdout
while True:
    if i % 5 == 4:
        done = j.append_many([{"kind": "crash.batch", "data": {"trial": trial, "i": i + k},
                               "run": f"trial-{trial}"} for k in range(3)])
    else:
        done = [j.append("crash.tick", {"trial": trial, "i": i, "pad": "x" * (i % 64)},
                         run=f"trial-{trial}")]
    i += len(done)
    out.write("".join(f"{e.seq} {trial} {e.data['i']}\n" for e in done))
    out.flush()
    if i % 7 < len(done):
        j.checkpoint(keys)
"""


def _run_trial(home: Path, trial: int, rng: random.Random) -> tuple[list[tuple[int, int, int]], float]:
    """Start the child, kill it at a random moment, return the lines it acknowledged."""
    # Unbuffered pipes: what the parent reads before the kill and what communicate() reads
    # after it come from the same file descriptor, so no acknowledged line can hide in a buffer.
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(home), str(trial)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout is not None
    head = b""
    blind = trial % 6 == 5  # now and then kill without waiting, possibly mid-start-up
    if blind:
        delay = rng.uniform(0.0, 0.6)
        time.sleep(delay)
    else:
        while b"\n" not in head:  # wait until the child has acknowledged its first append
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                proc.kill()
                _, err = proc.communicate(timeout=30)
                pytest.fail(f"child exited before appending anything: {err.decode()[-2000:]}")
            head += chunk
        delay = rng.uniform(0.0, 0.25)
        time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    text = (head + out).decode()
    complete = text[: text.rfind("\n") + 1]  # a line is acknowledged only once fully written
    acked = []
    for line in complete.splitlines():
        seq, t, i = (int(x) for x in line.split())
        acked.append((seq, t, i))
    return acked, delay


@pytest.mark.slow
def test_sigkill_never_loses_acknowledged_appends(home: Path, keyring: KeyRing) -> None:
    """After each of 24 SIGKILLs, verify passes and every acknowledged append is present."""
    rng = random.Random(SEED)
    db = home / "journal.db"
    acked: dict[int, tuple[int, int]] = {}
    auditor_note: str | None = None
    killed_mid_append = 0
    started = time.monotonic()
    for trial in range(TRIALS):
        lines, delay = _run_trial(home, trial, rng)
        for seq, t, i in lines:
            assert t == trial
            assert seq not in acked, f"seq {seq} acknowledged twice"
            acked[seq] = (t, i)
        if not db.exists():
            assert not lines
            continue
        context = f"trial {trial}, killed after {delay:.3f}s, {len(lines)} acknowledged"
        with Journal.open(db, readonly=True) as j:
            summary = j.verify(verifier=keyring.verifier, since=auditor_note)
            assert summary["size"] == j.size, context
            present = {e.seq: e for e in j.entries()}
            assert sorted(present) == list(range(j.size)), context
            for seq, (t, i) in acked.items():
                assert seq in present, f"acknowledged seq {seq} lost ({context})"
                assert (present[seq].data["trial"], present[seq].data["i"]) == (t, i), context
            # Committed but not acknowledged: only the one transaction the kill interrupted.
            this_trial = [s for s, e in present.items() if e.run == f"trial-{trial}"]
            unacked = [s for s in this_trial if s not in acked]
            assert len(unacked) <= 3, f"{unacked} committed but never acknowledged ({context})"
            if unacked:
                killed_mid_append += 1
                assert min(unacked) > max((s for s in this_trial if s in acked), default=-1)
            latest = j.latest_checkpoint()
            if latest is not None:
                auditor_note = latest[1]  # kept outside: the next round must extend it
    elapsed = time.monotonic() - started
    print(f"crash: {TRIALS} kills, {len(acked)} acknowledged appends, {killed_mid_append} kills "
          f"left a committed but unacknowledged transaction, {elapsed:.1f}s")
    assert len(acked) > TRIALS  # the children really were appending when killed
    assert elapsed < 60, f"crash trials took {elapsed:.1f}s"
    with Journal.open(db, harness=True) as j:
        assert j.verify(verifier=keyring.verifier)["size"] >= len(acked)
