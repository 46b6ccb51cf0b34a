"""Paired comparisons through the CLI: `compare RUN_A RUN_B` and `compare --agents A B [RUN]`,
their figures against independent references, their words, and their bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_report_cmds import invoke, write
from tests.evaluators.builders import RunBuilder, task

RUN_1 = "r-20261201T100000Z-111111"
RUN_2 = "r-20261201T110000Z-222222"
TASKS = [f"t{i:02d}" for i in range(14)]


def agents_run(run: str, wins: dict[str, set[str]], repeat: int = 1) -> RunBuilder:
    """Each agent passes the tasks in ``wins[agent]`` (every repeat) and fails the others."""
    b = RunBuilder(run=run)
    b.started([task(t) for t in TASKS], agents=tuple(wins), repeat=repeat)
    for agent, passing in wins.items():
        for t in TASKS:
            for r in range(1, repeat + 1):
                b.attempt(t, agent=agent, repeat=r,
                          hidden=(2, 0, 0) if t in passing else (0, 2, 0))
    b.finished()
    return b


@pytest.fixture()
def three_agents(tmp_path: Path) -> Path:
    home = tmp_path / "L"
    home.mkdir()
    write(home, agents_run(RUN_1, {"alpha": set(TASKS), "beta": set(TASKS[:2]),
                                   "gamma": set(TASKS[:13])}))
    return home


def test_agents_pairwise_mcnemar_and_holm_match_references(three_agents: Path) -> None:
    """Three agents: three comparisons; McNemar p equals scipy's binomial test, Holm equals
    statsmodels' over the three."""
    scipy_stats = pytest.importorskip("scipy.stats")
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    code, out, err = invoke(three_agents, "compare", "--agents", "alpha", "beta", "gamma",
                            RUN_1, "--json")
    assert code == 0, err
    body = json.loads(out)
    comps = body["paired"]["comparisons"]
    assert [(c["a"]["label"], c["b"]["label"]) for c in comps] == [
        ("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]
    # alpha vs beta: 12 tasks only alpha passed; alpha vs gamma: 1; beta vs gamma: 11 only gamma
    assert [(c["a_only"], c["b_only"]) for c in comps] == [(12, 0), (1, 0), (0, 11)]
    ref = [scipy_stats.binomtest(min(x, y), x + y, 0.5).pvalue
           for x, y in ((12, 0), (1, 0), (0, 11))]
    for c, p in zip(comps, ref, strict=True):
        assert c["mcnemar"]["p"] == pytest.approx(p, abs=1e-6)
        assert c["tasks"] == 14 and c["pairs"] == 14 and c["discordant"] == c["a_only"] + c["b_only"]
    holm = multipletests(ref, method="holm")[1]
    assert [c["mcnemar"]["p_holm"] for c in comps] == pytest.approx(list(holm), abs=1e-6)
    assert [c["distinguishable"] for c in comps] == [True, False, True]
    assert "is not distinguishable from zero at the 5% level" in comps[1]["verdict"]
    assert "is distinguishable from zero at the 5% level (alpha passes more)" in comps[0]["verdict"]


def test_agents_text_says_n_discordant_and_the_verdict(three_agents: Path) -> None:
    """The text names n, the discordant pairs and the verdict in words; the single pair shows
    who passed what per task."""
    code, out, _ = invoke(three_agents, "compare", "--agents", "alpha", "gamma")
    assert code == 0
    assert ("gamma vs alpha: n = 14 common task(s), 14 pair(s) of repeats, 1 discordant "
            "(1 only alpha passed, 0 only gamma passed)") in out
    assert "not distinguishable from zero at the 5% level" in out
    assert any(line.split() == ["t13", "1", "0", "-1.00"] for line in out.splitlines())


def test_paired_difference_interval_is_the_t_interval_of_task_differences(three_agents: Path) -> None:
    """With every task its own cluster, the paired SE and interval are the t interval of the
    per-task differences (scipy)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    np = pytest.importorskip("numpy")
    _, out, _ = invoke(three_agents, "compare", "--agents", "beta", "gamma", "--json")
    c = json.loads(out)["paired"]["comparisons"][0]
    diffs = np.array([1.0] * 11 + [0.0] * 3)  # gamma - beta per task
    lo, hi = scipy_stats.t.interval(0.95, 13, loc=diffs.mean(), scale=scipy_stats.sem(diffs))
    pr = c["pass_rate"]
    assert pr["difference"] == pytest.approx(11 / 14, abs=1e-6)
    assert (pr["low"], pr["high"]) == pytest.approx((lo, hi), abs=1e-6)
    assert pr["clustered"] is False or pr["clusters"] == 1  # the builder's tasks share tier smoke


def test_compare_two_runs_pairs_the_same_agent(tmp_path: Path) -> None:
    """compare RUN_A RUN_B pairs alpha with alpha (A:alpha, B:alpha) and reports the paired
    statistics beside the deltas."""
    home = tmp_path / "L"
    home.mkdir()
    write(home, agents_run(RUN_1, {"alpha": set(TASKS[:3])}, repeat=2))
    write(home, agents_run(RUN_2, {"alpha": set(TASKS[:13])}, repeat=2))
    code, out, err = invoke(home, "compare", RUN_1, RUN_2, "--json")
    assert code == 0, err
    (c,) = json.loads(out)["paired_stats"]["comparisons"]
    assert (c["a"]["label"], c["b"]["label"]) == ("A:alpha", "B:alpha")
    assert (c["tasks"], c["pairs"], c["a_only"], c["b_only"]) == (14, 28, 0, 20)
    assert c["distinguishable"] is True
    code, text, _ = invoke(home, "compare", RUN_1, RUN_2)
    assert "B:alpha vs A:alpha: n = 14 common task(s), 28 pair(s) of repeats, 20 discordant" in text


def test_compare_bad_input_is_one_line_exit_2(three_agents: Path) -> None:
    """One agent, an unknown agent, or three runs: usage errors (exit 2), never a traceback."""
    for args in (("--agents", "alpha"), ("--agents", "alpha", "ghost"), (RUN_1,)):
        code, out, err = invoke(three_agents, "compare", *args)
        assert code == 2 and "Traceback" not in out + err, (args, out, err)
        assert len(err.strip().splitlines()) == 1


def test_bootstrap_seed_is_derived_from_the_runs(three_agents: Path) -> None:
    """The same comparison twice gives the same bytes; the seed comes from the run and labels."""
    from evaluators.stats import seed_of

    first = invoke(three_agents, "compare", "--agents", "alpha", "beta", "--json")[1]
    second = invoke(three_agents, "compare", "--agents", "alpha", "beta", "--json")[1]
    assert first == second
    c = json.loads(first)["paired"]["comparisons"][0]
    assert c["score"]["seed"] == seed_of(RUN_1, "alpha", "beta")


def test_report_scores_without_infra_failures_unless_counted(tmp_path: Path) -> None:
    """`ledger report` heads with the golden score over the attempts that are not infra
    failures and says how many it left out; --count-infra-failures gives the recorded golden
    view's score (infra failures as failed attempts); --json carries both."""
    from evaluators.stats_view import stats_of
    from evaluators.views import compute_views
    from tests.evaluators.test_stats_view import stats_run

    home = tmp_path / "L"
    home.mkdir()
    b = stats_run(record=False)
    write(home, b)
    excluded = stats_of(b.entries, b.run)["golden"]["score"]
    recorded = compute_views(b.entries, b.run)["score"]
    assert excluded != recorded
    code, out, err = invoke(home, "report", b.run[:20])
    assert code == 0, err
    score_line = next(line for line in out.splitlines() if line.startswith("Score: "))
    assert score_line.startswith(f"Score: {excluded:.4f} ")
    assert "over 28 attempts, 3 infra failure(s) excluded" in out
    code, out, _ = invoke(home, "report", b.run[:20], "--count-infra-failures")
    assert code == 0 and f"Score: {recorded:.4f} " in out
    assert "over 28 attempts, 3 infra failure(s) counted as failures" in out
    body = json.loads(invoke(home, "report", b.run[:20], "--json")[1])
    assert body["score"] == recorded and body["statistics"]["golden"]["score"] == excluded
    assert body["statistics"]["golden"]["infra_excluded"] == 3


def test_report_shows_the_minimum_detectable_effect(tmp_path: Path) -> None:
    """`ledger report` prints each agent's minimum detectable effect (the statistics view's,
    80% power at the 95% level) in its statistics table and in --json."""
    from evaluators.stats_view import stats_of
    from tests.evaluators.test_stats_view import stats_run

    home = tmp_path / "L"
    home.mkdir()
    b = stats_run(record=False)
    write(home, b)
    want = stats_of(b.entries, b.run)["per_agent"]["alpha"]["min_detectable_effect"]
    assert isinstance(want, float) and 0 < want < 1
    body = json.loads(invoke(home, "report", b.run[:20], "--json")[1])
    assert body["statistics"]["per_agent"]["alpha"]["min_detectable_effect"] == want
    code, out, err = invoke(home, "report", b.run[:20])
    assert code == 0, err
    assert "min detectable" in out
    rows = [line for line in out.splitlines() if line.split()[:1] == ["alpha"]]
    assert any(line.rstrip().endswith(f"{want:.3f}") for line in rows), rows
