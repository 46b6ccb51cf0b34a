"""The statistics evaluator: its figures on a hand-made run, replay, determinism across
PYTHONHASHSEED, journals recorded before it existed, and infra failures kept apart."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators import registry, stats_view
from evaluators import stats as st
from evaluators.registry import replay_run
from evaluators.stats_view import stats_of
from evaluators.views import recorded_view_data
from tests.evaluators.builders import RunBuilder, task

ROOT = Path(__file__).resolve().parents[2]


def _task(tid: str, tier: str, repo: str | None) -> dict[str, object]:
    t = task(tid, tier=tier)
    if repo is not None:
        t["source"] = {"repo": repo, "format": "swebench"}
    return t


def stats_run(*, infra: bool = True, record: bool = True) -> RunBuilder:
    """Two agents, four tasks from two repositories, three repeats; with infra failures."""
    b = RunBuilder()
    tasks = [_task("t1", "smoke", "org/a"), _task("t2", "smoke", "org/a"),
             _task("t3", "standard", "org/b"), _task("t4", "standard", None)]
    b.started(tasks, agents=("alpha", "beta"), repeat=3)
    # alpha passes t1 always, t2 twice of three (flaky), t3 never, t4 always
    plan = {("alpha", "t1"): "111", ("alpha", "t2"): "110", ("alpha", "t3"): "000",
            ("alpha", "t4"): "111", ("beta", "t1"): "111", ("beta", "t2"): "000",
            ("beta", "t3"): "000", ("beta", "t4"): "101"}
    for (agent, tid), pattern in sorted(plan.items()):
        tier = "smoke" if tid in ("t1", "t2") else "standard"
        for r, ch in enumerate(pattern, start=1):
            b.attempt(tid, agent=agent, repeat=r, tier=tier,
                      hidden=(3, 0, 0) if ch == "1" else (2, 1, 0), attestation="CLEAN")
    if infra:
        # a fourth repeat of some pairs: the sandbox did not start, ...
        b.attempt("t3", agent="beta", repeat=4, tier="standard", hidden=None, signals=(),
                  status="error", agent_finished=False,
                  error="sandbox failed to start: bwrap: setting up uid map: Permission denied",
                  extra=[("sandbox.failed", {"stage": "start", "backend": "bwrap",
                                             "message": "setting up uid map: Permission denied"})])
        # an agent that crashed is the agent's failure, not an infra failure
        b.attempt("t1", agent="alpha", repeat=4, tier="smoke", hidden=(2, 1, 0), crashed=True)
        # the endpoint answered 503 through the proxy: agent_error model_error
        _endpoint_failure(b, "t2", "beta", 4)
        b.attempt("t4", agent="alpha", repeat=4, tier="standard", hidden=None, signals=(),
                  status="error", error="OSError: [Errno 28] No space left on device")
    b.finished()
    if record:
        b.add("view.recorded", recorded_view_data(b.entries, b.run))
        b.add("view.recorded", {"evaluator": stats_view.EVALUATOR_NAME,
                                "version": stats_view.EVALUATOR_VERSION,
                                "view": stats_of(b.entries, b.run)})
    return b


def _endpoint_failure(b: RunBuilder, tid: str, agent: str, repeat: int) -> None:
    aid = f"{b.run}/{tid}/{agent}/{repeat}/1"
    a = {"attempt": aid}
    b.add("attempt.started", {**a, "agent": agent, "agent_spec": agent, "repeat": repeat,
                              "try": 1, "tier": "smoke", "node": "host"}, task=tid)
    b.add("commitment", {**a, "commitment": {"digests": 0}}, task=tid)
    b.add("agent.started", {**a, "argv": ["agent"], "cwd": "/wt", "trace": "none",
                            "trace_reason": ""}, task=tid)
    b.add("net.connect", {**a, "host": "127.0.0.1", "port": 9, "allowed": True,
                          "status": 503}, task=tid)
    b.add("agent.finished", {**a, "exit_code": 1, "signal": None, "wall_s": 2.0,
                             "timed_out": False, "crashed": False, "tokens_in": 0,
                             "tokens_out": 0, "cost_usd": None, "cost_source": "none",
                             "orphans": 0, "telemetry": True,
                             "agent_error": {"kind": "model_error",
                                             "detail": "HTTP 503 after 3 retries"}}, task=tid)
    b.add("attempt.finished", {**a, "status": "completed", "error": None}, task=tid)
    b.add("attestation", {**a, "attestation": {"verdict": "CLEAN"}, "hash": "00" * 32}, task=tid)


def test_registry_names_match_the_module() -> None:
    """The registry spells the evaluator's name and version as the module does."""
    ev = registry.by_name("stats")
    assert ev is not None
    assert (ev.name, ev.version) == (stats_view.EVALUATOR_NAME, stats_view.EVALUATOR_VERSION)
    assert "sandbox.failed" in ev.kinds and "view.recorded" in ev.kinds


def test_per_agent_pass_rate_has_a_wilson_interval() -> None:
    """alpha passed 8 of 12 scored attempts (infra failures excluded): Wilson bounds of 8/12."""
    v = stats_of(stats_run().entries)
    alpha = v["per_agent"]["alpha"]
    # alpha's repeat 4 of t1 is an ordinary failure (crashed agent), its t4 repeat 4 disk full
    assert (alpha["passed"], alpha["attempts"]) == (8, 13)
    lo, hi = st.wilson(8, 13)  # type: ignore[misc]
    assert alpha["pass_rate"]["low"] == round(lo, 6) and alpha["pass_rate"]["high"] == round(hi, 6)
    assert v["per_agent"]["beta"]["attempts"] == 12


def test_infra_failures_are_classified_and_excluded() -> None:
    """Sandbox start, endpoint 503 and disk full are infra failures; a crashed agent is not."""
    v = stats_of(stats_run().entries)
    infra = v["infra"]
    assert infra["failures"] == 3 and infra["excluded"] == 3
    assert infra["by_kind"] == {"sandbox": 1, "endpoint": 1, "disk_full": 1, "executor": 0,
                                "harness": 0}
    kinds = {r["attempt"].split("/", 1)[1]: r["kind"] for r in infra["listed"]}
    assert kinds == {"t3/beta/4/1": "sandbox", "t2/beta/4/1": "endpoint",
                     "t4/alpha/4/1": "disk_full"}
    assert v["tasks"]["t3"]["beta"]["pattern"] == "000x"
    counted = stats_of(stats_run().entries, count_infra=True)
    assert counted["infra"]["excluded"] == 0
    assert counted["per_agent"]["beta"]["attempts"] == 14
    assert counted["per_agent"]["beta"]["passed"] == v["per_agent"]["beta"]["passed"]


def test_flaky_tasks_are_listed_with_their_flip_rate() -> None:
    """alpha t2 (110) and beta t4 (101) are flaky, flip rate 2/3; steady tasks are not listed."""
    v = stats_of(stats_run().entries)
    listed = {(r["task"], r["agent"]): r["flip_rate"] for r in v["flaky"]["listed"]}
    assert listed[("t2", "alpha")] == round(2 / 3, 6)
    assert listed[("t4", "beta")] == round(2 / 3, 6)
    assert ("t3", "alpha") not in listed
    assert v["tasks"]["t2"]["alpha"]["pattern"] == "110"


def test_clusters_follow_the_recorded_source() -> None:
    """t1, t2 share repo org/a; t3 is org/b; t4 has no source so its tier clusters it."""
    v = stats_of(stats_run().entries)
    clusters = {t: v["tasks"][t]["alpha"]["cluster"] for t in ("t1", "t2", "t3", "t4")}
    assert clusters == {"t1": "repo:org/a", "t2": "repo:org/a", "t3": "repo:org/b",
                        "t4": "tier:standard"}
    beta = v["per_agent"]["beta"]
    assert beta["clustered"]["clusters"] == 3
    means = [1.0, 0.0, 0.0, 2 / 3]  # beta's per-task pass rates (t1..t4)
    ref = st.clustered(means, ["repo:org/a", "repo:org/a", "repo:org/b", "tier:standard"])
    assert beta["clustered"]["pass_rate"]["stderr"] == round(float(ref["stderr"]), 6)  # type: ignore[arg-type]


def test_pass_hat_k_averages_over_tasks() -> None:
    """pass^3 of alpha over t1..t4 with 3 repeats each (t1 has a 4th): the mean of C(c,3)/C(n,3)."""
    v = stats_of(stats_run(infra=False).entries)
    rows = {r["k"]: r for r in v["per_agent"]["alpha"]["pass_k"]}
    assert rows[3]["pass_hat_k"] == round((1 + 0 + 0 + 1) / 4, 6)
    assert rows[1]["pass_at_k"] == round((1 + 2 / 3 + 0 + 1) / 4, 6)


def test_recorded_statistics_replay_reproduced() -> None:
    """A recorded statistics view recomputes identically; the registry replays both views."""
    b = stats_run()
    result = replay_run(b.entries, b.run)
    assert result.reproduced, result.message
    assert {v.evaluator for v in result.views} == {"golden", "stats"}


def test_a_forged_statistics_view_is_not_reproduced() -> None:
    """Raising a recorded pass rate is caught field by field."""
    b = stats_run()
    last = b.entries.pop()
    forged = copy.deepcopy(last.data)
    forged["view"]["per_agent"]["beta"]["pass_rate"]["value"] = 0.99
    b.add("view.recorded", forged)
    result = replay_run(b.entries, b.run)
    assert not result.reproduced
    diffs = [d.path for v in result.views for d in v.diffs]
    assert "per_agent.beta.pass_rate.value" in diffs


def test_a_journal_recorded_before_statistics_still_replays() -> None:
    """A run that recorded only the golden view replays and is reproduced: the statistics view
    was never recorded, so it is not missing."""
    b = stats_run(record=False)
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    result = replay_run(b.entries, b.run)
    assert result.reproduced and [v.evaluator for v in result.views] == ["golden"]


_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from tests.evaluators.test_stats_view import stats_run
from evaluators.registry import replay_run
b = stats_run()
r = replay_run(b.entries, b.run)
sys.stdout.write(json.dumps([r.reproduced, b.entries[-1].data["view"]], sort_keys=True))
"""


def test_replay_is_byte_identical_across_hash_seeds() -> None:
    """The view and its replay are the same bytes under PYTHONHASHSEED 0, 1 and random."""
    outs = []
    for seed in ("0", "1", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", _SCRIPT.format(root=str(ROOT))], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == outs[2]
    reproduced, view = json.loads(outs[0])
    assert reproduced is True and view["per_agent"]["alpha"]["score"]["bootstrap"]["resamples"] > 0


def test_bootstrap_seed_comes_from_the_run_id() -> None:
    """Another run id gives another seed; the same run id the same one."""
    a = stats_of(stats_run().entries)
    b2 = stats_run()
    assert stats_of(b2.entries)["overall"]["score"]["bootstrap"]["seed"] == \
        a["overall"]["score"]["bootstrap"]["seed"] == st.seed_of(b2.run, "score", "all")


@pytest.mark.parametrize("error,kind", [
    ("the attempt failed on node n1: RayTaskError: boom", "executor"),
    ("RuntimeError: harness bug", "harness"),
    ("OSError: [Errno 28] No space left on device", "disk_full"),
])
def test_error_statuses_map_to_one_kind(error: str, kind: str) -> None:
    """Each harness error text maps to exactly one infra kind."""
    b = RunBuilder()
    b.started([task("t1")], agents=("alpha",))
    b.attempt("t1", agent="alpha", status="error", error=error, hidden=None, signals=())
    b.finished()
    v = stats_of(b.entries)
    assert [r["kind"] for r in v["infra"]["listed"]] == [kind]


def test_golden_and_statistics_views_replay_in_one_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """replay_run folds a run with both views once, and derives its facts once per view point."""
    from evaluators import facts, views

    b = stats_run()
    calls = {"fold_all": 0, "derive": 0}
    real_fold_all, real_derive = views.fold_all, facts.derive

    def counting_fold_all(*a: object, **k: object) -> object:
        calls["fold_all"] += 1
        return real_fold_all(*a, **k)  # type: ignore[arg-type]

    def counting_derive(*a: object, **k: object) -> object:
        calls["derive"] += 1
        return real_derive(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(views, "fold_all", counting_fold_all)
    monkeypatch.setattr(facts, "derive", counting_derive)
    result = replay_run(b.entries, b.run)
    assert result.reproduced and result.evaluator == "golden+stats"
    attempts = len({e.data["attempt"] for e in b.entries if e.kind == "attempt.started"})
    assert calls == {"fold_all": 1, "derive": attempts}


def test_sandbox_failed_is_a_known_kind_of_the_fold() -> None:
    """sandbox.failed is folded (not counted as an unknown kind) and marks its attempt."""
    from evaluators.fold import fold_all, new_state

    b = stats_run(record=False)
    state = fold_all(b.entries, new_state(b.run))
    assert "sandbox.failed" not in state.unknown
    marked = [a for a in state.attempts.values() if a.sandbox_failed]
    assert [a.attempt.split("/", 1)[1] for a in marked] == ["t3/beta/4/1"]
    assert marked[0].sandbox_failed == ("bwrap failed at start: setting up uid map: "
                                        "Permission denied")


def test_the_golden_score_leaves_infra_failures_out_unless_counted() -> None:
    """The statistics view's golden score is over the 25 attempts that are not infra failures
    (3 of 28 are); counted, it is the golden view's score and per-agent scores, to the bit."""
    from evaluators import score as sc
    from evaluators.facts import facts_of
    from evaluators.fold import fold_all, new_state
    from evaluators.views import compute_views

    b = stats_run(record=False)
    g = stats_of(b.entries, b.run)["golden"]
    assert (g["attempts"], g["scored"], g["infra_failures"], g["infra_excluded"]) == (28, 25, 3, 3)
    scored, superseded = facts_of(fold_all(b.entries, new_state(b.run)))
    kept = [f for f in scored if not (f.repeat == 4 and (f.task, f.agent) in {
        ("t3", "beta"), ("t2", "beta"), ("t4", "alpha")})]
    assert len(kept) == 25
    assert g["score"] == round(sc.golden(sc.components(kept, superseded)), 6)
    assert g["per_agent"]["beta"]["infra_failures"] == 2
    assert g["per_agent"]["beta"]["attempts"] == 12
    counted = stats_of(b.entries, b.run, count_infra=True)["golden"]
    v = compute_views(b.entries, b.run)
    assert counted["infra_excluded"] == 0 and counted["score"] == v["score"] != g["score"]
    assert {a: r["score"] for a, r in counted["per_agent"].items()} == {
        a: r["score"] for a, r in v["per_agent"].items()}


def test_a_statistics_view_recorded_by_1_0_0_replays_with_the_code_of_1_0_0() -> None:
    """A run recorded before 1.1.0 (its stats view has no golden section and says 1.0.0) is
    recomputed by view_data_1_0 and reproduces; the same bytes labelled 1.1.0 do not, nor does
    a 1.0.0 view that carries the new section."""
    from evaluators.fold import fold_all, new_state
    from evaluators.views import normalize

    b = stats_run(record=False)
    b.add("view.recorded", recorded_view_data(b.entries, b.run))
    old_view = normalize(stats_view.view_data_1_0(fold_all(b.entries, new_state(b.run))))
    assert "golden" not in old_view and old_view["evaluator"]["version"] == "1.0.0"
    assert {k: v for k, v in stats_of(b.entries, b.run).items()
            if k not in ("golden", "evaluator")} == {k: v for k, v in old_view.items()
                                                      if k != "evaluator"}
    entries = list(b.entries)

    def replayed(version: str, view: dict[str, object]) -> object:
        b.entries = [*entries]
        b.add("view.recorded", {"evaluator": "stats", "version": version, "view": view})
        return replay_run(b.entries, b.run)

    result = replayed("1.0.0", old_view)
    assert result.reproduced and [(v.evaluator, v.version) for v in result.views] == [
        ("golden", "1.0.0"), ("stats", "1.0.0")]
    assert stats_view.replay(b.entries, b.run).reproduced
    assert not replayed("1.1.0", old_view).reproduced
    new_view = stats_of(entries, b.run)
    assert new_view["evaluator"]["version"] == "1.1.0"
    assert not replayed("1.0.0", new_view).reproduced
    assert replayed("1.1.0", new_view).reproduced
