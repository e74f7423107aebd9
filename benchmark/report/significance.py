"""Helpers of the board statistics: Holm's step-down, the class bootstrap, Kendall τ over seeds.

The verdicts a board prints (each method against the best of the others, simultaneous over the
k − 1 comparisons, both sources of variance) are :mod:`dmlbench.report.verdicts`'. What is left
here is what they do not cover:

- :func:`holm`: Holm's step-down adjustment. The boards no longer use it (Holm against the
  observed best does not keep the family-wise rate when the best is picked from the same data,
  and Holm over all C(k, 2) pairs asks a question nobody reads the table for); it is kept, with
  its hand-computed fixture, as the baseline the simulation test of the verdicts must beat;
- :func:`class_bootstrap_interval`: the 95% interval of a hit rate, resampling whole query
  classes (the confidence table's "95% CI (queries)");
- :func:`seed_tau`: the mean Kendall τ between the rankings of two seeds, a secondary line on
  how much a single seed reorders a board (the rank uncertainty itself is P(rank 1) and
  P(top 3) from the verdicts' estimated law of the means).

``scores`` frames have columns ``method``, ``seed`` and the metric (one row per run).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

_BUDGET = 2_000_000  # resampled elements materialised at once, as in dmlbench.metrics.stats


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (Holm, Scand. J. Statistics 1979), in input order.

    The i-th smallest of m p-values is multiplied by ``m − i + 1``, then made monotone (running
    maximum) and capped at 1; rejecting where the adjusted value is below α controls the
    family-wise error rate at α, and is uniformly more powerful than plain Bonferroni. NaN
    p-values (pairs that could not be tested) stay NaN and do not count in m.
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]
    m = order.size
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def _check(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    missing = {"method", "seed", metric} - set(scores.columns)
    if missing:
        raise ValueError(f"scores lack column(s) {sorted(missing)}")
    data = scores.loc[scores[metric].notna(), ["method", "seed", metric]]
    if data.duplicated(["method", "seed"]).any():
        raise ValueError("scores have several rows for one (method, seed)")
    return data


def _resampled_means(
    values: np.ndarray, groups: np.ndarray | None, n_boot: int, seed: int
) -> np.ndarray:
    """``(n_boot, k)`` means of the ``k`` rows of ``values`` over resampled queries or clusters.

    Each query is its own cluster without ``groups``. A resample draws as many clusters as there
    are, with replacement, and the same draw serves every row (paired resampling). Done in
    chunks so at most ``_BUDGET`` elements exist at once, whatever the number of queries.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if groups is None:
        sums, counts = values, np.ones(values.shape[1])
    else:
        _, codes = np.unique(np.asarray(groups).reshape(-1), return_inverse=True)
        sums = np.stack([np.bincount(codes, weights=row) for row in values])
        counts = np.bincount(codes).astype(np.float64)
    rng = np.random.default_rng(seed)
    n = counts.size
    means = np.empty((n_boot, values.shape[0]))
    chunk = max(1, _BUDGET // n)  # one (chunk, n) gather at a time: row by row is also faster
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
        size = n if groups is None else counts[idx].sum(axis=1)
        total = np.stack([row[idx].sum(axis=1) for row in sums], axis=1)
        means[start : start + len(idx)] = total / np.reshape(size, (-1, 1))
    return means


def class_bootstrap_interval(
    hits: np.ndarray, groups: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval ``(lo, hi)`` of the mean hit rate, resampling query classes.

    Why classes and not queries: the queries of one class are retrieved against the same gallery
    items of that class, so their hits rise and fall together (a class the model confuses with
    another fails for most of its queries). Resampling queries as if independent, as
    :func:`~dmlbench.metrics.stats.bootstrap_mean` does, understates the spread; resampling whole
    classes (a cluster bootstrap; Davison & Hinkley, "Bootstrap Methods and their Application",
    CUP 1997, on hierarchical data) keeps that dependence. The statistic is the pooled hit rate
    of the resampled queries, i.e. Recall@1 as evaluation computes it. Fewer than two classes
    give ``(nan, nan)``: there is no between-class spread to estimate.
    """
    hits = np.asarray(hits, dtype=np.float64).reshape(-1)
    groups = np.asarray(groups).reshape(-1)
    if hits.shape != groups.shape:
        raise ValueError("hits and groups differ in length")
    if np.unique(groups).size < 2:
        return math.nan, math.nan
    means = _resampled_means(hits, groups, n_boot, seed)[:, 0]
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def seed_ranks(scores: pd.DataFrame, metric: str, higher_is_better: bool = True) -> pd.DataFrame:
    """Ranks of the methods (columns) within each seed (rows), rank 1 best, ties averaged; only
    seeds on which every method has a score are kept, since a rank among fewer methods means
    something else."""
    wide = _check(scores, metric).pivot(index="seed", columns="method", values=metric).dropna()
    return wide.rank(axis=1, ascending=not higher_is_better, method="average")


def seed_tau(scores: pd.DataFrame, metric: str, higher_is_better: bool = True) -> tuple[float, int]:
    """Mean Kendall τ-b (``scipy.stats.kendalltau``) between the rankings of every pair of
    complete seeds, and the number of those seeds; τ is NaN with fewer than two seeds or two
    methods."""
    ranks = seed_ranks(scores, metric, higher_is_better)
    taus = [
        _tau(ranks.iloc[i], ranks.iloc[j]) for i, j in itertools.combinations(range(len(ranks)), 2)
    ]
    return _nanmean(taus), len(ranks)


def tau_summary(scores: pd.DataFrame, metric: str, higher_is_better: bool = True) -> str | None:
    """``mean Kendall τ between two seeds' rankings 0.79 (5 seeds)``; None with fewer than
    two complete seeds or two methods."""
    tau, n = seed_tau(scores, metric, higher_is_better)
    if n < 2 or math.isnan(tau):
        return None
    return f"mean Kendall τ between two seeds' rankings {tau:.2f} ({n} seeds)"


def _tau(x: pd.Series, y: pd.Series) -> float:
    """Kendall τ-b; NaN with fewer than two methods or a ranking that ties them all."""
    if len(x) < 2:
        return math.nan
    return float(stats.kendalltau(x.to_numpy(), y[x.index].to_numpy()).statistic)


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan
