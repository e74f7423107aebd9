"""Comparisons with the best (dmlbench.report.verdicts): hand-computed fixtures, and a
simulation against a known truth with seed and class components like the committed boards'."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dmlbench.report.verdicts import (
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    Replicates,
    compare_with_best,
    crossed_replicates,
    seed_replicates,
)

SEEDS = 12  # the tuned boards' seed count the simulation chose (docs/reports.md)
DELTA = 0.025  # a 2.5-point practical-equivalence margin on Recall@1


def two_methods(spread: float) -> Replicates:
    """a at 0.60, b at 0.50; every replicate moves the gap by exactly ±spread."""
    boot = np.array([[0.60, 0.50 + spread], [0.60, 0.50 - spread]] * 50)
    return Replicates(("a", "b"), np.array([0.60, 0.50]), boot)


def test_hand_computed_interval_and_verdicts() -> None:
    """With every replicate's gap 0.1 ± 0.01, the studentised deviation is 1 in every
    replicate (up to the ddof), so c ≈ 1 and the intervals are 0.1 ± se."""
    out = compare_with_best(two_methods(0.01), delta=0.05)
    se = np.std([0.09, 0.11] * 50, ddof=1)
    c = 0.01 / se
    assert out.loc["b", "difference"] == pytest.approx(-0.10)
    assert out.loc["b", "lower"] == pytest.approx(-0.10 - c * se)
    assert out.loc["b", "upper"] == pytest.approx(-0.10 + c * se)
    assert out.loc["b", "verdict"] == WORSE
    assert out.loc["a", "verdict"] == UNDECIDED  # [0.09, 0.11] is not inside ±0.05
    assert compare_with_best(two_methods(0.01), delta=0.2).loc["a", "verdict"] == EQUIVALENT
    assert list(out.index) == ["a", "b"] and out.loc["a", "p_rank1"] == 1.0


def test_an_interval_across_zero_is_undecided_not_equivalent() -> None:
    out = compare_with_best(two_methods(0.3), delta=0.05)
    assert set(out["verdict"]) == {UNDECIDED}


def test_lower_is_better_metrics_flip_the_direction() -> None:
    reps = two_methods(0.01)
    out = compare_with_best(reps, delta=0.05, higher_is_better=False)
    assert out.loc["a", "verdict"] == WORSE and list(out.index) == ["b", "a"]


def test_seed_replicates_keep_seeds_paired() -> None:
    values = np.array([[0.5, 0.6, 0.7], [0.4, 0.5, 0.6]])  # b is a minus 0.1 on every seed
    reps = seed_replicates(("a", "b"), values, n_boot=200)
    assert np.allclose(reps.boot[:, 0] - reps.boot[:, 1], 0.1)


def board(
    rng: np.random.Generator, gaps: np.ndarray, seeds: int = SEEDS
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class Recall@1 hit sums of k methods × seeds × 100 classes of 20 queries, with a
    seed component (sd 1.1 points per method and seed), a class component shared by every
    method (sd 15 points) and a method × class interaction (sd 3 points): the committed
    glyphs-mini boards' orders of magnitude."""
    classes, queries = 100, 20
    p = (
        0.6
        - gaps[:, None, None]
        + rng.normal(0, 0.011, (len(gaps), seeds, 1))
        + rng.normal(0, 0.15, classes)[None, None, :]
        + rng.normal(0, 0.03, (len(gaps), 1, classes))
    )
    return rng.binomial(queries, p.clip(0.01, 0.99)).astype(float), np.full(classes, 20.0)


def holm_against_the_observed_best(sums: np.ndarray, counts: np.ndarray) -> bool:
    """The procedure this replaces: paired t-tests over seeds of the observed best against
    each other method, Holm over k − 1; True when any method is called worse."""
    per_seed = sums.sum(axis=2) / counts.sum()
    best = int(per_seed.mean(axis=1).argmax())
    p = sorted(
        stats.ttest_rel(per_seed[best], per_seed[j]).pvalue
        for j in range(len(per_seed))
        if j != best
    )
    return p[0] <= 0.05 / len(p)  # Holm's first step decides whether anything is rejected


@pytest.mark.slow
def test_simulated_boards_keep_the_error_rate_and_find_a_three_point_gap(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """20 equal methods: the rate of boards with any *worse* verdict ≤ α + 2 Monte-Carlo
    standard errors, where Holm against the observed best exceeds it; one method 3 points
    behind: *worse* on ≥ 80% of boards at the chosen seed count."""
    rng = np.random.default_rng(2026)
    n, k, methods = 200, 20, tuple(str(i) for i in range(20))
    false_worse = holm_false = found = 0
    for i in range(n):
        sums, counts = board(rng, np.zeros(k))
        out = compare_with_best(crossed_replicates(methods, sums, counts, 300, i), DELTA)
        false_worse += bool((out["verdict"] == WORSE).any())
        holm_false += holm_against_the_observed_best(sums, counts)
        gaps = np.zeros(k)
        gaps[5] = 0.03
        sums, counts = board(rng, gaps)
        out = compare_with_best(crossed_replicates(methods, sums, counts, 300, i), DELTA)
        found += out.loc["5", "verdict"] == WORSE
    mc = 2 * np.sqrt(0.05 * 0.95 / n)
    with capsys.disabled():
        print(
            f"\nfamily-wise rate of false 'worse': {false_worse / n:.3f} (Holm against the "
            f"observed best: {holm_false / n:.3f}); power for a 3-point gap at {SEEDS} seeds: "
            f"{found / n:.3f}"
        )
    assert false_worse / n <= 0.05 + mc
    assert holm_false / n > 0.05 + mc
    assert found / n >= 0.80


def test_a_method_ten_points_behind_is_never_equivalent_or_not_worse() -> None:
    rng = np.random.default_rng(7)
    gaps = np.zeros(20)
    gaps[3] = 0.10
    for i in range(20):
        sums, counts = board(rng, gaps, seeds=3)
        reps = crossed_replicates(tuple(map(str, range(20))), sums, counts, 300, i)
        assert compare_with_best(reps, DELTA).loc["3", "verdict"] == WORSE


@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_seed_bootstrap_variance_is_the_unbiased_one(seeds: int) -> None:
    """Resampling S seeds alone gives var(mean) = (S − 1)/S · s²/S; the spread seed values
    give s²/S, the unbiased variance of a mean of S seeds."""
    values = np.random.default_rng(seeds).normal(0.5, 0.02, (1, seeds))
    reps = seed_replicates(("a",), values, n_boot=40_000, seed=1)
    unbiased = values.var(ddof=1) / seeds
    assert reps.boot[:, 0].var() == pytest.approx(unbiased, rel=0.04)
    assert reps.boot[:, 0].mean() == pytest.approx(values.mean(), abs=1e-3)
