"""evaluators.compare.paired_comparison on hand-made sides: clustered paired SE against statsmodels,
and McNemar over the pairs of the same task and repeat."""

from __future__ import annotations

import pytest

from evaluators.compare import Side, paired_comparison, paired_comparisons


def _side(label: str, rows: dict[str, tuple[str, str]]) -> Side:
    """rows: task -> (pattern, cluster)."""
    return Side(label, "r", label, {t: {"n": sum(c in "01" for c in p), "passed": p.count("1"),
                                        "score_mean": p.count("1") / max(1, len(p)),
                                        "pattern": p, "cluster": cl}
                                    for t, (p, cl) in rows.items()})


A = _side("a", {"t1": ("11", "repo:x"), "t2": ("10", "repo:x"), "t3": ("00", "repo:y"),
                "t4": ("01", "repo:y"), "t5": ("11", "repo:z"), "t6": ("00", "repo:z")})
B = _side("b", {"t1": ("11", "repo:x"), "t2": ("11", "repo:x"), "t3": ("10", "repo:y"),
                "t4": ("11", "repo:y"), "t5": ("10", "repo:z"), "t6": ("11", "repo:z"),
                "t7": ("11", "repo:w")})


def test_clustered_paired_se_matches_statsmodels() -> None:
    """Tasks share repositories: the paired SE is statsmodels' cluster-robust SE of the mean
    difference, the interval uses t with clusters - 1 degrees of freedom."""
    sm = pytest.importorskip("statsmodels.api")
    np = pytest.importorskip("numpy")
    scipy_stats = pytest.importorskip("scipy.stats")
    c = paired_comparison(A, B, seed=1)
    diffs = np.array([0.0, 0.5, 0.5, 0.5, -0.5, 1.0])
    groups = np.array([0, 0, 1, 1, 2, 2])
    fit = sm.OLS(diffs, np.ones(6)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    pr = c["pass_rate"]
    assert c["tasks"] == 6  # t7 only in B
    assert pr["clustered"] is True and pr["clusters"] == 3 and pr["df"] == 2
    assert pr["stderr"] == pytest.approx(fit.bse[0], abs=1e-12)
    half = scipy_stats.t.ppf(0.975, 2) * fit.bse[0]
    assert (pr["low"], pr["high"]) == pytest.approx((diffs.mean() - half, diffs.mean() + half),
                                                    abs=1e-10)


def test_mcnemar_counts_pairs_of_the_same_repeat() -> None:
    """Discordant pairs are counted per (task, repeat): only-A 1 (t5 r2), only-B 5."""
    c = paired_comparison(A, B, seed=1)
    assert (c["pairs"], c["a_only"], c["b_only"], c["discordant"]) == (12, 1, 5, 6)
    # 2 * P(X <= 1), X ~ Bin(6, 1/2) = 2 * 7/64
    assert c["mcnemar"]["p"] == pytest.approx(14 / 64, abs=1e-15)


def test_no_common_task_says_so() -> None:
    """Disjoint task sets: n 0, not distinguishable, no interval."""
    other = _side("c", {"u1": ("1", "repo:q")})
    out = paired_comparisons([(A, other)])["comparisons"][0]
    assert out["tasks"] == 0 and out["distinguishable"] is False
    assert out["pass_rate"]["low"] is None
