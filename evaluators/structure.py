"""Which entries of a run count: the run's own structure decides, never recency.

Pure: entries in, the entries that count and the findings out. Every view (score, taxonomy,
leaderboard, replay) folds only what :func:`trusted` keeps, so an entry appended later to change a
result changes nothing and is reported as an ``injected`` finding by ``ledger replay`` and
``ledger verify``.

The rules (docs/THREATS.md, "Results only the harness writes"):

attempt entries   An entry that names an attempt counts only inside the attempt's span: after the
                  attempt's first ``attempt.started`` and before the end of the span, which is the
                  attempt's attestation when it has one, else the run's next ``run.finished``.
                  When the attestation binds the attempt's result entries (``results.seqs``, signed
                  with the attestation and checked against their leaf hashes by ``ledger verify``),
                  a result entry counts only if it is one of them. A result is the only one of its
                  kind there (per test suite, per signal index); a second one is injected.
attestation       The attempt's first attestation after its ``attempt.started`` and before the run's
                  next ``run.finished`` (or, for an attempt the stopped coordinator left unattested,
                  between that ``run.finished`` and the ``run.resumed`` after it, where ``--resume``
                  attests it); any later one is injected.
judge.verdict     After the attempt started, inside an open run segment (before a ``run.finished``),
                  one per attempt and judge (name, version): the first.
run.finished      One per run segment: the first after ``run.started`` or after a ``run.resumed``.
view.recorded     Only directly after the run's ``run.finished`` (the run's previous entry is that
                  ``run.finished`` or another view recorded with it); a bench view (evaluator
                  ``bench``, recorded before ``bench.finished`` and ``run.finished``) only while the
                  run is open, one per segment.

Entries of other runs are left to their own run; ``ext.*`` and unknown kinds pass through (the
fold counts them as unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from attest.attestation import RESULT_KINDS
from ledger.journal.codec import Entry

__all__ = ["RESULT_KINDS", "STRUCTURE_KINDS", "Finding", "Trusted", "placed_stream", "trusted"]


@dataclass(frozen=True)
class Finding:
    """An entry that the run's structure does not place where it claims to be."""

    seq: int
    kind: str
    run: str | None
    attempt: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"check": "injected", "seq": self.seq, "kind": self.kind, "run": self.run,
                "attempt": self.attempt, "reason": self.reason}


@dataclass(frozen=True)
class Trusted:
    """The entries of one run that count, in seq order, and what was set aside."""

    entries: tuple[Entry, ...]
    findings: tuple[Finding, ...]


ATTEMPT_PREFIXES = ("attempt.", "test.", "signal.", "agent.", "fs.", "proc.", "net.", "tool.",
                    "model.", "grading.")
ATTEMPT_KINDS = frozenset({"commitment", "diff", "canary.commitment", "canary.result"})
"""Harness kinds that belong to one attempt (besides ``attestation`` and ``judge.verdict``): the
span rule applies to them. Unknown kinds are left to the fold, which counts them."""


_SCALARS = (str, int, float)  # bool is an int


def _hashable(value: Any) -> Any:
    return value if value is None or isinstance(value, _SCALARS) else repr(value)


def _result_key(a: str, e: Entry) -> tuple[Any, ...]:
    """What makes a result of attempt ``a`` the only one of its kind (per suite, per signal)."""
    kind = e.kind
    if kind == "test.result":
        return (a, kind, _hashable(e.data.get("suite")))
    if kind == "signal.result":
        return (a, kind, _hashable(e.data.get("index")))
    return (a, kind)


def _attempt_kind(kind: str) -> bool:
    return kind in ATTEMPT_KINDS or kind.startswith(ATTEMPT_PREFIXES)


# What pass 2 of ``trusted`` does with an entry of a kind (worked out once per kind)
_PASS, _RUN_STARTED, _RUN_FINISHED, _VIEW_RECORDED, _ATTESTATION, _JUDGE_VERDICT = range(6)
_ATTEMPT_STARTED, _RESULT, _ATTEMPT_ACTIVITY = 6, 7, 8  # the attempt kinds: the span rule
_KIND_CLASSES = {"run.started": _RUN_STARTED, "run.finished": _RUN_FINISHED,
                 "view.recorded": _VIEW_RECORDED, "attestation": _ATTESTATION,
                 "judge.verdict": _JUDGE_VERDICT}


def _kind_class(kind: str) -> int:
    """The class of a kind (``trusted`` works it out once per kind and call)."""
    if kind in _KIND_CLASSES:
        return _KIND_CLASSES[kind]
    if not _attempt_kind(kind):
        return _PASS
    if kind == "attempt.started":
        return _ATTEMPT_STARTED
    return _RESULT if kind in RESULT_KINDS else _ATTEMPT_ACTIVITY


def _bound_seqs(att_entry: Entry) -> frozenset[int] | None:
    att = att_entry.data.get("attestation")
    if not isinstance(att, dict):
        return None
    results = att.get("results")
    if not isinstance(results, dict):
        return None
    seqs = results.get("seqs")
    if not isinstance(seqs, list) or not all(type(s) is int for s in seqs):
        return frozenset()
    return frozenset(seqs)


_NEVER = 1 << 62


@dataclass
class _Structure:
    """Pass 1 of :func:`trusted`: the run's segments, its attempts' spans and attestations."""

    finished: list[int]  # every run.finished that closes an open segment, in seq order
    segments: list[tuple[int, int]]  # (open seq, close seq) of each run segment
    closed: list[tuple[int, int]]  # after each run.finished until the run.resumed that reopens it
    started: dict[str, int]  # each attempt's first attempt.started
    attestation: dict[str, Entry]  # each attempt's counted attestation
    # each started attempt's span: (its first attempt.started, the end of the span, the result
    # seqs its attestation binds or None)
    spans: dict[str, tuple[int, int, frozenset[int] | None]]

    def run_end(self, after: int) -> int:
        """The run.finished that ends the segment holding ``after`` (``_NEVER``: still open)."""
        for s in self.finished:
            if s > after:
                return s
        return _NEVER

    def in_segment(self, seq: int) -> bool:
        """Inside an open run segment (after run.started or run.resumed, before run.finished)."""
        return any(o < seq < c for o, c in self.segments)


def _structure(es: Sequence[Entry], run_id: str | None) -> _Structure:
    finished: list[int] = []
    segments: list[tuple[int, int]] = []
    prologues: list[tuple[int, int]] = []  # (run.finished, the run.resumed after it)
    resumed: list[int] = []
    started: dict[str, int] = {}
    attestations: list[Entry] = []  # every attestation entry of the run, in seq order
    open_at: int | None = None
    run_started = False
    for e in es:
        if e.run != run_id:
            continue
        k = e.kind
        if k == "run.started":
            if not run_started:
                run_started = True
                open_at = e.seq
        elif k == "run.resumed":
            resumed.append(e.seq)
            if open_at is None:
                if finished:
                    prologues.append((finished[-1], e.seq))
                open_at = e.seq
        elif k == "run.finished":
            if open_at is not None:
                finished.append(e.seq)
                segments.append((open_at, e.seq))
                open_at = None
        elif k == "attempt.started":
            a = e.data.get("attempt")
            if isinstance(a, str) and a not in started:
                started[a] = e.seq
        elif k == "attestation":
            attestations.append(e)
    if open_at is not None:
        segments.append((open_at, _NEVER))
    closed = [(f, next((r for r in resumed if r > f), _NEVER)) for f in finished]
    st = _Structure(finished, segments, closed, started, {}, {})
    for e in attestations:
        a = e.data.get("attempt")
        if isinstance(a, str) and a in started and a not in st.attestation:
            s = started[a]
            # between a run.finished and the run.resumed after it, ``--resume`` attests the
            # attempts the stopped coordinator left unattested
            if s < e.seq < st.run_end(s) or (s < e.seq and any(f < e.seq < r for f, r in prologues)):
                st.attestation[a] = e
    for a, s in started.items():
        att_e = st.attestation.get(a)
        st.spans[a] = ((s, att_e.seq, _bound_seqs(att_e)) if att_e is not None
                       else (s, st.run_end(s), None))
    return st


class _Placer:
    """Pass 2 of :func:`trusted`: whether each entry of the run sits where the structure puts it
    (``None``) or why not (the attempt it names, the reason)."""

    def __init__(self, st: _Structure) -> None:
        self.st = st
        self.finished_set = frozenset(st.finished)
        self.seen: set[tuple[Any, ...]] = set()
        self.judged: set[tuple[str, Any, Any]] = set()
        self.bench_views: dict[int, bool] = {}
        self.prev_kind: str | None = None  # the kind of the run's previous counted entry
        self.run_started_seen = False

    def attempt_entry(self, e: Entry, c: int) -> tuple[str | None, str] | None:
        d = e.data
        if "attempt" not in d:
            return None
        a = d["attempt"]
        if not isinstance(a, str):
            return None
        span = self.st.spans.get(a)
        if span is None:
            return a, "names an attempt that never started in this run"
        first_seq, end, b = span
        seq = e.seq
        if c == _ATTEMPT_STARTED:
            if seq != first_seq:
                return a, "a second attempt.started for the attempt"
        elif not first_seq < seq < end:
            return a, ("outside its attempt's span (after attempt.started, before its attestation "
                       "and the run's run.finished)")
        if c != _ATTEMPT_ACTIVITY:  # a result (attempt.started is one too)
            if b is not None and seq not in b:
                return a, "a result the attempt's signed attestation does not bind"
            key = _result_key(a, e)
            if key in self.seen:
                return a, "a second result of the same kind in the attempt's span"
            self.seen.add(key)
        return None

    def run_entry(self, e: Entry, c: int) -> tuple[str | None, str] | None:
        st = self.st
        if c == _RUN_STARTED:
            if self.run_started_seen:
                return None, "a second run.started for the run"
            self.run_started_seen = True
        elif c == _RUN_FINISHED:
            if e.seq not in self.finished_set:
                return None, ("run.finished outside an open run segment (not after run.started or "
                              "run.resumed)")
        elif c == _VIEW_RECORDED:
            if e.data.get("evaluator") == "bench":
                segment = next((o for o, close in st.closed if o < e.seq < close), None)
                if segment is not None or self.bench_views.get(st.run_end(e.seq)):
                    return None, "bench view.recorded after the run finished, or a second one"
                self.bench_views[st.run_end(e.seq)] = True
            elif self.prev_kind not in ("run.finished", "view.recorded"):
                return None, "view.recorded that does not directly follow the run's run.finished"
        elif c == _ATTESTATION:
            a = e.data.get("attempt")
            att_e = st.attestation.get(a) if isinstance(a, str) else None
            if att_e is None or att_e.seq != e.seq:
                return (a if isinstance(a, str) else None,
                        "attestation outside its attempt's span, or not the attempt's first")
        else:  # judge.verdict
            d = e.data
            a = d.get("attempt")
            jkey = (str(a), _hashable(d.get("judge")), _hashable(d.get("version")))
            if isinstance(a, str) and (a not in st.started or not st.started[a] < e.seq
                                       or not st.in_segment(e.seq) or jkey in self.judged):
                return a, "judge.verdict outside its attempt's run segment, or a second one by the same judge"
            self.judged.add(jkey)
        return None


def trusted(entries: Iterable[Entry], run_id: str | None = None) -> Trusted:
    """Split one run's entries (others are passed through untouched) into counted and injected.

    ``run_id`` None: the run of the first entry that names one.
    """
    es = entries if isinstance(entries, list | tuple) else list(entries)
    if run_id is None:
        run_id = next((e.run for e in es if e.run is not None), None)
    findings: list[Finding] = []
    kept = tuple(_placed(es, run_id, _structure(es, run_id), findings))
    return Trusted(kept, tuple(findings))


STRUCTURE_KINDS = frozenset({"run.started", "run.resumed", "run.finished", "view.recorded",
                             "attempt.started", "attestation"})
"""The kinds that make a run's structure (segments, spans, attestations) and name its recorded
views: the entries :func:`placed_stream` needs before the others stream past."""


def placed_stream(entries: Iterable[Entry], run_id: str, structure: Sequence[Entry],
                  findings: list[Finding]) -> Iterator[Entry]:
    """What ``trusted(entries, run_id)`` keeps of the run, as a stream that never holds it.

    ``structure``: the run's entries of ``STRUCTURE_KINDS`` (a separate, kind-filtered read of
    the same journal), from which the run's structure is made first; ``entries`` then stream
    through the placement once (other runs' entries are dropped: the fold would only count
    them); ``findings`` is filled as they go. The structural entries met on the way must be
    exactly those of ``structure`` (same seqs and bytes), or ``ValueError`` once the stream
    ends: a structure read from another state of the journal would misplace entries.
    """
    mine = [e for e in structure if e.run == run_id and e.kind in STRUCTURE_KINDS]
    return _placed(entries, run_id, _structure(mine, run_id), findings, mine)


def _placed(es: Iterable[Entry], run_id: str | None, st: _Structure, findings: list[Finding],
            mine: list[Entry] | None = None) -> Iterator[Entry]:
    """Pass 2: every entry that counts, in order; the others go to ``findings``. ``mine``: the
    run's entries of STRUCTURE_KINDS that the stream must hold (``placed_stream``); other runs'
    entries are then dropped instead of passed through."""
    placer = _Placer(st)
    classes: dict[str, int] = {}
    structural: dict[str, bool] = {}
    met: list[Entry] = []
    attempt_entry, run_entry = placer.attempt_entry, placer.run_entry
    spans, activity, others = placer.st.spans, _ATTEMPT_ACTIVITY, mine is None
    prev_kind: str | None = None
    for e in es:
        if e.run != run_id:
            if others:
                yield e
            continue
        k = e.kind
        c = classes.get(k)
        if c is None:
            c = classes[k] = _kind_class(k)
            structural[k] = not others and k in STRUCTURE_KINDS
        if c == activity:
            # most entries (reads, writes, tool calls): inside their attempt's span is all the
            # rule asks of them, checked here without a call (attempt_entry's first branch)
            a = e.data.get("attempt")
            span = spans.get(a) if type(a) is str else None
            if span is not None and span[0] < e.seq < span[1]:
                yield e
                prev_kind = k
                continue
        if structural[k]:
            met.append(e)
        if c >= _ATTEMPT_STARTED:  # the attempt kinds
            bad = attempt_entry(e, c)
        elif c == _PASS:
            bad = None
        else:
            placer.prev_kind = prev_kind
            bad = run_entry(e, c)
        if bad is not None:
            findings.append(Finding(e.seq, e.kind, e.run, bad[0], bad[1]))
            continue
        yield e
        prev_kind = k
    if mine is not None and [(e.seq, e.raw) for e in met] != [(e.seq, e.raw) for e in mine]:
        raise ValueError(f"run {run_id}: the structure entries given are not the run's "
                         f"({len(mine)} given, {len(met)} in the entries)")
