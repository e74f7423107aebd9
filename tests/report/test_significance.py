"""Paired seed tests, Holm, class bootstrap, best set and ranking stability of one board."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dmlbench.metrics.stats import bootstrap_mean
from dmlbench.report import significance
from dmlbench.report.significance import (
    BestSet,
    bootstrap_rank_stability,
    class_bootstrap_interval,
    holm,
    method_means,
    not_worse_than_best,
    paired_bootstrap,
    paired_seed_tests,
    ranking_stability,
    stability_summary,
)


def board(values: dict[str, list[float]], metric: str = "recall@1") -> pd.DataFrame:
    """One row per (method, seed); NaN values mean the seed was not run."""
    rows = [
        {"method": m, "seed": s, metric: v}
        for m, vs in values.items()
        for s, v in enumerate(vs)
        if not math.isnan(v)
    ]
    return pd.DataFrame(rows)


def noisy(rng: np.random.Generator, means: dict[str, float], seeds: int, sd: float) -> pd.DataFrame:
    return board({m: list(mu + rng.normal(0, sd, seeds)) for m, mu in means.items()})


# --- Holm -------------------------------------------------------------------------------------


def test_holm_hand_worked_example() -> None:
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.3, 0.7, 0.8]), [0.9, 1.0, 1.0])  # 1.4 capped at 1
    out = holm([0.01, math.nan, 0.02])  # NaN is not counted in m
    np.testing.assert_allclose(out[[0, 2]], [0.02, 0.02])
    assert math.isnan(out[1])
    assert holm([]).size == 0


def test_holm_is_monotone_and_never_below_raw() -> None:
    p = np.random.default_rng(1).uniform(0, 0.2, 30)
    adj = holm(p)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0) and np.all(adj >= p) and np.all(adj <= 1)


def test_holm_matches_statsmodels() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = np.random.default_rng(2).uniform(0, 0.3, 25)
    np.testing.assert_allclose(holm(p), multitest.multipletests(p, method="holm")[1])


# --- paired seed tests ------------------------------------------------------------------------


def test_paired_seed_tests_equal_scipy_and_are_holm_corrected() -> None:
    nan = math.nan
    scores = board(
        {
            "a": [0.71, 0.74, 0.70, 0.73],
            "b": [0.69, 0.70, 0.70, 0.71],
            "c": [0.60, 0.66, 0.62, nan],  # seed 3 missing: pairs use seeds 0-2
            "d": [0.50, nan, nan, nan],  # one seed: no test
        }
    )
    t = paired_seed_tests(scores, "recall@1")
    assert list(zip(t["a"], t["b"], strict=True)) == list(itertools.combinations("abcd", 2))
    ab = t.iloc[0]
    expected = stats.ttest_rel([0.71, 0.74, 0.70, 0.73], [0.69, 0.70, 0.70, 0.71]).pvalue
    assert ab["n_seeds"] == 4 and ab["p"] == pytest.approx(expected, rel=1e-12)
    assert ab["mean_diff"] == pytest.approx(0.02)
    ac = t[(t["a"] == "a") & (t["b"] == "c")].iloc[0]
    assert ac["n_seeds"] == 3
    assert ac["p"] == pytest.approx(stats.ttest_rel([0.71, 0.74, 0.70], [0.60, 0.66, 0.62]).pvalue)
    no_test = t[t["b"] == "d"]
    assert no_test["p"].isna().all() and no_test["note"].str.contains("1 shared seed").all()
    np.testing.assert_allclose(t["p_holm"], holm(t["p"].to_numpy()), equal_nan=True)


def test_paired_seed_tests_lower_is_better_orders_best_first() -> None:
    scores = board({"far": [3.0, 3.2, 3.1], "near": [1.0, 1.1, 1.3]}, metric="mld@1")
    t = paired_seed_tests(scores, "mld@1", higher_is_better=False)
    assert (t.iloc[0]["a"], t.iloc[0]["b"]) == ("near", "far")
    assert t.iloc[0]["mean_diff"] == pytest.approx((-2.0 - 2.1 - 1.8) / 3)
    assert list(method_means(scores, "mld@1", higher_is_better=False).index) == ["near", "far"]


def test_duplicate_runs_are_refused() -> None:
    scores = pd.DataFrame({"method": ["a", "a"], "seed": [0, 0], "recall@1": [0.1, 0.2]})
    with pytest.raises(ValueError, match="several rows"):
        paired_seed_tests(scores, "recall@1")


# --- bootstrap over queries and classes ------------------------------------------------------


def test_class_bootstrap_is_wider_when_classes_fail_as_a_whole() -> None:
    rng = np.random.default_rng(3)
    classes = np.repeat(np.arange(100), 20)
    hits = np.repeat(rng.random(100) < 0.6, 20).astype(float)  # whole classes 0 or 1
    lo, hi = class_bootstrap_interval(hits, classes, n_boot=500)
    qlo, qhi = bootstrap_mean(hits, n_boot=500)
    assert lo < hits.mean() < hi
    assert hi - lo > 3 * (qhi - qlo)


def test_class_bootstrap_covers_the_true_rate() -> None:
    rng = np.random.default_rng(4)
    n_sim, n_classes, per_class, truth = 200, 40, 10, 0.5
    covered = naive = 0
    for i in range(n_sim):
        rate = rng.beta(0.5, 0.5, n_classes)  # mean 0.5, strong between-class spread
        hits = (rng.random((n_classes, per_class)) < rate[:, None]).astype(float).ravel()
        groups = np.repeat(np.arange(n_classes), per_class)
        lo, hi = class_bootstrap_interval(hits, groups, n_boot=200, seed=i)
        covered += lo <= truth <= hi
        qlo, qhi = bootstrap_mean(hits, n_boot=200, seed=i)
        naive += qlo <= truth <= qhi
    assert 0.86 <= covered / n_sim <= 0.99
    assert naive / n_sim < 0.8  # queries resampled as independent: far below 95%


def test_class_bootstrap_chunking_and_degenerate_input(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 50, 2000)
    hits = (rng.random(2000) < 0.3).astype(float)
    wide = class_bootstrap_interval(hits, groups, n_boot=400)
    monkeypatch.setattr(significance, "_BUDGET", 60)  # one resample per chunk
    narrow = class_bootstrap_interval(hits, groups, n_boot=400)
    np.testing.assert_allclose(narrow, wide, atol=0.01)
    assert all(math.isnan(v) for v in class_bootstrap_interval(hits, np.zeros(2000)))
    with pytest.raises(ValueError):
        class_bootstrap_interval(hits, groups[:10])


def test_paired_bootstrap_separates_different_models_not_identical_ones() -> None:
    rng = np.random.default_rng(6)
    a = (rng.random(500) < 0.8).astype(float)
    b = (rng.random(500) < 0.5).astype(float)
    r = paired_bootstrap(a, b, n_boot=500)
    assert r.diff == pytest.approx(a.mean() - b.mean())
    assert r.p <= 0.01 and 0 < r.lo < r.diff < r.hi
    same = paired_bootstrap(a, a.copy(), n_boot=500)
    assert (same.diff, same.lo, same.hi, same.p) == (0.0, 0.0, 0.0, 1.0)
    classes = np.repeat(np.arange(50), 10)
    by_class = paired_bootstrap(a, b, groups=classes, n_boot=500)
    assert by_class.diff == pytest.approx(r.diff) and by_class.p <= 0.01


def test_paired_bootstrap_p_is_large_for_a_tiny_gap() -> None:
    a = np.zeros(400)
    a[:200] = 1.0
    b = a.copy()
    b[0], b[300] = 0.0, 1.0  # one query lost, one gained: same mean, different hits
    b[301] = 1.0  # one net query better
    r = paired_bootstrap(a, b, n_boot=500)
    assert r.p > 0.3 and r.lo <= 0 <= r.hi


# --- best set ---------------------------------------------------------------------------------


def best_set(scores: pd.DataFrame, higher: bool = True, metric: str = "recall@1") -> BestSet:
    tests = paired_seed_tests(scores, metric, higher)
    return not_worse_than_best(tests, method_means(scores, metric, higher), 0.05, higher)


def test_one_clear_winner_over_five_seeds() -> None:
    scores = noisy(np.random.default_rng(7), {"a": 0.80, "b": 0.70, "c": 0.65}, 5, 0.005)
    r = best_set(scores)
    assert (r.best, r.methods, r.claimable) == ("a", ["a"], True)


def test_a_tie_within_seed_noise_keeps_both() -> None:
    scores = board(
        {
            "a": [0.70, 0.72, 0.69, 0.71, 0.70],
            "b": [0.71, 0.70, 0.70, 0.72, 0.69],  # 0.002 lower on average, either side per seed
            "c": [0.50, 0.51, 0.49, 0.52, 0.50],
        }
    )
    r = best_set(scores)
    assert (r.best, r.methods, r.claimable) == ("a", ["a", "b"], True)


def test_single_seed_claims_nothing() -> None:
    scores = board({"a": [0.9], "b": [0.5], "c": [0.1]})
    r = best_set(scores)
    assert r.methods == ["a", "b", "c"] and not r.claimable and r.best == "a"
    assert "no difference can be claimed" in r.note


def test_best_set_when_lower_is_better() -> None:
    scores = noisy(np.random.default_rng(9), {"a": 1.0, "b": 2.0}, 5, 0.01)
    r = best_set(scores.rename(columns={"recall@1": "mld@1"}), False, "mld@1")
    assert (r.best, r.methods) == ("a", ["a"])


# --- ranking stability ------------------------------------------------------------------------


def stable_board() -> pd.DataFrame:
    return board(
        {
            "a": [0.90, 0.90, 0.90, 0.80, 0.90],
            "b": [0.80, 0.80, 0.80, 0.90, 0.80],  # seed 3 swaps a and b
            "c": [0.70, 0.70, 0.60, 0.70, 0.70],
            "d": [0.60, 0.50, 0.70, 0.60, 0.60],  # seed 2 swaps c and d
        }
    )


def test_ranking_stability_counts_seeds_and_matches_scipy_tau() -> None:
    scores = stable_board()
    r = ranking_stability(scores, "recall@1")
    assert r.top == ("a", "b", "c") and (r.held, r.total) == (3, 5)
    wide = scores.pivot(index="seed", columns="method", values="recall@1")
    taus = [stats.kendalltau(wide.loc[i], wide.loc[j]).statistic
            for i, j in itertools.combinations(wide.index, 2)]  # fmt: skip
    assert r.mean_tau == pytest.approx(np.mean(taus))
    assert stability_summary(r) == (
        f"top-3 order (a > b > c) holds in 3 of 5 seeds; mean Kendall τ between seeds "
        f"{np.mean(taus):.2f}"
    )


def test_ranking_stability_lower_is_better_and_one_seed() -> None:
    flipped = stable_board().assign(**{"recall@1": lambda d: -d["recall@1"]})
    r = ranking_stability(flipped, "recall@1", higher_is_better=False)
    assert r.top == ("a", "b", "c") and r.held == 3
    one = ranking_stability(board({"a": [0.9], "b": [0.8]}), "recall@1")
    assert one.total == 1 and math.isnan(one.mean_tau)
    assert "cannot be assessed" in stability_summary(one)


def test_bootstrap_rank_stability() -> None:
    rng = np.random.default_rng(10)
    rates = {"a": 0.9, "b": 0.6, "c": 0.3, "d": 0.301}
    hits = {m: (rng.random(1000) < p).astype(float) for m, p in rates.items()}
    r = bootstrap_rank_stability({m: hits[m] for m in "abc"}, n_boot=200)
    assert (r.top, r.held, r.total, r.mean_tau) == (("a", "b", "c"), 200, 200, 1.0)
    close = bootstrap_rank_stability(hits, n_boot=200, top=4)  # c and d swap often
    assert 0 < close.held < 200 and 0.6 < close.mean_tau < 1.0
    classes = bootstrap_rank_stability(hits, groups=np.arange(1000) % 40, n_boot=100)
    assert "class resamples" in stability_summary(classes)
