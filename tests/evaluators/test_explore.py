"""The report model (evaluators.explore) and the paired bootstrap (evaluators.compare.paired)."""

from __future__ import annotations

from evaluators.compare import paired
from evaluators.explore import content_digest, explore
from evaluators.views import compute_views
from ledger.journal.codec import Entry
from tests.view.fixtures import HOSTILE, PATCH, RUN, build


def _entries(b) -> list[Entry]:  # type: ignore[no-untyped-def]
    return list(b.entries)


def test_attempt_detail_collects_diff_tests_transcript_and_verdict() -> None:
    """Every attempt has its patch, per-test outcomes, tool calls/results, verdict and timeline."""
    entries = _entries(build())
    r = explore(entries, RUN, views=compute_views(entries, RUN))
    assert len(r.attempts) == 12 and r.entry_count == len(entries)
    d = r.attempts[f"{RUN}/t1/beta/1/1"]
    assert d.patch == PATCH and d.diff_files == [("src/calc.py", "modified", 3, 1)]
    assert {t.outcome for t in d.tests if t.suite == "hidden"} == {"passed", "failed"}
    assert [t.kind for t in d.transcript] == ["tool.call", "tool.result"]
    assert HOSTILE in d.transcript[0].text
    assert d.attestation is not None and d.attestation.verdict == "DIRTY"
    assert [e.seq for e in d.timeline] == sorted(e.seq for e in d.timeline)
    assert d.tokens_in == 100 and d.tokens_out == 50


def test_capture_time_and_prompt_are_read_when_recorded() -> None:
    """An entry's ``at`` is its timeline time (not the append ts); agent.started's prompt is kept."""
    b = build(tasks=1, repeats=1, agents=("alpha",))
    entries = []
    for e in b.entries:
        if e.kind == "agent.started":
            e = e._replace(data={**e.data, "prompt": "Fix the bug.", "at": 123})
        entries.append(e)
    r = explore(entries, RUN, views=compute_views(entries, RUN))
    d = next(iter(r.attempts.values()))
    assert d.prompt == "Fix the bug." and d.started_at == 123
    started = next(t for t in d.timeline if t.kind == "agent.started")
    assert started.when == 123 and started.ts != 123


def test_content_digest_changes_with_any_entry() -> None:
    """Two runs that differ in one entry byte have different content digests."""
    entries = _entries(build(tasks=1, repeats=1))
    d1 = content_digest(__import__("hashlib").sha256(b"\x00" + e.raw).digest() for e in entries)
    r = explore(entries, RUN, views=compute_views(entries, RUN))
    assert r.content_digest == d1
    flipped = entries[:-1] + [entries[-1]._replace(raw=entries[-1].raw + b" ")]
    assert explore(flipped, RUN, views=r.views).content_digest != d1


def test_paired_bootstrap_is_deterministic_and_finds_a_clear_difference() -> None:
    """alpha passes 10/10 tasks, beta 2/10: the CI of beta - alpha excludes 0; same seed, same CI."""
    a = [{"task": f"t{i}", "passed": True} for i in range(10)]
    b = [{"task": f"t{i}", "passed": i < 2} for i in range(10)]
    p1, p2 = paired(a, b, seed=7), paired(a, b, seed=7)
    assert p1 == p2
    assert p1["tasks"] == 10 and p1["difference"] == -0.8
    assert p1["ci_high"] < 0 and p1["significant"] is True
    assert p1["wins_a"] == 8 and p1["ties"] == 2


def test_paired_bootstrap_calls_noise_noise() -> None:
    """One task of ten differs each way: the interval includes 0, so not significant."""
    a = [{"task": f"t{i}", "passed": i != 0} for i in range(10)]
    b = [{"task": f"t{i}", "passed": i != 1} for i in range(10)]
    p = paired(a, b)
    assert p["difference"] == 0.0 and p["ci_low"] < 0 < p["ci_high"]
    assert p["significant"] is False


def test_paired_needs_common_tasks() -> None:
    """Disjoint task sets give tasks 0 and no interval, never a made-up number."""
    p = paired([{"task": "x", "passed": True}], [{"task": "y", "passed": True}])
    assert p["tasks"] == 0 and p["difference"] is None and p["ci_low"] is None


def test_run_pairs_and_frontier() -> None:
    """Two agents on the same tasks give one pair; the cheaper-or-better agents are on the frontier."""
    entries = _entries(build())
    r = explore(entries, RUN, views=compute_views(entries, RUN))
    assert len(r.pairs) == 1 and r.pairs[0]["a"] == "alpha" and r.pairs[0]["b"] == "beta"
    assert r.pairs[0]["tasks"] == 3
    assert {p.agent: p.on_frontier for p in r.frontier} == {"alpha": True, "beta": True}


def test_fold_report_scores_tiers_and_spread_per_agent() -> None:
    """One fold gives each attempt's golden score, score per tier and per-agent mean/stderr/pass@k."""
    from evaluators.explore import fold_report

    entries = _entries(build())
    f = fold_report(entries, RUN)
    assert f.views == compute_views(entries, RUN)
    assert len(f.scores) == 12 and all(0.0 <= v <= 1.0 for v in f.scores.values())
    assert f.scores[f"{RUN}/t1/beta/1/1"] == 0.0  # failed, and DIRTY
    assert set(f.tiers) == {"smoke"} and f.tiers["smoke"]["attempts"] == 12
    alpha, beta = f.agent_repeats["alpha"], f.agent_repeats["beta"]
    assert alpha["count"] == 2 and [p["k"] for p in alpha["pass_at_k"]] == [1, 2]
    assert alpha["pass_at_k"][0]["value"] == 1.0
    assert beta["pass_at_k"][0]["value"] == 0.333333  # views round to 6 digits


def test_http_agent_model_turns_are_transcript_items() -> None:
    """model.request messages and model.response content and tool calls read as turns."""
    b = build(tasks=1, repeats=1, agents=("alpha",))
    aid = f"{RUN}/t0/alpha/1/1"
    b.add("model.request", {"attempt": aid, "step": 1, "model": "m",
                            "messages": [{"role": "user", "content": "Fix the bug."}]}, task="t0")
    b.add("model.response", {"attempt": aid, "step": 1, "try": 1, "status": 200, "message": {
        "content": "I will look.", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}}, task="t0")
    entries = _entries(b)
    d = explore(entries, RUN, views=compute_views(entries, RUN)).attempts[aid]
    turns = [t for t in d.transcript if t.kind.startswith("model.")]
    assert [(t.role, t.text) for t in turns] == [
        ("user", "user: Fix the bug."),
        ("assistant", 'I will look.\n-> bash({"command": "ls"})')]
