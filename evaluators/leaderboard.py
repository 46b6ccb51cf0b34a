"""The bench leaderboard as a pure projection of a bench run's journal entries.

    view = leaderboard_from_entries(journal.entries(run=run_id))   # dict, stable bytes
    result = replay_leaderboard(journal.entries(run=run_id), run_id)

No I/O, no clock, no model: the judges' answers are read back from ``bench.judge_raw`` entries and
parsed again (:func:`evaluators.bench_judge.parse_scores`), so ``ledger replay`` reproduces every score
from the log. The rules, also in docs/bench.md:

* code_composite = sum of the four 0-5 dimensions (0-20), the median over the jury's judges;
  quality = round(code_composite * 5); with the tests round, round((code + test) * 2.5), rounding
  half up. A tests round that failed or timed out counts 0 for tests; tests that ran but no judge
  scored leave the quality unknown (``unscored``), never zero.
* rank: quality desc, time asc, cost asc, name; rows without a quality come last, by name.
* status: ``timeout`` (real elapsed time shown, never scored), ``failed``, ``unscored`` (answered,
  but no judge scored it), ``scored``.
* self-eval: ``SELF_EVAL_SUMMARY: N/20`` (the last one), or the block form (one ``name: N/20``
  line per part, averaged); bias = self score - code_composite (positive = overconfident).
* review delta = revised composite - original composite (per round).
* time_s and cost_usd cover the agent's own rounds (code, revised code, tests, revised tests);
  reviews it wrote for other agents and judge calls are reported separately.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from evaluators.bench_judge import (
    DIMENSIONS,
    PASS_PRIMARY,
    ROUND_CODE,
    ROUND_CODE_REVISED,
    ROUND_TESTS,
    ROUND_TESTS_REVISED,
    call_verdicts,
    median_scores,
    swap_check,
)
from evaluators.responses import code_files, python_syntax_ok
from evaluators.views import diff_values, normalize

BENCH_EVALUATOR = "bench"
BENCH_VERSION = "1.0.0"
EXPORT_VERSION = "2.0"
EXCERPT_CHARS = 500
MAX_DIFFS = 100
OWN_ROUNDS = (ROUND_CODE, ROUND_CODE_REVISED, ROUND_TESTS, ROUND_TESTS_REVISED)
STATUSES = ("scored", "unscored", "failed", "timeout")
KNOWN_KINDS = frozenset({
    "run.started", "run.finished", "view.recorded", "bench.started", "bench.response",
    "bench.check", "bench.judge_prompt", "bench.judge_raw", "bench.verdict", "bench.review",
    "bench.tests", "bench.static", "bench.finished", "bench.activity",
})
# The v2.0 export: exactly the fields of the existing tool's schema, in its order.
EXPORT_FIELDS = ("version", "skill", "run_id", "timestamp", "project", "mode", "task_source",
                 "task_hash", "task_snapshot", "options", "providers_attempted",
                 "providers_succeeded", "scored", "leaderboard", "scorecards", "meta_judge_model",
                 "judge_presentation_order", "judge_input_truncated")
ROW_FIELDS = ("rank", "provider", "quality", "code_score", "test_score", "time_s", "cost_usd",
              "tokens_in", "tokens_out", "compile_ok", "tests_pass", "self_eval_bias",
              "adversarial_delta", "status")

_SELF_LINE = re.compile(r"SELF_EVAL_SUMMARY\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)\s*/\s*20\b")
_SELF_HEAD = re.compile(r"^\s*\**\s*SELF_EVAL_SUMMARY\s*\**\s*:?\s*$")
_SELF_PART = re.compile(r"^\s*[-*]?\s*([^:\n]{1,80}):\s*\**\s*(\d+(?:\.\d+)?)\s*/\s*20\b")


class EntryLike(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def ts(self) -> int: ...
    @property
    def run(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...


# ------------------------------------------------------------------------------- small rules

def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def quality(code: float | None, test: float | None = None, *, with_tests: bool = False) -> int | None:
    """0-100: round(code * 5), or round((code + test) * 2.5) when the tests round ran."""
    if code is None:
        return None
    if with_tests:
        if test is None:
            return None
        return round_half_up((code + test) * 2.5)
    return round_half_up(code * 5)


def parse_self_eval(text: str) -> float | None:
    """The agent's own score on 0-20, or None when it gave none (or an impossible one)."""
    found = _SELF_LINE.findall(text)
    if found:
        value = float(found[-1])
        return value if 0 <= value <= 20 else None
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if not _SELF_HEAD.match(lines[i]):
            continue
        parts: list[float] = []
        for line in lines[i + 1:]:
            if not line.strip() or line.strip().startswith("```"):
                if parts:
                    break
                continue
            m = _SELF_PART.match(line)
            if not m:
                break
            parts.append(float(m.group(2)))
        if parts and all(0 <= p <= 20 for p in parts):
            return statistics.fmean(parts)
        return None
    return None


def self_eval_bias(self_score: float | None, judge_score: float | None) -> float | None:
    if self_score is None or judge_score is None:
        return None
    return self_score - judge_score


def _num(x: float | None) -> float | int | None:
    """Integral values as int (18, not 18.0), others rounded to 6 places."""
    if x is None:
        return None
    if float(x).is_integer():
        return int(x)
    return round(float(x), 6)


def rank_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """quality desc, time asc, cost asc, name; rows without a quality last, by name."""
    q = row.get("quality")
    if q is None:
        return (1, 0, 0.0, 0.0, str(row["provider"]))
    t = row.get("time_s")
    c = row.get("cost_usd")
    return (0, -int(q), math.inf if t is None else float(t), math.inf if c is None else float(c),
            str(row["provider"]))


# ------------------------------------------------------------------------------- folding

class _State:
    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id
        self.started: dict[str, Any] | None = None
        self.started_ts: int | None = None
        self.responses: dict[tuple[str, str], dict[str, Any]] = {}
        self.checks: dict[tuple[str, str], dict[str, Any]] = {}
        self.tests: dict[tuple[str, str], dict[str, Any]] = {}
        self.static: dict[str, dict[str, Any]] = {}
        self.reviews: list[dict[str, Any]] = []
        self.prompts: dict[str, dict[str, Any]] = {}
        self.raws: dict[str, dict[str, Any]] = {}
        self.entries = 0
        self.unknown: dict[str, int] = {}
        self.malformed: dict[str, int] = {}


def _s(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise ValueError(key)
    return v


def _fold(state: _State, e: EntryLike) -> None:
    if state.run_id is None and e.run is not None and e.kind.startswith("bench."):
        state.run_id = e.run
    if e.run != state.run_id:
        return
    state.entries += 1
    d = e.data
    kind = e.kind
    if kind not in KNOWN_KINDS:
        state.unknown[kind] = state.unknown.get(kind, 0) + 1
        return
    try:
        if kind == "bench.started":
            state.started = dict(d)
            state.started_ts = e.ts
        elif kind == "bench.response":
            state.responses[(_s(d, "agent"), _s(d, "round"))] = dict(d)
        elif kind == "bench.check":
            state.checks[(_s(d, "agent"), _s(d, "round"))] = dict(d)
        elif kind == "bench.tests":
            state.tests[(_s(d, "agent"), _s(d, "round"))] = dict(d)
        elif kind == "bench.static":
            state.static[_s(d, "agent")] = dict(d)
        elif kind == "bench.review":
            _s(d, "author")
            state.reviews.append(dict(d))
        elif kind == "bench.judge_prompt":
            state.prompts[_s(d, "call")] = dict(d)
        elif kind == "bench.judge_raw":
            state.raws[_s(d, "call")] = dict(d)
    except ValueError:
        state.malformed[kind] = state.malformed.get(kind, 0) + 1


# ------------------------------------------------------------------------------- the view

def _iso(ts: int | None) -> str | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` of a journal timestamp (ns since the epoch, UTC), computed from
    the number alone (no datetime: evaluators import no clock); Hinnant's civil-from-days."""
    if ts is None:
        return None
    secs = ts // 1_000_000_000
    days, rem = divmod(secs, 86_400)
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return (f"{year:04d}-{month:02d}-{day:02d}T{rem // 3600:02d}:{rem % 3600 // 60:02d}:"
            f"{rem % 60:02d}Z")


def _sum(values: Iterable[float | int | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return math.fsum(vals) if vals else None


def _round_scores(verdicts: Sequence[Mapping[str, Any]], agent: str, round_name: str
                  ) -> tuple[dict[str, float] | None, list[str]]:
    mine = [v for v in verdicts if v["agent"] == agent and v["round"] == round_name
            and v["pass"] == PASS_PRIMARY]
    scored = [v["scores"] for v in mine if v["scores"] is not None]
    return median_scores(scored), sorted(str(v["judge"]) for v in mine if v["scores"] is not None)


def _composite(scores: Mapping[str, float] | None) -> float | None:
    return None if scores is None else math.fsum(scores[d] for d in DIMENSIONS)


def _delta(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _tests_pass(t: Mapping[str, Any] | None) -> bool | None:
    if t is None or not t.get("ran"):
        return None
    counts = t.get("counts") or {}
    bad = int(counts.get("failed", 0)) + int(counts.get("error", 0))
    return bad == 0 and int(counts.get("passed", 0)) > 0 and t.get("exit_code") == 0


def _agent_row(s: _State, agent: str, verdicts: Sequence[Mapping[str, Any]],
               with_tests: bool) -> dict[str, Any]:
    code = s.responses.get((agent, ROUND_CODE))
    code_scores, code_judges = _round_scores(verdicts, agent, ROUND_CODE)
    test_scores, _ = _round_scores(verdicts, agent, ROUND_TESTS)
    rev_scores, _ = _round_scores(verdicts, agent, ROUND_CODE_REVISED)
    trev_scores, _ = _round_scores(verdicts, agent, ROUND_TESTS_REVISED)
    code_c, test_c = _composite(code_scores), _composite(test_scores)
    notes: list[str] = []
    status, q = _status_and_quality(code, s.responses.get((agent, ROUND_TESTS)), code_c, test_c,
                                    with_tests, notes)
    own = [s.responses[(agent, r)] for r in OWN_ROUNDS if (agent, r) in s.responses]
    usage = _usage(own)
    text = str(code.get("text", "")) if code else ""
    self_score = parse_self_eval(text) if code and code.get("status") == "ok" else None
    files = code_files(text) if text else {}
    tests_row = s.tests.get((agent, ROUND_TESTS))
    check = s.checks.get((agent, ROUND_CODE))
    review_in = [r for r in s.reviews if r.get("author") == agent and r.get("round") == ROUND_CODE]
    return {
        "provider": agent,
        "status": status,
        "quality": q,
        "code_score": _num(code_c),
        "test_score": _num(test_c),
        "code_scores": {d: _num(v) for d, v in code_scores.items()} if code_scores else None,
        "test_scores": {d: _num(v) for d, v in test_scores.items()} if test_scores else None,
        "judges": code_judges,
        "time_s": usage["time_s"],
        "code_time_s": _num(code.get("wall_s")) if code else None,
        "timed_out": bool(code and code.get("status") == "timeout"),
        **{k: usage[k] for k in ("cost_usd", "cost_source", "tokens_in", "tokens_out",
                                 "tokens_estimated")},
        "compile_ok": python_syntax_ok(files) if files else None,
        "tests_pass": _tests_pass(tests_row),
        "tests_counts": (tests_row or {}).get("counts") if tests_row and tests_row.get("ran") else None,
        "check": ({"passed": check.get("passed"), "counts": check.get("counts"),
                   "missing_files": check.get("missing_files", [])} if check else None),
        "self_eval": _num(self_score),
        "self_eval_bias": _num(self_eval_bias(self_score, code_c)),
        "adversarial_delta": _num(_delta(_composite(rev_scores), code_c)),
        "test_adversarial_delta": _num(_delta(_composite(trev_scores), test_c)),
        "reviews_received": len([r for r in review_in if r.get("status") == "ok"]),
        "static": (s.static.get(agent) or {}).get("checks"),
        "exit_code": code.get("exit_code") if code else None,
        "error": code.get("error") if code else None,
        "notes": notes,
        "excerpt": text[:EXCERPT_CHARS],
    }


def _status_and_quality(code: Mapping[str, Any] | None, tests_resp: Mapping[str, Any] | None,
                        code_c: float | None, test_c: float | None, with_tests: bool,
                        notes: list[str]) -> tuple[str, int | None]:
    """An agent's status (scored, unscored, timeout, failed) and quality; why, in ``notes``."""
    if code is None:
        notes.append("no response was recorded")
        return "failed", None
    if code.get("status") == "timeout":
        return "timeout", None
    if code.get("status") != "ok":
        return "failed", None
    if code_c is None:
        return "unscored", None
    if not with_tests:
        return "scored", quality(code_c)
    if tests_resp is None or tests_resp.get("status") != "ok":
        notes.append("the tests round did not answer; tests count 0")
        return "scored", quality(code_c, 0.0, with_tests=True)
    if test_c is None:
        notes.append("no judge scored the tests")
        return "unscored", None
    return "scored", quality(code_c, test_c, with_tests=True)


def _usage(own: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Time, cost and tokens summed over an agent's own rounds, and where the figures came from."""
    cost_sources = sorted({str(r.get("cost_source", "none")) for r in own})
    tin = _sum(r.get("tokens_in") for r in own)
    tout = _sum(r.get("tokens_out") for r in own)
    return {
        "time_s": _num(_sum(r.get("wall_s") for r in own)),
        "cost_usd": _num(_sum(r.get("cost_usd") for r in own)),
        "cost_source": "none" if not own else ("mixed" if len(cost_sources) > 1 else cost_sources[0]),
        "tokens_in": None if tin is None else int(tin),
        "tokens_out": None if tout is None else int(tout),
        "tokens_estimated": any(r.get("tokens_source") == "estimated" for r in own),
    }


def _scorecard(row: Mapping[str, Any]) -> dict[str, Any]:
    card: dict[str, Any] = {}
    for prefix, key, comp in (("code", "code_scores", "code_score"),
                              ("test", "test_scores", "test_score")):
        scores = row.get(key) or {}
        for d in DIMENSIONS:
            card[f"{prefix}_{d}"] = scores.get(d)
        card[f"{prefix}_composite"] = row.get(comp)
    card["adversarial_delta"] = row["adversarial_delta"]
    card["test_adversarial_delta"] = row["test_adversarial_delta"]
    card["self_eval_bias"] = row["self_eval_bias"]
    card["response_excerpt"] = row["excerpt"]
    return card


def _judge_label(started: Mapping[str, Any], prompts: Mapping[str, Mapping[str, Any]],
                 raws: Mapping[str, Mapping[str, Any]]) -> str:
    judges = [j for j in started.get("judges", []) if isinstance(j, dict)]
    if started.get("judge_fallback") or any(j.get("name") == "offline" for j in judges):
        return "offline (deterministic fallback: no model judge available)"
    models: dict[str, str] = {}
    for call, raw in raws.items():
        judge = str(prompts.get(call, {}).get("judge", raw.get("judge", "")))
        if raw.get("model") and judge not in models:
            models[judge] = str(raw["model"])
    names = [str(j.get("name")) for j in judges]
    label = ", ".join(f"{n} ({models[n]})" if n in models else n for n in names)
    if len(names) > 1:
        label += " (jury, median; family rule)"
    elif names:
        label += " (family rule)"
    return label or "none"


def leaderboard_from_entries(entries: Iterable[EntryLike]) -> dict[str, Any]:
    """The whole bench view of one run (the run of the first ``bench.*`` entry).

    Contains ``rows`` (every column, ranked), ``export`` (the v2.0 object of the existing tool),
    the judges' per-response verdicts, the order-swap check and entry counts.
    """
    s = _State(None)
    for e in entries:
        _fold(s, e)
    return leaderboard_view(s)


def new_leaderboard_state(run_id: str | None = None) -> _State:
    """An empty fold state (``run_id`` None: the run of the first ``bench.*`` entry)."""
    return _State(run_id)


def fold_leaderboard(state: _State, entry: EntryLike) -> _State:
    """Add one entry to ``state`` (in place) and return it."""
    _fold(state, entry)
    return state


def leaderboard_view(s: _State) -> dict[str, Any]:
    """The bench view of a folded state (see :func:`leaderboard_from_entries`)."""
    started = s.started or {}
    options = dict(started.get("options") or {})
    with_tests = bool(options.get("with_tests"))
    calls = sorted(s.prompts)
    verdicts: list[dict[str, Any]] = []
    for call in calls:
        verdicts.extend(call_verdicts(s.prompts[call], s.raws.get(call)))
    agents = [str(a.get("name")) for a in started.get("agents", []) if isinstance(a, dict)]
    for agent, _round in sorted(s.responses):
        if agent not in agents:
            agents.append(agent)
    rows = [_agent_row(s, a, verdicts, with_tests) for a in agents]
    rows.sort(key=rank_key)
    for i, row in enumerate(rows, 1):
        row["rank"] = i
    succeeded = [r["provider"] for r in rows if r["status"] in ("scored", "unscored")]
    scored = [r["provider"] for r in rows if r["status"] == "scored"]
    if not rows or not succeeded:
        verdict = "FAIL"
    elif not scored:
        verdict = "UNSCORED"
    elif len(scored) == len(rows):
        verdict = "PASS"
    else:
        verdict = "PARTIAL"
    primary_code = [s.prompts[c] for c in calls if s.prompts[c].get("round") == ROUND_CODE
                    and s.prompts[c].get("pass") == PASS_PRIMARY]
    truncated = any(any(bool(v) for v in (p.get("truncated") or {}).values())
                    for p in s.prompts.values())
    export = {
        "version": EXPORT_VERSION,
        "skill": "benchmark",
        "run_id": s.run_id,
        "timestamp": _iso(s.started_ts),
        "project": started.get("project"),
        "mode": started.get("mode"),
        "task_source": started.get("task_source"),
        "task_hash": started.get("task_hash"),
        "task_snapshot": started.get("task_snapshot"),
        "options": {k: bool(options.get(k)) for k in
                    ("with_tests", "with_adversarial", "with_test_adversarial", "with_static_checks")},
        "providers_attempted": list(agents),
        "providers_succeeded": [a for a in agents if a in succeeded],
        "scored": [a for a in agents if a in scored],
        "leaderboard": [{k: r[k] for k in ROW_FIELDS} for r in rows],
        "scorecards": {r["provider"]: _scorecard(r) for r in sorted(rows, key=lambda r: r["provider"])},
        "meta_judge_model": _judge_label(started, s.prompts, s.raws),
        "judge_presentation_order": list(primary_code[0].get("order") or []) if primary_code else [],
        "judge_input_truncated": truncated,
    }
    biases = [r["self_eval_bias"] for r in rows if r["self_eval_bias"] is not None]
    judge_calls = []
    for call in calls:
        p, raw = s.prompts[call], s.raws.get(call, {})
        judge_calls.append({
            "call": call, "judge": p.get("judge"), "round": p.get("round"), "pass": p.get("pass"),
            "order": p.get("order"), "labels": p.get("labels"), "truncated": p.get("truncated"),
            "status": raw.get("status", "missing"), "wall_s": raw.get("wall_s"),
            "cost_usd": raw.get("cost_usd"),
            "unscored": [v["agent"] for v in verdicts if v["call"] == call and v["scores"] is None],
        })
    review_cost = _sum(r.get("cost_usd") for r in s.reviews)
    judge_cost = _sum(r.get("cost_usd") for r in s.raws.values())
    out = {
        "evaluator": {"name": BENCH_EVALUATOR, "version": BENCH_VERSION},
        "run_id": s.run_id,
        "verdict": verdict,
        "counts": {"attempted": len(rows), "succeeded": len(succeeded), "scored": len(scored),
                   **{st: sum(1 for r in rows if r["status"] == st) for st in STATUSES}},
        "rows": rows,
        "export": export,
        "judging": {
            "judges": started.get("judges", []),
            "fallback": bool(started.get("judge_fallback")),
            "seed": started.get("seed"),
            "calls": judge_calls,
            "verdicts": verdicts,
            "unscored": sum(1 for v in verdicts if v["scores"] is None),
        },
        "swap": swap_check(verdicts),
        "self_eval_bias_range": [min(biases), max(biases)] if biases else None,
        "costs": {"agents": _sum(r["cost_usd"] for r in rows), "reviews": review_cost,
                  "judges": judge_cost},
        "entries": {"total": s.entries, "unknown": dict(sorted(s.unknown.items())),
                    "malformed": dict(sorted(s.malformed.items()))},
    }
    result: dict[str, Any] = normalize(out)
    return result


def export_v2(view: Mapping[str, Any]) -> dict[str, Any]:
    """The v2.0 object (``--json`` and the ``.json`` report file), fields in the schema's order."""
    exp = view["export"]
    out = {k: exp[k] for k in EXPORT_FIELDS}
    out["leaderboard"] = [{k: row[k] for k in ROW_FIELDS} for row in exp["leaderboard"]]
    return out


def replay_leaderboard(entries: Iterable[EntryLike], run_id: str) -> dict[str, Any]:
    """Recompute each recorded bench view from the entries before it and compare field by field.

    Returns ``{"run_id", "reproduced", "views": [{"seq", "diff_count", "diffs"}], "message"}``;
    ``reproduced`` is True when at least one bench view was recorded and all of them match.
    """
    seen: list[EntryLike] = []
    views: list[dict[str, Any]] = []
    for e in entries:
        if e.run != run_id:
            continue
        if e.kind == "view.recorded" and e.data.get("evaluator") == BENCH_EVALUATOR:
            computed = leaderboard_from_entries(seen)
            diffs = diff_values(e.data.get("view"), computed)
            views.append({"seq": e.seq, "version": e.data.get("version"),
                          "diff_count": len(diffs),
                          "diffs": [d.as_dict() for d in diffs[:MAX_DIFFS]]})
        seen.append(e)
    if not views:
        message, ok = f"run {run_id} recorded no bench view to compare with", False
    elif all(v["diff_count"] == 0 for v in views):
        message, ok = f"reproduced: the bench leaderboard of run {run_id} recomputed identically", True
    else:
        bad = sum(int(v["diff_count"]) for v in views)
        message, ok = f"not reproduced: {bad} field(s) of the bench view differ in run {run_id}", False
    return {"run_id": run_id, "reproduced": ok, "views": views, "message": message}


__all__ = [
    "BENCH_EVALUATOR", "BENCH_VERSION", "EXPORT_FIELDS", "ROW_FIELDS", "export_v2",
    "leaderboard_from_entries", "parse_self_eval", "quality", "rank_key", "replay_leaderboard",
    "round_half_up", "self_eval_bias",
]
