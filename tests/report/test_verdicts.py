"""Comparisons with the best (dmlbench.report.verdicts): hand-computed fixtures, the moment
estimate against a direct two-way ANOVA and its unbiasedness, the critical value's floor and
the seed matrix's shrinkage. The error rates against a known truth are
tests/report/test_calibration.py's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dmlbench.report.verdicts import (
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    compare_with_best,
    critical_value,
    crossed_moments,
    pair_contrasts,
    pairs_floor,
    rows_floor,
    seed_moments,
)

DELTA = 0.03  # the shipped 3-point margin on Recall@1


def test_two_methods_seeds_only_give_the_paired_t_interval() -> None:
    """Two methods over 5 seeds: one pair, so c is the 97.5% quantile of t with 4 degrees of
    freedom (the simulated law's Wishart draw of the seed variance), and the interval is the
    paired-t interval of the difference."""
    values = np.array([[0.60, 0.62, 0.58, 0.61, 0.64], [0.50, 0.49, 0.51, 0.47, 0.52]])
    out = compare_with_best(seed_moments(("a", "b"), values), delta=0.05)
    d = values[1] - values[0]
    se = d.std(ddof=1) / np.sqrt(5)
    t = stats.t.ppf(0.975, 4)
    assert out.loc["b", "difference"] == pytest.approx(d.mean())
    assert out.loc["b", "lower"] == pytest.approx(d.mean() - t * se, rel=0.03)
    assert out.loc["b", "upper"] == pytest.approx(d.mean() + t * se, rel=0.03)
    assert out.loc["b", "verdict"] == WORSE
    assert out.loc["a", "verdict"] == UNDECIDED  # [+0.06, +0.14] is not inside ±0.05
    assert compare_with_best(seed_moments(("a", "b"), values), 0.2).loc["a", "verdict"] == (
        EQUIVALENT
    )
    assert list(out.index) == ["a", "b"] and out.loc["a", "p_rank1"] == 1.0


def test_an_interval_across_zero_is_undecided_not_equivalent() -> None:
    values = np.array([[0.60, 0.50, 0.70], [0.58, 0.65, 0.55]])
    out = compare_with_best(seed_moments(("a", "b"), values), delta=0.05)
    assert set(out["verdict"]) == {UNDECIDED}


def test_lower_is_better_metrics_flip_the_direction() -> None:
    values = np.array([[0.60, 0.62, 0.58, 0.61], [0.50, 0.49, 0.51, 0.47]])
    out = compare_with_best(seed_moments(("a", "b"), values), 0.05, higher_is_better=False)
    assert out.loc["a", "verdict"] == WORSE and list(out.index) == ["b", "a"]


def test_seeds_are_paired_across_methods() -> None:
    """b is a minus 0.1 on every seed: its difference never varies, whatever the seed spread."""
    values = np.array([[0.5, 0.6, 0.7], [0.4, 0.5, 0.6]])
    out = compare_with_best(seed_moments(("a", "b"), values), delta=0.05)
    assert (out.loc["b", "lower"], out.loc["b", "upper"]) == pytest.approx((-0.1, -0.1))


def anova_variance(y: np.ndarray) -> float:
    """(MS_seed + MS_class − MS_resid) / (S·C) of an S × C array, by the textbook sums."""
    s, c = y.shape
    g = y.mean()
    ms_s = c * ((y.mean(axis=1) - g) ** 2).sum() / (s - 1)
    ms_c = s * ((y.mean(axis=0) - g) ** 2).sum() / (c - 1)
    r = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + g
    ms_r = (r**2).sum() / ((s - 1) * (c - 1))
    return (ms_s + ms_c - ms_r) / (s * c)


def test_moment_estimate_is_the_two_way_anova_of_the_differences() -> None:
    """Unequal query counts: y_sc = C·(h_isc − h_jsc)/N has the difference of means as grand
    mean, and the estimate's variance of the difference is its ANOVA identity."""
    rng = np.random.default_rng(3)
    counts = rng.integers(3, 9, 30).astype(float)
    sums = rng.binomial(counts.astype(int), 0.5, (3, 6, 30)).astype(float)
    mc = crossed_moments(("a", "b", "c"), sums, counts)
    y = 30 * (sums[0] - sums[1]) / counts.sum()
    assert mc.means[0] - mc.means[1] == pytest.approx(y.mean())
    assert mc.means[0] == pytest.approx((sums[0].sum(axis=1) / counts.sum()).mean())
    w = np.array([[1.0, -1.0, 0.0]])
    assert mc.contrasts(w)[0] == pytest.approx(max(anova_variance(y), mc.contrasts(w)[0]))
    assert mc.cov[0, 0] - 2 * mc.cov[0, 1] + mc.cov[1, 1] == pytest.approx(anova_variance(y))


def test_moment_estimate_is_unbiased_where_the_bootstrap_is_not() -> None:
    """2,000 arrays of seed (sd 1), class (sd 1) and interaction (sd 3) parts, 6 × 20: the
    mean of the estimate is Var(ȳ) = 1/6 + 1/20 + 9/120 (within 3 Monte-Carlo standard
    errors); a bootstrap that resamples both margins adds about 2·σ²_e/(SC) on top."""
    rng = np.random.default_rng(5)
    n, s, c = 2000, 6, 20
    y = rng.normal(0, 1, (n, s, 1)) + rng.normal(0, 1, (n, 1, c)) + rng.normal(0, 3, (n, s, c))
    sums = y[:, None]  # one method, counts 1: y itself
    est = np.array([crossed_moments(("a",), sums[i], np.ones(c)).cov[0, 0] for i in range(n)])
    truth = 1 / s + 1 / c + 9 / (s * c)
    assert abs(est.mean() - truth) < 3 * est.std() / np.sqrt(n)
    assert truth + 2 * 9 / (s * c) > est.mean() + 10 * est.std() / np.sqrt(n)


def test_records_without_query_values_never_print_equivalent() -> None:
    """Seeds only (no per-query values): the same narrow interval inside ±δ is *equivalent*
    with the test-query component counted, *undecided* without it."""
    values = np.array([[0.600, 0.601, 0.599, 0.600], [0.599, 0.600, 0.598, 0.600]])
    mc = seed_moments(("a", "b"), values)
    assert set(compare_with_best(mc, 0.05)["verdict"]) == {EQUIVALENT}
    assert set(compare_with_best(mc, 0.05, equivalence=False)["verdict"]) == {UNDECIDED}


def test_the_floor_of_two_methods_is_the_t_quantile() -> None:
    """k = 2: Tukey–Kramer's q(2, ν)/√2 is t_ν's 97.5% quantile."""
    values = np.random.default_rng(0).normal(size=(2, 7))
    mc = seed_moments(("a", "b"), values)
    assert pairs_floor(mc, 0.05) == pytest.approx(stats.t.ppf(0.975, 6), rel=1e-4)


def test_satterthwaite_df_of_a_crossed_difference() -> None:
    """A difference whose variance is all seed part has S − 1 df; one with no seed part has
    about the class df or more."""
    rng = np.random.default_rng(1)
    seeds_only = rng.normal(0, 1, (2, 6, 1)) + np.zeros((2, 6, 40))
    mc = crossed_moments(("a", "b"), seeds_only, np.ones(40))
    w = np.array([[1.0, -1.0]])
    assert mc.satterthwaite(w)[0] == pytest.approx(5.0)
    classes_only = rng.normal(0, 1, (2, 1, 40)) + np.zeros((2, 6, 40))
    mc = crossed_moments(("a", "b"), classes_only + 1e-3 * rng.normal(size=(2, 6, 40)), np.ones(40))
    assert mc.satterthwaite(w)[0] > 30


def test_shrinkage_pulls_the_seed_contrasts_towards_equal_variances() -> None:
    """Ten methods with equal own seed variance, 12 seeds: the simulated seed matrix's
    contrast variances spread less than the sample matrix's; with own sds 16× apart the
    spread is kept (λ small)."""
    rng = np.random.default_rng(2)

    def spread(sd: np.ndarray) -> tuple[float, float]:
        rows = rng.normal(0, 1, (10, 12, 1)) * sd[:, None, None] + np.zeros((10, 12, 3))
        mc = crossed_moments(tuple("abcdefghij"), rows, np.ones(3))
        assert mc.seed_sim is not None
        p = np.eye(10) - 0.1
        raw, sim = (np.diag(p @ m @ p) for m in (mc.seed, mc.seed_sim))
        return float(np.std(raw) / np.mean(raw)), float(np.std(sim) / np.mean(sim))

    raw, sim = spread(np.ones(10))
    assert sim < 0.5 * raw
    raw, sim = spread(np.geomspace(1, 16, 10))
    assert sim > 0.5 * raw


def test_the_rows_floor_keeps_the_df_of_the_seeds_within_studies() -> None:
    """Defaults vs tuned with the tuned side's 3 studies: one method whose studies disagree
    far beyond the others' keeps its own study estimate (about T − 1 = 2 df) and t_2's far
    tail as its own floor; every other row's floor keeps the df of the seeds within studies
    and the pool, not t_2's."""
    rng = np.random.default_rng(14)
    k, t, s, c = 6, 3, 12, 50
    sums = rng.binomial(10, 0.5, (k, s, c)).astype(float)
    sums[0] += rng.normal(0, 20, t)[np.arange(s) % t, None]
    mc = crossed_moments(tuple("abcdef"), sums, np.full(c, 10.0), np.arange(s) % t)
    w = np.eye(k)
    assert list(mc.study_excess().own) == [True] + [False] * (k - 1)
    assert mc.satterthwaite(w)[0] < 3
    within = crossed_moments(tuple("abcdef"), sums, np.full(c, 10.0))
    assert within.df[0] == s - 1  # the crossed estimate; the nested one has S − T
    level = 1 - (1 - 0.95 ** (1 / k)) / 2
    floor = rows_floor(mc, w, 0.05)
    assert floor[0] == pytest.approx(stats.t.ppf(level, np.floor(mc.satterthwaite(w)[0])))
    assert np.all(floor[1:] == floor[1])
    assert floor[1] < stats.t.ppf(level, 2) / 2  # t_2's tail is 2.5× as far out
    assert floor[1] <= stats.t.ppf(level, np.floor(mc.satterthwaite(w)[1:].min())) + 1e-12


def test_one_unstable_search_widens_only_its_own_pairs() -> None:
    """Nine methods searched by 3 studies each, one of whose searches is unstable (study sd
    30× the others'): its pairs keep its own 2-df estimate and get t_2-like critical values
    (balanced over the pairs), every other pair keeps the Tukey–Kramer floor of the pool,
    as it would without that method. One common c (Hsu's, the one-study rule) would be set
    by the unstable pairs."""
    rng = np.random.default_rng(31)
    k, t, s, c = 9, 3, 12, 60
    sums = rng.binomial(10, 0.5, (k, s, c)).astype(float) + rng.normal(0, 0.5, (1, s, 1))
    sds = np.full(k, 0.3)
    sds[4] = 9.0
    sums += (rng.normal(0, 1, (k, t)) * sds[:, None])[:, np.arange(s) % t, None]
    mc = crossed_moments(tuple("abcdefghi"), sums, np.full(c, 10.0), np.arange(s) % t)
    pi, pj, w = pair_contrasts(k)
    floor = pairs_floor(mc, 0.05)
    crit = critical_value(mc, w, 0.05, floor=floor)
    unstable = (pi == 4) | (pj == 4)
    assert np.all(crit[~unstable] == pytest.approx(crit[~unstable][0]))
    assert crit[~unstable][0] < 1.3 * floor[~unstable][0]
    assert crit[unstable].min() > 2 * crit[~unstable].max()
    common = np.quantile(crit, 1.0)  # what one c for all would have to be at least
    assert common > 2 * crit[~unstable].max()


def test_intervals_are_cut_to_the_range_of_a_fraction_and_no_verdict_moves() -> None:
    """A method with its own 2-df study estimate makes every lower end wide (it might be the
    best by far); a fraction's gap to the best lies in ±1, so ``span=1`` cuts the intervals
    there and leaves every verdict as it was."""
    rng = np.random.default_rng(32)
    k, t, s, c = 6, 3, 12, 60
    sums = rng.binomial(10, 0.5, (k, s, c)).astype(float)
    sums[0] += rng.normal(0, 4, t)[np.arange(s) % t, None]
    sums[5] -= 1.5  # clearly worse
    mc = crossed_moments(tuple("abcdef"), sums, np.full(c, 10.0), np.arange(s) % t)
    assert mc.study_excess().own[0]
    wide = compare_with_best(mc, DELTA)
    cut = compare_with_best(mc, DELTA, span=1.0)
    assert wide["lower"].min() < -1 and cut["lower"].min() >= -1 and cut["upper"].max() <= 1
    assert list(cut["verdict"]) == list(wide["verdict"]) and WORSE in list(cut["verdict"])
