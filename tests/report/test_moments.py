"""Seeds nested in search studies (dmlbench.report.moments): the three-level moment estimate
against the textbook balanced ANOVA, its unbiasedness where the crossed estimate that ignores
the studies falls short, one study reducing to the crossed estimate to the bit, the seeds-only
variant and the study part's degrees of freedom."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dmlbench.report.moments import crossed_moments, seed_moments

W = np.array([[1.0, -1.0]])


def nested_anova(d: np.ndarray, t: int) -> tuple[float, float]:
    """(unbiased, within) variance of the grand mean of a (T·n) × C array whose seed s is in
    study s mod T, by the textbook sums of the balanced three-level layout:
    (MS_study + MS_class − MS_study×class) / (TnC), and the study component truncated at 0,
    (MS_seed(study) + MS_class − MS_resid) / (TnC)."""
    s, c = d.shape
    n = s // t
    x = np.stack([d[np.arange(s) % t == i] for i in range(t)])  # (T, n, C)
    g = x.mean()
    st = x.mean(axis=(1, 2))
    cl = x.mean(axis=(0, 1))
    stc = x.mean(axis=1)  # (T, C)
    sd = x.mean(axis=2)  # (T, n)
    ms_st = n * c * ((st - g) ** 2).sum() / (t - 1)
    ms_cl = t * n * ((cl - g) ** 2).sum() / (c - 1)
    ms_stc = n * ((stc - st[:, None] - cl[None, :] + g) ** 2).sum() / ((t - 1) * (c - 1))
    ms_sd = c * ((sd - st[:, None]) ** 2).sum() / (t * (n - 1))
    r = x - sd[:, :, None] - stc[:, None, :] + st[:, None, None]
    ms_r = (r**2).sum() / (t * (n - 1) * (c - 1))
    return (ms_st + ms_cl - ms_stc) / (s * c), (ms_sd + ms_cl - ms_r) / (s * c)


def test_nested_estimate_is_the_three_level_anova_of_the_differences() -> None:
    rng = np.random.default_rng(4)
    t, s, c = 3, 12, 25
    sums = rng.binomial(8, 0.5, (2, s, c)).astype(float) + rng.normal(0, 2, (2, s, 1))
    sums += rng.normal(0, 3, (2, t, 1))[:, np.arange(s) % t]
    mc = crossed_moments(("a", "b"), sums, np.full(c, 8.0), np.arange(s) % t)
    assert mc.nested and mc.studies == 3
    full, within = nested_anova((sums[0] - sums[1]) * c / (8.0 * c), t)
    cov = mc.cov
    assert cov[0, 0] - 2 * cov[0, 1] + cov[1, 1] == pytest.approx(full)
    assert mc.contrasts(W)[0] == pytest.approx(max(full, within))


def test_one_study_is_the_crossed_estimate_to_the_bit() -> None:
    """All seeds in study 0 (every committed record), or each seed its own study: the very
    matrices of the crossed estimate, so no committed number moves."""
    rng = np.random.default_rng(6)
    sums = rng.binomial(5, 0.4, (4, 6, 30)).astype(float)
    counts = np.full(30, 5.0)
    plain = crossed_moments(tuple("abcd"), sums, counts)
    for studies in (np.zeros(6, int), np.arange(6)):
        same = crossed_moments(tuple("abcd"), sums, counts, studies)
        assert not same.nested
        for x, y in zip(plain.parts, same.parts, strict=True):
            assert np.array_equal(x, y)
        assert plain.seed_sim is not None and same.seed_sim is not None
        assert np.array_equal(plain.seed_sim, same.seed_sim)


def test_nested_estimate_is_unbiased_where_ignoring_the_studies_is_not() -> None:
    """2,000 arrays, 3 studies × 4 seeds × 20 classes: study (sd 1), seed (sd 0.5), class
    (sd 1) and seed × class (sd 2) parts. The nested estimate's mean is Var(ȳ) = 1/3 + 0.25/12
    + 1/20 + 4/240 (within 3 Monte-Carlo standard errors); the crossed estimate over the 12
    seeds as if exchangeable misses most of the study part."""
    rng = np.random.default_rng(8)
    n, t, s, c = 2000, 3, 12, 20
    y = (
        rng.normal(0, 1, (n, t, 1))[:, np.arange(s) % t]
        + rng.normal(0, 0.5, (n, s, 1))
        + rng.normal(0, 1, (n, 1, c))
        + rng.normal(0, 2, (n, s, c))
    )
    studies = np.arange(s) % t
    nested = np.array(
        [crossed_moments(("a",), y[i][None], np.ones(c), studies).cov[0, 0] for i in range(n)]
    )
    crossed = np.array(
        [crossed_moments(("a",), y[i][None], np.ones(c)).cov[0, 0] for i in range(n)]
    )
    truth = 1 / t + 0.25 / s + 1 / c + 4 / (s * c)
    assert abs(nested.mean() - truth) < 3 * nested.std() / np.sqrt(n)
    assert crossed.mean() < 0.5 * truth


def test_seeds_only_nested_is_the_study_mean_square_floored_by_the_within_one() -> None:
    rng = np.random.default_rng(9)
    values = rng.normal(0, 1, (2, 9)) + rng.normal(0, 2, (2, 3))[:, np.arange(9) % 3]
    mc = seed_moments(("a", "b"), values, np.arange(9) % 3)
    d = values[0] - values[1]
    means = np.array([d[np.arange(9) % 3 == i].mean() for i in range(3)])
    ms_study = 3 * ((means - d.mean()) ** 2).sum() / 2
    ms_within = sum(((d[np.arange(9) % 3 == i] - means[i]) ** 2).sum() for i in range(3)) / 6
    assert mc.contrasts(W)[0] == pytest.approx(max(ms_study, ms_within) / 9)
    if ms_study > ms_within:  # the study part dominates: about its 2 df
        assert mc.satterthwaite(W)[0] == pytest.approx(2.0, rel=1e-3)


def test_a_difference_dominated_by_the_studies_has_about_t_minus_1_df() -> None:
    rng = np.random.default_rng(10)
    s, c = 12, 40
    sums = rng.normal(0, 5, (2, 3, 1))[:, np.arange(s) % 3] + 0.01 * rng.normal(size=(2, s, c))
    mc = crossed_moments(("a", "b"), sums, np.ones(c), np.arange(s) % 3)
    assert mc.satterthwaite(W)[0] == pytest.approx(2.0, rel=0.05)
    assert mc.between_studies[0, 0] > 0


def _study_board(
    rng: np.random.Generator, sds: np.ndarray, t: int = 3, s: int = 12, c: int = 60
) -> np.ndarray:
    """Per-class hit sums (k × S × C, 10 queries per class) of methods whose studies shift
    them by normal draws with sd ``sds`` (hits per class), seed s in study s mod T."""
    k = len(sds)
    sums = rng.binomial(10, 0.5, (k, s, c)).astype(float) + rng.normal(0, 0.5, (1, s, 1))
    luck = rng.normal(0, 1, (k, t)) * sds[:, None]
    return sums + luck[:, np.arange(s) % t, None]


def test_a_catastrophic_search_keeps_its_own_estimate_and_leaves_the_others_alone() -> None:
    """Eight methods alike and one whose studies disagree 30× more: the F test gives that one
    its own (2-df) estimate, and the others' study component is the pool of the eight, the
    same as on the board without it; pooling all nine instead would widen the eight."""
    rng = np.random.default_rng(21)
    sds = np.full(9, 0.3)
    sds[4] = 9.0
    sums = _study_board(rng, sds)
    studies = np.arange(12) % 3
    mc = crossed_moments(tuple("abcdefghi"), sums, np.full(60, 10.0), studies)
    ex = mc.study_excess()
    assert list(ex.own) == [i == 4 for i in range(9)]
    alone = crossed_moments(
        tuple("abcdefgh"), np.delete(sums, 4, axis=0), np.full(60, 10.0), studies
    )
    rest = np.delete(ex.value, 4)
    assert np.allclose(rest, alone.study_excess().value, rtol=0.25)  # P differs with k
    assert ex.value[4] > 20 * rest.max()
    pooled_all = replace(mc, own_level=0.0).study_excess()  # level 0: nobody leaves the pool
    assert not pooled_all.own.any() and np.delete(pooled_all.value, 4).mean() > 3 * rest.mean()


def test_alike_searches_share_the_pool() -> None:
    """Nine methods with the same study sd: nobody leaves the pool, every method's component
    is the pool's, on the pool's df ((n − 1)(T − 1) = 16 at most), not 2."""
    rng = np.random.default_rng(22)
    mc = crossed_moments(
        tuple("abcdefghi"), _study_board(rng, np.full(9, 2.0)), np.full(60, 10.0), np.arange(12) % 3
    )
    ex = mc.study_excess()
    assert not ex.own.any()
    assert np.ptp(ex.value) == 0 and np.all(ex.nu > 4)
