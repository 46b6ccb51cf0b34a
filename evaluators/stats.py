"""The statistics every comparison rests on, as small pure functions (docs/SCORING.md, "Statistics").

    wilson(k, n, level)              Wilson score interval of a proportion
    t_interval(values, level)        mean, standard error and Student-t interval of a mean
    clustered(values, clusters)      cluster-robust (CR1) standard error of a mean, design effect
    pass_at_k / pass_hat_k           unbiased pass@k (any of k) and pass^k (all k of k)
    flip_rate(n, c)                  the chance that two repeats of a task disagree
    mcnemar_exact(b, c)              two-sided exact McNemar p-value from the discordant counts
    holm(pvalues)                    Holm's step-down adjusted p-values
    bootstrap_mean(values, seed)     percentile bootstrap interval of a mean (SplitMix64 draws)
    seed_of(*parts)                  a 64-bit seed from strings (SHA-256, never ``hash()``)
    tasks_needed / min_detectable    power planning for a paired difference (normal approximation)

Pure and deterministic: no global random state, no ``hash()``; the same inputs give the same
floats on any machine and under any ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from statistics import NormalDist

LEVEL = 0.95  # the default confidence level (alpha = 0.05)
POWER = 0.80  # the default power of a plan
_NORMAL = NormalDist()
_MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------- quantiles

def z_quantile(p: float) -> float:
    """The standard normal quantile (inverse CDF) at ``p``."""
    return _NORMAL.inv_cdf(p)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
          + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t cumulative distribution function."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile at ``p`` (bisection on the CDF; |error| < 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1 (p={p})")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2.0


# ---------------------------------------------------------------------------- intervals

def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float] | None:
    """Wilson score interval for ``k`` successes in ``n`` trials (Wilson 1927); None for n = 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"a proportion needs 0 <= k <= n (k={k}, n={n})")
    z = z_quantile(1.0 - (1.0 - level) / 2.0)
    p = k / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n)) / (1.0 + z2n)
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def t_interval(values: Sequence[float], level: float = LEVEL) -> dict[str, float | int | None]:
    """Mean, standard error (sample sd / sqrt(n)) and the Student-t interval, df = n - 1."""
    n = len(values)
    m = mean(values)
    out: dict[str, float | int | None] = {"n": n, "mean": m, "stderr": None, "low": None,
                                          "high": None}
    if m is None or n < 2:
        return out
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    se = math.sqrt(var / n)
    half = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * se
    out.update(stderr=se, low=m - half, high=m + half)
    return out


def clustered(values: Sequence[float], clusters: Sequence[str]) -> dict[str, float | int | None]:
    """The cluster-robust standard error of the mean of ``values`` (CR1, as Stata's and
    statsmodels' ``cov_type="cluster"`` compute it for a constant-only regression):

        se_c = sqrt( G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2 ) / n

    with G clusters. With every value its own cluster it equals the naive standard error
    (sample sd / sqrt(n)), so ``design_effect = (se_c / se)^2`` is 1 when clustering changes
    nothing. None (with ``clusters`` < 2) when it cannot be estimated.
    """
    n = len(values)
    if len(clusters) != n:
        raise ValueError("one cluster per value")
    groups: dict[str, float] = {}
    m = mean(values)
    out: dict[str, float | int | None] = {"clusters": len(set(clusters)), "stderr": None,
                                          "naive_stderr": None, "design_effect": None}
    if m is None or n < 2:
        return out
    for v, g in zip(values, clusters, strict=True):
        groups[g] = groups.get(g, 0.0) + (v - m)
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    naive = math.sqrt(var / n)
    out["naive_stderr"] = naive
    big_g = len(groups)
    if big_g < 2:
        return out
    se = math.sqrt(big_g / (big_g - 1) * math.fsum(s * s for s in groups.values())) / n
    out["stderr"] = se
    out["design_effect"] = (se / naive) ** 2 if naive > 0 else None
    return out


# ---------------------------------------------------------------------------- repeats

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), n samples, c correct."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (tau-bench, Yao et al. 2024): C(c, k) / C(n, k), the chance that k
    repeats drawn without replacement from the n all passed."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass^k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


def flip_rate(n: int, c: int) -> float | None:
    """The chance that two distinct repeats of a task disagree: c (n - c) / C(n, 2), the
    unbiased estimate of 2 p (1 - p). None with fewer than two repeats."""
    if n < 2:
        return None
    return c * (n - c) / math.comb(n, 2)


# ---------------------------------------------------------------------------- tests

def binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly (integer sums, one division)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value (McNemar 1947; the exact binomial form) for ``b`` pairs
    where only the first passed and ``c`` where only the second did: 2 P(X <= min(b, c)),
    X ~ Binomial(b + c, 1/2), capped at 1. 1.0 with no discordant pair."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binom_cdf_half(min(b, c), n))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (pvalues[i], i))
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


# ---------------------------------------------------------------------------- bootstrap

def seed_of(*parts: str) -> int:
    """A 64-bit seed from strings (SHA-256 of the parts joined by NUL)."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def splitmix64(seed: int) -> Iterator[int]:
    """A tiny deterministic generator (SplitMix64): the same seed gives the same draws anywhere."""
    state = seed & _MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        yield z ^ (z >> 31)


def bootstrap_mean(values: Sequence[float], seed: int, resamples: int,
                   level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values``: ``resamples`` draws of the list
    with replacement (SplitMix64 from ``seed``). None for an empty list."""
    n = len(values)
    if n == 0 or resamples < 1:
        return None
    draws = splitmix64(seed)
    means = []
    picks = range(n)
    for _ in range(resamples):
        means.append(math.fsum([values[next(draws) % n] for _ in picks]) / n)
    means.sort()
    tail = (1.0 - level) / 2.0
    return (means[int(math.floor(tail * (resamples - 1)))],
            means[int(math.ceil((1.0 - tail) * (resamples - 1)))])


# ---------------------------------------------------------------------------- power

def tasks_needed(delta: float, sd: float, *, level: float = LEVEL, power: float = POWER) -> int:
    """Tasks needed to detect a paired mean difference ``delta`` with a two-sided test at
    ``1 - level`` and the given power, when the per-task difference has standard deviation
    ``sd``: n = ((z_{1-alpha/2} + z_{power}) sd / delta)^2, rounded up (normal approximation;
    e.g. Chow, Shao & Wang, Sample Size Calculations in Clinical Research, 3.1)."""
    if delta <= 0 or sd < 0:
        raise ValueError("a plan needs a difference > 0 and a standard deviation >= 0")
    z = z_quantile(1.0 - (1.0 - level) / 2.0) + z_quantile(power)
    return max(2, math.ceil((z * sd / delta) ** 2 - 1e-9))


def min_detectable(stderr: float, *, level: float = LEVEL, power: float = POWER) -> float:
    """The smallest true difference a test with this standard error detects at the power:
    (z_{1-alpha/2} + z_{power}) * stderr."""
    return (z_quantile(1.0 - (1.0 - level) / 2.0) + z_quantile(power)) * stderr


def paired_sd(var_a: float, var_b: float, corr: float, within_a: float = 0.0,
              within_b: float = 0.0, repeats: int = 1) -> float:
    """The standard deviation of a per-task paired difference of means over ``repeats`` repeats:
    Var = var_a + var_b - 2 corr sqrt(var_a var_b) + (within_a + within_b) / repeats
    (Miller 2024, "Adding Error Bars to Evals", the paired-difference variance with resampling),
    where ``var_*`` are the between-task variances of each side's expected score and ``within_*``
    the mean within-task variance of one repeat."""
    v = var_a + var_b - 2.0 * corr * math.sqrt(max(var_a, 0.0) * max(var_b, 0.0))
    v += (within_a + within_b) / max(repeats, 1)
    return math.sqrt(max(v, 0.0))


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation; None when either side does not vary or n < 2."""
    n = len(xs)
    if n < 2 or len(ys) != n:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def variance(values: Sequence[float]) -> float | None:
    """Sample variance (n - 1); None for n < 2."""
    n = len(values)
    if n < 2:
        return None
    m = math.fsum(values) / n
    return math.fsum((v - m) ** 2 for v in values) / (n - 1)


def by_cluster(keys: Mapping[str, str], tasks: Sequence[str]) -> list[str]:
    """The cluster of each task (the task itself when it has none)."""
    return [keys.get(t, "task:" + t) for t in tasks]


__all__ = ["LEVEL", "POWER", "binom_cdf_half", "bootstrap_mean", "by_cluster", "clustered",
           "correlation", "flip_rate", "holm", "incomplete_beta", "mcnemar_exact", "mean",
           "min_detectable", "paired_sd", "pass_at_k", "pass_hat_k", "seed_of", "splitmix64",
           "t_cdf", "t_interval", "t_quantile", "tasks_needed", "variance", "wilson",
           "z_quantile"]
