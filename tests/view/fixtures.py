"""A journal that exercises the report: two agents, repeats, transcripts, hostile text."""

from __future__ import annotations

from pathlib import Path

from evaluators.views import recorded_view_data
from ledger.journal.journal import Journal
from tests.evaluators.builders import RunBuilder, task

RUN = "r-20261201T100000Z-vvvvvv"
HOSTILE = "</script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
PATCH = ("--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n-    return a - b\n"
         "+    return a + b\n")


def build(run: str = RUN, *, tasks: int = 3, repeats: int = 2,
          agents: tuple[str, ...] = ("alpha", "beta"), reads: int = 1) -> RunBuilder:
    """``tasks`` x ``agents`` x ``repeats`` attempts; alpha passes every task, beta only t0.

    ``reads`` fs.read entries per attempt (the first in the worktree, the rest library files, as
    strace records an interpreter starting)."""
    paths = ["src/calc.py", *(f"/usr/lib/python3/m{i}.py" for i in range(reads - 1))]
    b = RunBuilder(run=run)
    b.started([task(f"t{i}") for i in range(tasks)], agents=agents)
    for r in range(1, repeats + 1):
        for i in range(tasks):
            for agent in agents:
                ok = agent == agents[0] or i == 0
                b.attempt(
                    f"t{i}", agent=agent, repeat=r, hidden=(2, 0, 0) if ok else (1, 1, 0),
                    hidden_messages=[f"AssertionError {HOSTILE}"], wall_s=10.0 + i,
                    cost_usd=0.5 if agent == agents[0] else 0.1, patch=PATCH,
                    attestation="CLEAN" if ok else "DIRTY", reads=paths,
                    extra=[("tool.call", {"tool": "bash", "input": {"command": f"cat {HOSTILE}"}}),
                           ("tool.result", {"tool": "bash", "output": "ok", "is_error": False})],
                )
    b.finished()
    return b


def write(home: Path, b: RunBuilder) -> Path:
    """Append the builder's entries (and the recorded view) to ``home``/journal.db and sign a
    checkpoint, as a run ends (readers verify against it)."""
    from ledger.journal.keys import load_or_init_keys

    with Journal.open(home / "journal.db", create=True, harness=True) as j:
        j.append_many([(e.kind, e.data, e.run, e.task) for e in b.entries])
        j.append("view.recorded", recorded_view_data(j.entries(run=b.run), b.run), run=b.run)
        j.checkpoint(load_or_init_keys(home / "keys"))
    return home


CRASH_RUN = "r-20261201T110000Z-cccccc"
HOST_PATH = "/home/someone/.cache/secret-venv/lib/python3.11/site.py"


def build_crashes(run: str = CRASH_RUN) -> RunBuilder:
    """A run with no cost recorded (zero or missing) and attempts that did not run to their end:
    t0 completed, t1 crashed (yet CLEAN), t2 interrupted (no attempt.finished) with an attestation
    whose scope lists host paths, t3 a harness failure (status error),
    t4 a sandbox that did not start (sandbox.failed)."""
    b = RunBuilder(run=run)
    b.started([task(f"t{i}") for i in range(4)], agents=("demo",))
    b.attempt("t0", cost_usd=0.0, attestation="CLEAN")
    b.attempt("t1", cost_usd=None, crashed=True, attestation="CLEAN")
    aid = b.attempt("t2", cost_usd=0.0, status=None, reads=("src/calc.py", HOST_PATH))
    b.add("attestation", {"attempt": aid, "hash": "11" * 32, "attestation": {
        "verdict": "CLEAN", "isolation": "sandbox", "match_count": 0, "matches": [],
        "scope": {"worktree": "/home/someone/work/wt-1234", "read_allowlist": [HOST_PATH, "/usr"],
                  "write_allowlist": ["/tmp"], "network_allowlist": [], "allow_dns": False},
        "observation": {"trace": "strace", "transcript": True, "agent_started": True}}},
          task="t2")
    b.attempt("t3", cost_usd=0.0, status="error", error=f"worker died {HOSTILE}",
              attestation="CLEAN")
    b.attempt("t4", cost_usd=None, status="error", error="sandbox failed", hidden=None,
              extra=[("sandbox.failed", {"stage": "start", "backend": "bwrap",
                                         "message": "bwrap: setting up uid map: Permission denied"})])
    b.finished()
    return b
