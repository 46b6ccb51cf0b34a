"""A worker-side wrapper of the attempt runner that times every child process (benchmarks only).

``benchmarks/run.py`` points the local executor at ``timing_runner:run_attempt``. It runs the
normal attempt code with ``subprocess.Popen`` instrumented: each child's interval runs from the
``Popen`` call to the moment the worker reaps it. The intervals of one attempt are written as JSON
to ``$LEDGER_BENCH_CHILDREN/<sha256 of the attempt id>.json``, so the benchmark can subtract the
time spent waiting on children (agent, tests, signals, git) from the attempt's wall time.
With ``$LEDGER_BENCH_PROFILE`` set to a folder, each attempt also runs under cProfile and its
stats land there (``<sha256>.prof``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

ENV = "LEDGER_BENCH_CHILDREN"
PROFILE_ENV = "LEDGER_BENCH_PROFILE"  # a folder: each attempt's cProfile stats are written there


def child_file(directory: Path, attempt_id: str) -> Path:
    return directory / (hashlib.sha256(attempt_id.encode()).hexdigest() + ".json")


def run_attempt(plan: Any, emit: Any, **kw: Any) -> Any:
    from ledger.run.attempt import run_attempt as real

    intervals: list[tuple[float, float]] = []
    commands: list[tuple[float, float, str]] = []  # the same, with what ran (its first words)
    orig_init = subprocess.Popen.__init__
    orig_handle = subprocess.Popen._handle_exitstatus  # type: ignore[attr-defined]

    def init(self: Any, *a: Any, **k: Any) -> None:
        self._bench_t0 = time.time()
        self._bench_argv = a[0] if a else k.get("args")
        orig_init(self, *a, **k)

    def handle(self: Any, *a: Any, **k: Any) -> Any:
        out = orig_handle(self, *a, **k)
        t0 = self.__dict__.pop("_bench_t0", None)
        if t0 is not None:
            intervals.append((t0, time.time()))
            commands.append((t0, intervals[-1][1], _label(self.__dict__.pop("_bench_argv", None))))
        return out

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen._handle_exitstatus = handle  # type: ignore[attr-defined]
    phases: dict[str, list[float]] = {}
    restore = _time_phases(phases)
    cpu0 = time.process_time()
    profile_dir = os.environ.get(PROFILE_ENV)
    try:
        if profile_dir:
            import cProfile

            prof = cProfile.Profile()
            try:
                return prof.runcall(real, plan, emit, **kw)
            finally:
                prof.dump_stats(child_file(Path(profile_dir), plan.attempt_id).with_suffix(".prof"))
        return real(plan, emit, **kw)
    finally:
        subprocess.Popen.__init__ = orig_init  # type: ignore[method-assign]
        subprocess.Popen._handle_exitstatus = orig_handle  # type: ignore[attr-defined]
        restore()
        phases["worker_cpu_total"] = [0.0, time.process_time() - cpu0]
        directory = os.environ.get(ENV)
        if directory:
            child_file(Path(directory), plan.attempt_id).write_text(
                json.dumps({"children": intervals, "commands": commands, "phases": phases}))


_WRAPPERS = frozenset({"strace", "bwrap", "prlimit", "setsid", "unshare", "env", "timeout"})


def _label(argv: Any) -> str:
    """What a child ran, for the benchmark's breakdown: the program's name and, for a wrapper
    (strace, bwrap, ...), the first two words of the command after its last ``--``."""
    if isinstance(argv, (str, bytes)):
        argv = [argv]
    words = [os.path.basename(str(w)) for w in (argv or [])]
    if not words:
        return "?"
    head = words[0]
    if head in _WRAPPERS and "--" in words:
        inner = words[len(words) - words[::-1].index("--"):]
        if inner:
            return f"{head}>{' '.join(inner[:2])}"
    return head


# Harness steps timed inside the worker (wall and CPU seconds): where the harness time goes.
PHASES = {
    "ledger.agents.orphans": ("wait_tracer", "kill_attempt_processes", "tracers_of"),
    # the strace log is parsed while the agent runs; ``finish`` is the wait for its tail
    "ledger.agents.follow": ("TraceFollower.finish",),
    # the attempt's steps, patched where the pipeline calls them
    "ledger.run.attempt.pipeline": ("load_plan_task", "commit_ground_truth", "create_workspace"),
    "ledger.run.attempt.collect": ("take_diff",),
    "ledger.run.attempt.grade": ("install_hidden_tests",),
    "ledger.run.attempt.expected": ("install_hidden_tests",),
}


def _time_phases(phases: dict[str, list[float]]) -> Any:
    import importlib

    saved = []
    for module_name, names in PHASES.items():
        module = importlib.import_module(module_name)
        for name in names:
            owner_name, _, attr = name.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            fn = getattr(owner, attr, None)
            if fn is None:
                continue

            def timed(*a: Any, _fn: Any = fn, _name: str = name, **k: Any) -> Any:
                t, c = time.perf_counter(), time.process_time()
                try:
                    return _fn(*a, **k)
                finally:
                    acc = phases.setdefault(_name, [0.0, 0.0])
                    acc[0] += time.perf_counter() - t
                    acc[1] += time.process_time() - c

            saved.append((owner, attr, fn))
            setattr(owner, attr, timed)

    def restore() -> None:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)

    return restore


def union_s(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` covered by at least one interval."""
    total = 0.0
    cur_s: float | None = None
    cur_e = 0.0
    for s, e in sorted((max(s, start), min(e, end)) for s, e in intervals):
        if e <= s:
            continue
        if cur_s is None or s > cur_e:
            if cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_s is not None:
        total += cur_e - cur_s
    return total


def gaps(intervals: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The stretches of ``[start, end]`` no interval covers, as (offset from start, length)."""
    out: list[tuple[float, float]] = []
    pos = start
    for s, e in sorted((max(s, start), min(e, end)) for s, e in intervals):
        if e <= s:
            continue
        if s > pos:
            out.append((pos - start, s - pos))
        pos = max(pos, e)
    if end > pos:
        out.append((pos - start, end - pos))
    return out
