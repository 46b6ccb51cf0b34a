"""What a reader of one run can look at: the typed model ``ledger view`` and the exports map from.

    report = explore(entries, run_id, checkpoint=..., views=compute_views(...))

Pure: entries and values in, frozen dataclasses out. One pass over the run's entries collects,
per attempt, the prompt as given to the agent, the transcript (tool calls and results, model
turns, agent output), the diff, per-test outcomes, signals, the attestation with its evidence and
a timeline of every entry; beside them the golden views (``evaluators.views``), the cost frontier,
paired comparisons of agents that ran the same tasks (``evaluators.compare.paired``) and the run's
content digest (``content_digest``), which tells two reports apart.

Event times: an entry's ``ts`` is when the journal appended it; attempt entries written since
journal data format "capture times" also carry ``at`` (unix ns when the worker captured the
event, docs/VOCABULARY.md). The timeline shows ``at`` where present and ``ts`` otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from evaluators.compare import paired
from evaluators.fold import parse_attempt_id
from ledger.journal.codec import Entry

TEXT_LIMIT = 4000  # characters of one transcript item or timeline summary shown
SUMMARY_LIMIT = 160
TRANSCRIPT_KINDS = frozenset({"tool.call", "tool.result", "agent.output", "model.request",
                              "model.response", "agent.message"})


class TimelineEvent(NamedTuple):
    """One entry of an attempt, as a line of its timeline (a NamedTuple: one per entry)."""

    seq: int
    ts: int  # append time, unix ns
    at: int | None  # capture time, unix ns, when recorded
    kind: str
    summary: str

    @property
    def when(self) -> int:
        return self.at if self.at is not None else self.ts


@dataclass(frozen=True)
class TranscriptItem:
    """One step the agent took or saw: a tool call, its result, a model turn, its output."""

    seq: int
    kind: str  # the entry kind
    role: str  # "assistant" (calls, model responses), "tool" (results), "user", "output"
    tool: str | None
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class TestOutcome:
    suite: str  # "hidden" or "regression"
    id: str
    outcome: str
    message: str


@dataclass(frozen=True)
class SignalOutcome:
    index: int
    passed: bool
    detail: str


@dataclass(frozen=True)
class AttestationSummary:
    """The attempt's clean-run attestation and the evidence a reader needs to judge it."""

    hash: str
    verdict: str
    isolation: str
    matches: tuple[dict[str, Any], ...]
    match_count: int
    scope: dict[str, Any]
    observation: dict[str, Any]
    checkpoint_size: int | None
    activity_count: int | None
    activity_digest: str | None
    seq: int


@dataclass(frozen=True)
class ModelTurn:
    """One model call of the HTTP agent: what it asked (the request's new messages), the model it
    named and the one that answered, what came back, and the usage the server reported."""

    seq: int  # the model.response entry
    step: int | None
    requested_model: str | None
    model: str | None
    input: tuple[tuple[str, str], ...]  # (role, content) of the messages this request added
    content: str
    tool_calls: tuple[tuple[str, str, str], ...]  # (id, function name, arguments as sent)
    finish_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    latency_s: float | None
    error: str | None


@dataclass
class AttemptDetail:
    """Everything recorded about one attempt, for its page section and its exports."""

    attempt: str
    task: str | None = None
    agent: str | None = None
    repeat: int | None = None
    try_no: int | None = None
    first_ts: int | None = None
    last_ts: int | None = None
    started_at: int | None = None  # agent.started capture (or append) time
    finished_at: int | None = None  # agent.finished capture (or append) time
    prompt: str | None = None
    exit_code: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_source: str | None = None
    diff_recorded: bool = False
    patch: str = ""
    patch_truncated: bool = False
    diff_files: list[tuple[str, str, int, int]] = field(default_factory=list)
    tests: list[TestOutcome] = field(default_factory=list)
    test_commands: dict[str, list[str]] = field(default_factory=dict)
    signals: list[SignalOutcome] = field(default_factory=list)
    attestation: AttestationSummary | None = None
    transcript: list[TranscriptItem] = field(default_factory=list)
    timeline: list[TimelineEvent] = field(default_factory=list)
    activity: dict[str, int] = field(default_factory=dict)  # fs.read, fs.write, proc.exec, ...
    golden: float | None = None  # the golden score of this attempt alone (scored attempts only)
    model_turns: list[ModelTurn] = field(default_factory=list)  # the HTTP agent's model calls
    _request: Mapping[str, Any] | None = None  # the last model.request, until its response

    @property
    def diff_sha256(self) -> str | None:
        """SHA-256 of the patch text as recorded (UTF-8); None when no diff was recorded."""
        if not self.diff_recorded:
            return None
        return hashlib.sha256(self.patch.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FrontierPoint:
    agent: str
    score: float
    cost_usd: float
    attempts: int
    on_frontier: bool  # no other agent scores at least as high for less


@dataclass(frozen=True)
class RunReport:
    """One run as ``ledger view`` shows it and ``ledger export --format inspect`` writes it."""

    run_id: str
    views: dict[str, Any]  # evaluators.views.compute_views of the same entries
    attempts: dict[str, AttemptDetail]
    content_digest: str
    entry_count: int
    first_ts: int | None
    last_ts: int | None
    last_seq: int | None
    checkpoint: dict[str, Any] | None
    task_hashes: dict[str, str]
    frontier: tuple[FrontierPoint, ...]
    pairs: tuple[dict[str, Any], ...]
    bench: dict[str, Any] | None = None
    harness_version: str | None = None
    tiers: dict[str, dict[str, Any]] = field(default_factory=dict)
    agent_repeats: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the statistics view of the same entries (evaluators/stats_view.py): the viewer's comparison
    stats: dict[str, Any] | None = None


def content_digest(leaf_hashes: Iterable[bytes]) -> str:
    """SHA-256 over the run's leaf hashes (RFC 6962, in seq order): the report's fingerprint."""
    h = hashlib.sha256(b"eval-ledger/run-content/v1\x00")
    for leaf in leaf_hashes:
        h.update(leaf)
    return h.hexdigest()


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text) - limit} more characters)"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, list | tuple):
        return " ".join(_text(v) for v in value)
    return "" if value is None else str(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _summary(kind: str, d: Mapping[str, Any]) -> str:
    """One short line per entry kind (paths, commands, outcomes; never long content)."""
    if kind in ("fs.read", "fs.write"):
        return _text(d.get("resolved") or d.get("path"))
    if kind == "proc.exec":
        return _text(d.get("argv") or d.get("path"))
    if kind == "net.connect":
        return f"{_text(d.get('host'))}:{_text(d.get('port'))}"
    if kind == "tool.call":
        return f"{_text(d.get('tool'))}: {_text(d.get('input'))}"
    if kind == "tool.result":
        return f"{_text(d.get('tool'))}{' (error)' if d.get('is_error') else ''}: {_text(d.get('output'))}"
    if kind == "agent.output":
        return f"{_text(d.get('stream'))}: {_text(d.get('text'))}"
    if kind == "agent.finished":
        return (f"exit {_text(d.get('exit_code'))}, {_text(d.get('wall_s'))} s"
                + (", timed out" if d.get("timed_out") else ""))
    if kind in ("test.result", "test.baseline"):
        counts = _map(d.get("counts"))
        return (f"{_text(d.get('suite'))}: {'passed' if d.get('passed') else 'failed'} "
                + " ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v))
    if kind == "signal.result":
        return f"signal {_text(d.get('index'))}: {'passed' if d.get('passed') else 'failed'}"
    if kind == "diff":
        files = d.get("files")
        return f"{len(files) if isinstance(files, list) else 0} file(s) changed"
    if kind == "attestation":
        att = _map(d.get("attestation"))
        return f"{_text(att.get('verdict'))} {_text(d.get('hash'))[:16]}"
    if kind == "attempt.finished":
        return _text(d.get("status")) + (f": {_text(d.get('error'))}" if d.get("error") else "")
    if kind == "attempt.started":
        return f"agent {_text(d.get('agent'))}, repeat {_text(d.get('repeat'))}"
    if kind in ("model.request", "model.response"):
        return _text(d.get("model") or d.get("status") or "")
    return ""


def _attestation(entry: Entry) -> AttestationSummary | None:
    att = entry.data.get("attestation")
    if not isinstance(att, Mapping):
        return None
    cp = _map(att.get("checkpoint"))
    act = _map(att.get("activity"))
    scope = _map(att.get("scope"))
    obs = _map(att.get("observation"))
    isolation = att.get("isolation")
    if isinstance(isolation, Mapping):
        isolation = isolation.get("mode") or isolation.get("kind")
    matches = tuple(
        {k: m.get(k) for k in ("seq", "class", "kind", "detail", "digest_count")}
        for m in att.get("matches") or [] if isinstance(m, Mapping))
    return AttestationSummary(
        hash=_text(entry.data.get("hash")), verdict=_text(att.get("verdict")),
        isolation=_text(isolation) if isolation else "none recorded",
        matches=matches, match_count=_int(att.get("match_count")) or 0,
        scope=dict(scope), observation=dict(obs), checkpoint_size=_int(cp.get("size")),
        activity_count=_int(act.get("count")), activity_digest=_text(act.get("digest")) or None,
        seq=entry.seq)


def _model_text(kind: str, d: Mapping[str, Any]) -> str:
    """A model turn as text: the response's content and the tools it calls; the request's new
    messages one per line (``model.request`` / ``model.response`` of the HTTP agent)."""
    if kind == "model.response":
        msg = _map(d.get("message"))
        lines = [_text(msg.get("content"))] if msg.get("content") else []
        for call in msg.get("tool_calls") or []:
            fn = _map(_map(call).get("function"))
            lines.append(f"-> {_text(fn.get('name'))}({_text(fn.get('arguments'))})")
        if d.get("error"):
            lines.append(f"error: {_text(d.get('error'))}")
        return "\n".join(lines)
    if kind == "model.request":
        return "\n".join(f"{_text(_map(m).get('role'))}: {_text(_map(m).get('content'))}"
                         for m in d.get("messages") or [])
    for key in ("text", "content", "message"):
        if key in d:
            return _text(d[key])
    return ""


def _model_turn(seq: int, request: Mapping[str, Any], d: Mapping[str, Any]) -> ModelTurn:
    msg = _map(d.get("message"))
    usage = _map(d.get("usage"))
    calls = []
    for call in msg.get("tool_calls") or []:
        c = _map(call)
        fn = _map(c.get("function"))
        calls.append((_text(c.get("id")), _text(fn.get("name")), _clip(_text(fn.get("arguments")))))
    latency = d.get("latency_s")
    return ModelTurn(
        seq=seq, step=_int(d.get("step")), requested_model=_text(request.get("model")) or None,
        model=_text(d.get("model")) or None,
        input=tuple((_text(_map(m).get("role")) or "user", _clip(_text(_map(m).get("content"))))
                    for m in request.get("messages") or []),
        content=_clip(_text(msg.get("content"))), tool_calls=tuple(calls),
        finish_reason=_text(d.get("finish_reason")) or None,
        input_tokens=_int(usage.get("prompt_tokens")), output_tokens=_int(usage.get("completion_tokens")),
        latency_s=float(latency) if isinstance(latency, int | float) else None,
        error=_text(d.get("error")) or None)


_FS_KINDS = frozenset({"fs.read", "fs.write"})
_ACTIVITY_KINDS = frozenset({"fs.read", "fs.write", "proc.exec", "net.connect", "net.response"})


def _on_entry(a: AttemptDetail, e: Entry) -> None:
    d = e.data
    kind = e.kind
    at = d.get("at")
    if type(at) is not int:
        at = None
    when = at or e.ts
    if a.first_ts is None:
        a.first_ts = when
    a.last_ts = when
    if kind in _FS_KINDS:  # the bulk of a traced attempt: the short path
        path = d.get("resolved") or d.get("path")
        summary = path if type(path) is str else _text(path)
        if len(summary) > SUMMARY_LIMIT:
            summary = _clip(summary, SUMMARY_LIMIT)
        a.timeline.append(TimelineEvent(e.seq, e.ts, at, kind, summary))
        a.activity[kind] = a.activity.get(kind, 0) + 1
        return
    a.timeline.append(TimelineEvent(e.seq, e.ts, at, kind, _clip(_summary(kind, d), SUMMARY_LIMIT)))
    if kind in _ACTIVITY_KINDS:
        a.activity[kind] = a.activity.get(kind, 0) + 1
    if kind in TRANSCRIPT_KINDS:
        if kind == "tool.call":
            a.transcript.append(TranscriptItem(e.seq, kind, "assistant", _text(d.get("tool")) or None,
                                               _clip(_text(d.get("input")))))
        elif kind == "tool.result":
            a.transcript.append(TranscriptItem(e.seq, kind, "tool", _text(d.get("tool")) or None,
                                               _clip(_text(d.get("output"))), bool(d.get("is_error"))))
        elif kind == "agent.output":
            role = "assistant" if d.get("role") == "assistant" else "output"
            a.transcript.append(TranscriptItem(e.seq, kind, role, _text(d.get("stream")) or None,
                                               _clip(_text(d.get("text")))))
        elif kind == "model.request":
            a.transcript.append(TranscriptItem(e.seq, kind, "user", None,
                                               _clip(_model_text(kind, d))))
            a._request = d
        else:
            a.transcript.append(TranscriptItem(e.seq, kind, "assistant", None,
                                               _clip(_model_text(kind, d))))
            if kind == "model.response":
                a.model_turns.append(_model_turn(e.seq, a._request or {}, d))
        return
    if kind == "attempt.started":
        a.agent = _text(d.get("agent")) or a.agent
        a.repeat = _int(d.get("repeat")) if _int(d.get("repeat")) is not None else a.repeat
        a.try_no = _int(d.get("try")) if _int(d.get("try")) is not None else a.try_no
    elif kind == "agent.started":
        a.started_at = at or e.ts
        prompt = d.get("prompt")
        if isinstance(prompt, str):
            a.prompt = prompt
    elif kind == "agent.finished":
        a.finished_at = at or e.ts
        a.exit_code = _int(d.get("exit_code"))
        a.tokens_in = _int(d.get("tokens_in"))
        a.tokens_out = _int(d.get("tokens_out"))
        a.cost_source = _text(d.get("cost_source")) or None
    elif kind == "diff":
        a.diff_recorded = True
        a.patch = _text(d.get("patch"))
        a.patch_truncated = bool(d.get("truncated"))
        a.diff_files = [(_text(f.get("path")), _text(f.get("status")), _int(f.get("added")) or 0,
                         _int(f.get("removed")) or 0)
                        for f in d.get("files") or [] if isinstance(f, Mapping)]
    elif kind == "test.result":
        suite = _text(d.get("suite"))
        a.tests = [t for t in a.tests if t.suite != suite]
        for t in d.get("tests") or []:
            if isinstance(t, Mapping):
                a.tests.append(TestOutcome(suite, _text(t.get("id")), _text(t.get("outcome")),
                                           _text(t.get("message"))))
        command = d.get("command")
        if isinstance(command, list):
            a.test_commands[suite] = [_text(c) for c in command]
    elif kind == "signal.result":
        index = _int(d.get("index"))
        if index is not None:
            a.signals = [s for s in a.signals if s.index != index]
            a.signals.append(SignalOutcome(index, d.get("passed") is True, _text(d.get("detail"))))
    elif kind == "attestation":
        a.attestation = _attestation(e)


def _frontier(per_agent: Mapping[str, Any]) -> tuple[FrontierPoint, ...]:
    rows = []
    for agent, r in sorted(per_agent.items()):
        score = r.get("score")
        cost = r.get("cost_total")
        if isinstance(score, int | float) and isinstance(cost, int | float):
            rows.append((agent, float(score), float(cost), int(r.get("attempts") or 0)))
    out = []
    for agent, score, cost, n in rows:
        dominated = any((s2 >= score and c2 < cost) or (s2 > score and c2 <= cost)
                        for a2, s2, c2, _ in rows if a2 != agent)
        out.append(FrontierPoint(agent, score, cost, n, not dominated))
    return tuple(out)


def _pairs(views: Mapping[str, Any], seed: int) -> tuple[dict[str, Any], ...]:
    """A paired comparison for every two agents of the run that share tasks (B - A)."""
    agents = sorted(views.get("per_agent", {}))
    rows = views.get("attempts", [])
    out = []
    for i, a in enumerate(agents):
        for b in agents[i + 1:]:
            xa = [r for r in rows if r.get("agent") == a]
            xb = [r for r in rows if r.get("agent") == b]
            result = paired(xa, xb, seed=seed)
            if result["tasks"]:
                out.append({"a": a, "b": b, **result})
    return tuple(out)


@dataclass(frozen=True)
class ReportFold:
    """What one fold of the run gives the report beside the golden views."""

    views: dict[str, Any]
    scores: dict[str, float]  # attempt -> its golden score alone
    tiers: dict[str, dict[str, Any]]  # tier -> {attempts, score, components}
    agent_repeats: dict[str, dict[str, Any]]  # agent -> {count, mean, stderr, pass_at_k}


def fold_report(entries: Iterable[Entry], run_id: str) -> ReportFold:
    """The run's views, each attempt's golden score, score and components per tier, and the
    spread across repeats per agent (mean, standard error, pass@k), in one fold."""
    from evaluators import score as sc
    from evaluators.facts import facts_of
    from evaluators.fold import fold_all, new_state
    from evaluators.views import ROUND_DIGITS, _repeats, normalize, view

    state = fold_all(entries, new_state(run_id))
    scored, _ = facts_of(state)
    by_tier: dict[str, list[Any]] = {}
    by_agent: dict[str, list[Any]] = {}
    for f in scored:
        by_tier.setdefault(f.tier or "unknown", []).append(f)
        by_agent.setdefault(f.agent or "unknown", []).append(f)
    tiers = {}
    for tier, fs in by_tier.items():
        comps = sc.components(fs)
        tiers[tier] = {"attempts": len(fs), "score": sc.golden(comps), "components": comps}
    agents = {agent: _repeats(fs) for agent, fs in by_agent.items()}
    return ReportFold(
        views=view(state),
        scores={f.attempt: round(sc.golden(sc.components([f])), ROUND_DIGITS) for f in scored},
        tiers=normalize(tiers), agent_repeats=normalize(agents))


def explore(entries: Iterable[Entry], run_id: str, *, views: Mapping[str, Any],
            checkpoint: Mapping[str, Any] | None = None, bench: Mapping[str, Any] | None = None,
            seed: int = 0, folded: ReportFold | None = None) -> RunReport:
    """The model of one run (its entries, in seq order; entries of other runs are skipped).

    ``folded`` (``fold_report`` of the same entries) adds each attempt's golden score, the
    per-tier scores and the per-agent spread across repeats.
    """
    attempts: dict[str, AttemptDetail] = {}
    leaves: list[bytes] = []
    first_ts = last_ts = last_seq = None
    task_hashes: dict[str, str] = {}
    harness = None
    count = 0
    last: AttemptDetail | None = None
    for e in entries:
        if e.run != run_id:
            continue
        count += 1
        leaves.append(e.leaf_hash)
        first_ts = e.ts if first_ts is None else first_ts
        last_ts, last_seq = e.ts, e.seq
        if e.kind == "run.started":
            harness = _text(e.data.get("harness_version")) or None
            for t in e.data.get("tasks") or []:
                if isinstance(t, Mapping) and isinstance(t.get("id"), str) and isinstance(
                        t.get("hash"), str):
                    task_hashes[t["id"]] = t["hash"]
        attempt_id = e.data.get("attempt")
        if not isinstance(attempt_id, str) or e.kind == "run.resumed":
            continue
        if last is None or last.attempt != attempt_id:
            last = attempts.get(attempt_id)
            if last is None:
                last = AttemptDetail(attempt=attempt_id, task=e.task)
                parsed = parse_attempt_id(attempt_id)
                if parsed is not None:
                    _, task, last.agent, last.repeat, last.try_no = parsed
                    last.task = last.task or task
                attempts[attempt_id] = last
        _on_entry(last, e)
    for attempt_id, value in (folded.scores if folded else {}).items():
        if attempt_id in attempts:
            attempts[attempt_id].golden = value
    return RunReport(
        run_id=run_id, views=dict(views), attempts=attempts, content_digest=content_digest(leaves),
        entry_count=count, first_ts=first_ts, last_ts=last_ts, last_seq=last_seq,
        checkpoint=dict(checkpoint) if checkpoint is not None else None, task_hashes=task_hashes,
        frontier=_frontier(views.get("per_agent", {})), pairs=_pairs(views, seed),
        bench=dict(bench) if bench is not None else None, harness_version=harness,
        tiers=dict(folded.tiers) if folded else {},
        agent_repeats=dict(folded.agent_repeats) if folded else {})


def explore_attempt_patch(diff_entries: Iterable[Entry]) -> AttemptDetail:
    """The diff of one attempt from its ``diff`` entries (the last one wins), for the DSSE export."""
    detail = AttemptDetail(attempt="")
    for e in diff_entries:
        detail.attempt = _text(e.data.get("attempt"))
        _on_entry(detail, e)
    return detail
