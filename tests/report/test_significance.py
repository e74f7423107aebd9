"""Holm (the baseline the verdicts must beat), the class bootstrap and Kendall τ over seeds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dmlbench.metrics.stats import bootstrap_mean
from dmlbench.report import significance
from dmlbench.report.significance import class_bootstrap_interval, holm, seed_tau, tau_summary


def board(values: dict[str, list[float]], metric: str = "recall@1") -> pd.DataFrame:
    """One row per (method, seed); NaN values mean the seed was not run."""
    rows = [
        {"method": m, "seed": s, metric: v}
        for m, vs in values.items()
        for s, v in enumerate(vs)
        if not math.isnan(v)
    ]
    return pd.DataFrame(rows)


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


# --- Kendall τ over seeds ----------------------------------------------------------------------


def stable_board() -> pd.DataFrame:
    return board(
        {
            "a": [0.90, 0.90, 0.90, 0.80, 0.90],
            "b": [0.80, 0.80, 0.80, 0.90, 0.80],  # seed 3 swaps a and b
            "c": [0.70, 0.70, 0.60, 0.70, 0.70],
            "d": [0.60, 0.50, 0.70, 0.60, 0.60],  # seed 2 swaps c and d
        }
    )


def test_seed_tau_matches_scipy_and_flips_with_the_direction() -> None:
    scores = stable_board()
    wide = scores.pivot(index="seed", columns="method", values="recall@1")
    taus = [stats.kendalltau(wide.loc[i], wide.loc[j]).statistic
            for i, j in itertools.combinations(wide.index, 2)]  # fmt: skip
    tau, n = seed_tau(scores, "recall@1")
    assert n == 5 and tau == pytest.approx(np.mean(taus))
    flipped = scores.assign(**{"recall@1": -scores["recall@1"]})
    assert seed_tau(flipped, "recall@1", higher_is_better=False)[0] == pytest.approx(tau)
    assert tau_summary(scores, "recall@1") == (
        f"mean Kendall τ between two seeds' rankings {np.mean(taus):.2f} (5 seeds)"
    )


def test_one_seed_or_an_incomplete_seed_gives_no_tau() -> None:
    assert tau_summary(board({"a": [0.9], "b": [0.8]}), "recall@1") is None
    partial = board({"a": [0.9, 0.8, 0.7], "b": [0.8, math.nan, 0.6]})
    assert seed_tau(partial, "recall@1")[1] == 2  # seed 1 lacks b: not a complete ranking
