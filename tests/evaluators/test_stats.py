"""evaluators/stats.py against reference values computed independently (scipy, statsmodels, and
hand enumeration), one statistic per test."""

from __future__ import annotations

import itertools
import math

import pytest

from evaluators import stats as st

scipy_stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")


def test_mcnemar_exact_on_a_known_table() -> None:
    """McNemar's exact p on the table [[10, 5], [15, 20]] equals statsmodels' and the binomial sum."""
    from statsmodels.stats.contingency_tables import mcnemar

    ref = mcnemar(np.array([[10, 5], [15, 20]]), exact=True).pvalue
    assert st.mcnemar_exact(5, 15) == pytest.approx(ref, abs=1e-15)
    # 2 * P(X <= 5), X ~ Binomial(20, 1/2) = 2 * 21700 / 2^20
    assert st.mcnemar_exact(5, 15) == pytest.approx(2 * 21700 / 2**20, abs=1e-15)
    assert st.mcnemar_exact(15, 5) == st.mcnemar_exact(5, 15)
    assert st.mcnemar_exact(0, 0) == 1.0
    assert st.mcnemar_exact(7, 7) == 1.0


def test_mcnemar_lm_eval_example_is_significant_where_a_z_test_is_not() -> None:
    """b=2, c=12 discordant pairs: exact McNemar p = 0.0129 (binom_test), well below 0.05."""
    ref = scipy_stats.binomtest(2, 14, 0.5).pvalue
    assert st.mcnemar_exact(2, 12) == pytest.approx(ref, abs=1e-12)
    assert st.mcnemar_exact(2, 12) < 0.05


@pytest.mark.parametrize(("k", "n"), [(7, 20), (0, 5), (5, 5), (1, 1), (50, 100), (3, 1000)])
def test_wilson_bounds_match_statsmodels(k: int, n: int) -> None:
    """Wilson bounds equal statsmodels' proportion_confint(method='wilson') at 95% and 90%."""
    from statsmodels.stats.proportion import proportion_confint

    for level in (0.95, 0.90):
        lo, hi = st.wilson(k, n, level)  # type: ignore[misc]
        rlo, rhi = proportion_confint(k, n, alpha=1 - level, method="wilson")
        assert lo == pytest.approx(rlo, abs=1e-12)
        assert hi == pytest.approx(rhi, abs=1e-12)
    assert st.wilson(0, 0) is None


def test_wilson_hand_value() -> None:
    """k=7, n=20 at 95%: (0.18119, 0.56715), the textbook figure."""
    lo, hi = st.wilson(7, 20)  # type: ignore[misc]
    assert (round(lo, 5), round(hi, 5)) == (0.18119, 0.56715)


def test_clustered_se_on_a_hand_made_clustered_set() -> None:
    """CR1 clustered SE equals statsmodels OLS cov_type='cluster' and the formula by hand."""
    import statsmodels.api as sm

    x = [0.1, 0.5, 0.9, 0.3, 0.2, 0.8, 1.0, 0.0, 0.4]
    g = ["a", "a", "a", "b", "b", "c", "c", "c", "d"]
    codes = np.array([ord(c) for c in g])
    ref = sm.OLS(np.array(x), np.ones(len(x))).fit(
        cov_type="cluster", cov_kwds={"groups": codes}).bse[0]
    out = st.clustered(x, g)
    assert out["stderr"] == pytest.approx(ref, abs=1e-12)
    m = sum(x) / len(x)
    sums = {c: sum(v - m for v, cc in zip(x, g, strict=True) if cc == c) for c in set(g)}
    by_hand = math.sqrt(4 / 3 * sum(s * s for s in sums.values())) / len(x)
    assert out["stderr"] == pytest.approx(by_hand, abs=1e-12)
    naive = float(np.std(x, ddof=1) / math.sqrt(len(x)))
    assert out["naive_stderr"] == pytest.approx(naive, abs=1e-12)
    assert out["design_effect"] == pytest.approx((by_hand / naive) ** 2, abs=1e-12)


def test_clustered_se_grows_when_clusters_move_together() -> None:
    """Perfectly correlated clusters of 3: the design effect is near the cluster size."""
    x = [1.0] * 3 + [0.0] * 3 + [1.0] * 3 + [0.0] * 3 + [1.0] * 3 + [0.0] * 3
    g = [str(i // 3) for i in range(len(x))]
    out = st.clustered(x, g)
    assert out["design_effect"] is not None and out["design_effect"] > 2.5
    singletons = st.clustered(x, [str(i) for i in range(len(x))])
    assert singletons["design_effect"] == pytest.approx(1.0, abs=1e-12)


def test_clustered_with_one_cluster_is_unknown() -> None:
    """One cluster: no clustered SE (None), never a made-up number."""
    out = st.clustered([0.0, 1.0, 1.0], ["a", "a", "a"])
    assert out["stderr"] is None and out["design_effect"] is None and out["clusters"] == 1


@pytest.mark.parametrize(("n", "c"), [(5, 0), (5, 2), (5, 5), (8, 3), (10, 7)])
def test_pass_hat_k_by_enumeration(n: int, c: int) -> None:
    """pass^k is the share of k-subsets of the n repeats that all passed (enumerated)."""
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        assert st.pass_hat_k(n, c, k) == pytest.approx(
            sum(all(s) for s in subsets) / len(subsets), abs=1e-12)
        assert st.pass_at_k(n, c, k) == pytest.approx(
            sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


def test_flip_rate_by_enumeration() -> None:
    """The flip rate is the share of repeat pairs that disagree."""
    outcomes = [1, 0, 1, 1, 0]
    pairs = list(itertools.combinations(outcomes, 2))
    assert st.flip_rate(5, 3) == pytest.approx(sum(a != b for a, b in pairs) / len(pairs))
    assert st.flip_rate(1, 1) is None
    assert st.flip_rate(4, 4) == 0.0


def test_holm_on_known_pvalues() -> None:
    """Holm on (0.01, 0.04, 0.03, 0.005) gives (0.03, 0.06, 0.06, 0.02), as statsmodels does."""
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.005]
    assert st.holm(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert st.holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]), abs=1e-15)
    assert st.holm([0.9, 0.8]) == [1.0, 1.0]  # 2 * 0.8 caps at 1; the step-down keeps it


@pytest.mark.parametrize("df", [1, 2, 4, 9, 29, 200])
def test_t_quantile_matches_scipy(df: int) -> None:
    """The t quantile and CDF agree with scipy to 1e-9."""
    for p in (0.6, 0.9, 0.975, 0.995):
        assert st.t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), abs=1e-9)
        assert st.t_cdf(st.t_quantile(p, df), df) == pytest.approx(p, abs=1e-12)


def test_t_interval_matches_scipy() -> None:
    """The mean's t interval equals scipy.stats.t.interval with the sample SE."""
    xs = [0.2, 0.9, 0.4, 0.55, 0.1, 0.7]
    out = st.t_interval(xs)
    ref = scipy_stats.t.interval(0.95, len(xs) - 1, loc=np.mean(xs), scale=scipy_stats.sem(xs))
    assert (out["low"], out["high"]) == pytest.approx(ref, abs=1e-10)


def test_power_figure_against_the_published_formula() -> None:
    """Tasks for a 0.05 paired difference with sd 0.3 at 80% power, alpha 0.05: 283, as
    statsmodels' NormalIndPower (one sample) and ((1.959964 + 0.841621) * 0.3 / 0.05)^2 say."""
    from statsmodels.stats.power import NormalIndPower

    ref = NormalIndPower().solve_power(effect_size=0.05 / 0.3, alpha=0.05, power=0.8, ratio=0)
    assert st.tasks_needed(0.05, 0.3) == math.ceil(ref) == 283
    assert st.tasks_needed(0.05, 0.3) == math.ceil(((1.959964 + 0.841621) * 0.3 / 0.05) ** 2)
    # the minimum detectable effect inverts it
    assert st.min_detectable(0.3 / math.sqrt(283)) == pytest.approx(0.05, rel=0.01)


def test_paired_sd_with_correlation_and_repeats() -> None:
    """Correlation shrinks the paired variance, repeats shrink the within-task part."""
    assert st.paired_sd(0.04, 0.04, 0.0) == pytest.approx(math.sqrt(0.08))
    assert st.paired_sd(0.04, 0.04, 0.5) == pytest.approx(math.sqrt(0.04))
    assert st.paired_sd(0.04, 0.04, 0.5, 0.1, 0.1, repeats=4) == pytest.approx(math.sqrt(0.09))


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    """The same seed gives the same interval; another seed another; the mean lies inside."""
    xs = [i / 37 + (i % 5) / 11 for i in range(40)]
    a = st.bootstrap_mean(xs, st.seed_of("run", "x"), 500)
    b = st.bootstrap_mean(xs, st.seed_of("run", "x"), 500)
    c = st.bootstrap_mean(xs, st.seed_of("run", "y"), 500)
    assert a == b and a != c and a is not None
    assert a[0] < sum(xs) / len(xs) < a[1]


def test_seed_of_is_sha256_not_hash() -> None:
    """seed_of is the first 8 bytes of SHA-256 (stable across processes)."""
    import hashlib

    want = int.from_bytes(hashlib.sha256(b"a\x00b").digest()[:8], "big")
    assert st.seed_of("a", "b") == want
