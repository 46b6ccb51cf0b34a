"""What the attestation says about the grading phase: pure, over the attempt's decoded entries.

    grading.trace (ledger/run/attempt/gradetrace.py), sandbox.failed (stage grading), canary.result
        --judge_grading--> (matches, summary)

One attestation covers the attempt, issued after grading (its range runs from the commitment to
the attempt's last entry, grading included). Its optional ``grading`` field (absent for journals
before grading was traced, which keep their old meaning)::

    grading  {trace, observed, commands, processes, outside, network, hidden_reads, canaries}

``trace``: ``strace`` (every grading command traced), ``off`` (the run's trace mode is not
strace: grading was not traced, and the attestation says so), ``failed`` (a command's trace is
missing), ``sandbox-failed`` (the grading sandbox never ran a command), ``not-captured`` (the
grading box's commands cannot be traced from outside: a container's). ``observed`` is false for
the last three, and then the verdict is UNOBSERVED, never CLEAN (DIRTY still wins: a match is
evidence whatever else was missed). The counts are over all grading commands: processes the
graded code started, files opened outside the grading tree, endpoints it tried to connect to,
hidden-test reads the test runner's collection does not explain, and the canaries passed (of
those committed).

Matches (each on the ``grading.trace`` entry, with the first finding as detail):

    hidden-tests-read-while-graded   a hidden test file opened by a process the runner started,
                                     again during collection, or after collection ended
    grading-network                  a connect to anything but loopback or a local socket (the
                                     grading sandbox has no network: an attempt to reach one)
    grading-read-scope               a file opened under a path no sandbox may show (the task
                                     folder, the packaged tasks, the ledger home)

Processes started and other outside files are reported (counted, listed in the entry), not
matches: tests may legitimately run programs and read system files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ledger.errors import MalformedInput
from ledger.journal.codec import Entry

HIDDEN_READ = "hidden-tests-read-while-graded"
NETWORK = "grading-network"
READ_SCOPE = "grading-read-scope"
GRADING_CLASSES = (HIDDEN_READ, NETWORK, READ_SCOPE)
GRADING_KINDS = frozenset({"grading.trace"})
TRACES = ("strace", "off", "failed", "sandbox-failed", "not-captured")
_OBSERVED = frozenset({"strace", "off"})
_SUMMARY_KEYS = frozenset({"trace", "observed", "commands", "processes", "outside", "network",
                           "hidden_reads", "canaries"})
_COUNT_KEYS = ("commands", "processes", "outside", "network", "hidden_reads")


class _Adds(Protocol):
    def add(self, e: Entry, cls: str, digests: Iterable[bytes] = (), detail: str = "") -> None: ...


@dataclass
class GradingSeen:
    """The grading entries of one attempt, gathered by the scan in seq order."""

    traces: list[Entry] = field(default_factory=list)
    sandbox_failed: bool = False
    canary_result: Entry | None = None

    def see(self, e: Entry) -> bool:
        """Keep ``e`` when it is a grading entry; whether it was one."""
        if e.kind in GRADING_KINDS:
            self.traces.append(e)
            return True
        if e.kind == "sandbox.failed" and e.data.get("stage") == "grading":
            self.sandbox_failed = True
        elif e.kind == "canary.result":
            self.canary_result = e
        return False

    @property
    def present(self) -> bool:
        return bool(self.traces) or self.sandbox_failed


def _commands(e: Entry) -> list[Mapping[str, Any]]:
    cmds = e.data.get("commands")
    return [c for c in cmds if isinstance(c, Mapping)] if isinstance(cmds, list) else []


def _first(items: Any) -> Mapping[str, Any] | None:
    return next((i for i in items if isinstance(i, Mapping)), None) if isinstance(items, list) \
        else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _judge_command(scan: _Adds, e: Entry, c: Mapping[str, Any], label: str) -> None:
    reads = [r for r in c.get("hidden_reads", ()) if isinstance(r, Mapping)] \
        if isinstance(c.get("hidden_reads"), list) else []
    if reads or _int(c.get("hidden_count")):
        r = reads[0] if reads else {}
        scan.add(e, HIDDEN_READ, (), f"{label}: {r.get('path', '?')} read by the "
                 f"{r.get('by', '?')} ({r.get('phase', '?')}); "
                 f"{max(len(reads), _int(c.get('hidden_count')))} read(s)")
    net = [n for n in c.get("network", ()) if isinstance(n, Mapping) and not n.get("loopback")] \
        if isinstance(c.get("network"), list) else []
    if net:
        n = net[0]
        scan.add(e, NETWORK, (), f"{label}: connect to {n.get('family')} "
                 f"{n.get('host')}:{n.get('port')}; {len(net)} endpoint(s)")
    secret = [o for o in c.get("outside", ()) if isinstance(o, Mapping) and o.get("hidden")] \
        if isinstance(c.get("outside"), list) else []
    if secret:
        scan.add(e, READ_SCOPE, (), f"{label}: opened {secret[0].get('path')}; "
                 f"{len(secret)} file(s) under a hidden path")


def judge_grading(scan: _Adds, seen: GradingSeen) -> dict[str, Any] | None:
    """Add the grading matches to ``scan``; the attestation's ``grading`` summary (None when
    the attempt has no grading entries: an older journal, or nothing was graded)."""
    if not seen.present:
        return None
    counts = dict.fromkeys(_COUNT_KEYS, 0)
    statuses: list[str] = []
    for e in seen.traces:
        status = e.data.get("status")
        statuses.append(status if status in TRACES else "failed")
        for k, c in enumerate(_commands(e)):
            label = str(c.get("label", f"command {k}"))
            if c.get("status") != "strace":
                statuses.append("failed")
            _judge_command(scan, e, c, label)
            counts["commands"] += 1
            counts["processes"] += _int(c.get("processes"))
            counts["outside"] += _int(c.get("outside_count"))
            counts["network"] += len(c.get("network", ())) if isinstance(
                c.get("network"), list) else 0
            counts["hidden_reads"] += _int(c.get("hidden_count"))
    if seen.sandbox_failed:
        trace = "sandbox-failed"
    elif not statuses:
        trace = "failed"  # a sandbox failure entry is the only trace of grading
    elif "failed" in statuses:
        trace = "failed"
    elif "not-captured" in statuses:
        trace = "not-captured"
    else:
        trace = "off" if all(s == "off" for s in statuses) else "strace"
    return {"trace": trace, "observed": trace in _OBSERVED, **counts,
            "canaries": _canaries(seen.canary_result)}


def _canaries(res: Entry | None) -> dict[str, int] | None:
    data = res.data.get("canaries") if res is not None else None
    if not isinstance(data, Mapping):
        return None
    rows = data.get("canaries")
    return {"committed": len(rows) if isinstance(rows, list) else 0,
            "passed": _int(data.get("passed"))}


def check_summary(value: Any) -> Mapping[str, Any]:
    """An attestation's ``grading`` field, checked for shape (``MalformedInput`` otherwise)."""
    if not isinstance(value, Mapping) or value.keys() != _SUMMARY_KEYS:
        raise MalformedInput(f"attestation grading must be a map with fields "
                             f"{sorted(_SUMMARY_KEYS)}")
    if value["trace"] not in TRACES or not isinstance(value["observed"], bool) or \
            value["observed"] != (value["trace"] in _OBSERVED):
        raise MalformedInput("attestation grading trace and observed do not agree")
    for k in _COUNT_KEYS:
        if _int(value[k]) != value[k] or value[k] < 0:
            raise MalformedInput(f"attestation grading {k} must be a count")
    can = value["canaries"]
    if can is not None and (not isinstance(can, Mapping) or set(can) != {"committed", "passed"}
                            or not all(_int(v) == v for v in can.values())):
        raise MalformedInput("attestation grading canaries must be null or {committed, passed}")
    return value


def grading_observed(summary: Mapping[str, Any] | None) -> bool:
    """Whether the grading phase (when the attestation says anything of it) was observed."""
    return summary is None or bool(summary.get("observed"))
