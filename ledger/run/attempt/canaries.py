"""The attempt's canaries (``attest.canary``): chosen under its commitment key, and their
outcomes taken out of a hidden session's records before anything else sees them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.run.contracts import AttemptSettings
from ledger.tasks.model import Signal, Task

if TYPE_CHECKING:
    from attest.canary import Canary, Derived

_CANARIES_MAX = 64




def attempt_canaries(task: Task, settings: AttemptSettings) -> Derived | None:
    """The attempt's canaries (``attest.canary``), chosen under its commitment key; None when
    the run turned them off (``canaries: false``, the benchmark's baseline). The key is the one
    ``commit_ground_truth`` checked."""
    key = settings.commitment_key
    if not settings.canaries or key is None:
        return None
    from ledger.tasks.canaries import derive_for

    cache_key = (task.hash, str(Path(task.root).resolve()), key)
    derived = _CANARIES.get(cache_key)
    if derived is None:  # a function of the task's files (hash checked) and the key
        derived = derive_for(task, key)
        if len(_CANARIES) >= _CANARIES_MAX:
            _CANARIES.clear()
        _CANARIES[cache_key] = derived
    return derived


_CANARIES: dict[tuple[str, str, bytes], Derived] = {}  # a worker's canaries, by task and key


def signal_runs(task: Task, canaries: Derived | None) -> list[tuple[int, Canary | None]]:
    """The order the completion signals and the signal canaries run in: the task's signals in
    their own order (``(index, None)``), each signal canary (``(index of its original,
    canary)``) just before the real signal its ``slot`` names, or after them all. The slot is a
    function of the commitment key (``attest.canary``), so a cheat that counts its runs (a
    counter file it keeps) cannot know which turn is the real one."""
    cans = canaries.signals if canaries is not None else ()
    runs: list[tuple[int, Canary | None]] = []
    for turn in range(len(task.signals) + 1):
        runs += [(int(c.name.split(":")[1]), c) for c in cans if c.slot == turn]
        if turn < len(task.signals):
            runs.append((turn, None))
    return runs


def signal_claim(res: Mapping[str, Any], sig: Signal) -> str:
    """What a command signal's run claims: its exit code is its claim, so reaching the expected
    one is ``passed`` whether or not its code ran to its end (an early exit is a cheat)."""
    return "passed" if res.get("passed") or res.get("exit_code") == sig.expect_exit else "failed"


def split_canaries(tests: dict[str, Any], canaries: Derived | None
                   ) -> tuple[dict[str, Any], dict[str, tuple[str, str]], dict[str, Any] | None]:
    """(the reporter's real test records, per test canary (``Canary.key``) its outcome and its
    original's, the suite's ``canaries`` counts) of one hidden session. A case counts as passed
    when the test passed or pytest reported it passed (``attest.canary.claimed``); a canary or
    an original passes when every case of it does. ``all_failed``: every canary reported, every
    case of it failed. None counts: no test canaries."""
    from attest.canary import claimed, outcome_of

    if canaries is None or not canaries.tests:
        return tests, {}, None
    real: dict[str, Any] = {}
    own: dict[str, list[str]] = {c.key: [] for c in canaries.tests}
    for tid, rec in tests.items():
        mine = [c for c in canaries.tests if c.matches(tid)]
        if mine:
            own[mine[0].key].append(claimed(rec["outcome"], rec["reported"]))
        else:
            real[tid] = rec
    seen: dict[str, tuple[str, str]] = {}
    for c in canaries.tests:
        originals = [claimed(r["outcome"], r["reported"]) for t, r in real.items() if c.copies(t)]
        mine = own[c.key]
        if mine:
            seen[c.key] = (_all_or_any(mine, outcome_of), _all_or_any(originals, outcome_of))
    failed = sum(1 for outs in own.values() for o in outs if o in ("failed", "error"))
    cases = sum(len(outs) for outs in own.values())
    counts = {"tests": len(canaries.tests), "failed": failed,
              "all_failed": len(seen) == len(canaries.tests) and failed == cases}
    return real, seen, counts


def _all_or_any(outcomes: Sequence[str], pick: Callable[[Sequence[str]], str]) -> str:
    """``passed`` when every case passed; otherwise the worst outcome of the cases."""
    if outcomes and all(o == "passed" for o in outcomes):
        return "passed"
    return pick([o for o in outcomes if o != "passed"]) if outcomes else "missing"
