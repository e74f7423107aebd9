"""Confidence intervals: over seeds (Student t) and over queries (bootstrap).

Two different questions, so two intervals:

- *Would another seed give a different number?* The mean over the protocol's seeds with a 95%
  Student-t interval, ``mean ± t(0.975, n−1) · std / √n`` (std with ddof=1). Three seeds give
  a wide interval, honestly so.
- *Would other test queries give a different number?* A percentile bootstrap over queries of
  Recall@1 for one trained model: resample the per-query hits (1 if the nearest neighbour
  shares the query's class) with replacement ``n_boot`` times and take the 2.5th and 97.5th
  percentiles. It is computed at evaluation time and stored in the record as
  ``ci_recall@1_lo`` / ``ci_recall@1_hi``.
"""

from __future__ import annotations

import math

import numpy as np


def t_interval(values: np.ndarray | list[float], level: float = 0.95) -> tuple[float, float]:
    """The mean and the half-width of its Student-t interval: ``(mean, half_width)``.

    One value (or none) has no spread estimate: the half-width is ``nan``, which tables show
    as "n/a" rather than a misleading 0.
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan
    return mean, t_half_width(float(x.std(ddof=1)), int(x.size), level)


def t_half_width(std: float, n: int, level: float = 0.95) -> float:
    """The half-width of the Student-t interval of a mean of ``n`` values whose sample standard
    deviation is ``std`` (what a summary table keeps); ``nan`` below two values."""
    from scipy import stats

    if n < 2 or not math.isfinite(std):
        return math.nan
    sem = std / math.sqrt(n)  # then times t: the order the committed CSVs were computed in
    return float(stats.t.ppf(0.5 + level / 2, n - 1)) * sem


def bootstrap_mean(
    hits: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval ``(lo, hi)`` of the mean of per-query ``hits``.

    Resampling is done in chunks so that 60k queries × 1000 resamples never materialise as one
    array of indices.
    """
    hits = np.asarray(hits, dtype=np.float64).reshape(-1)
    if hits.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // hits.size)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        idx = rng.integers(0, hits.size, size=(stop - start, hits.size))
        means[start:stop] = hits[idx].mean(axis=1)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def recall_at_1_hits_and_classes(
    embeddings: np.ndarray,
    labels: np.ndarray,
    queries: np.ndarray | None = None,
    gallery: np.ndarray | None = None,
    normalize: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-query 0/1 (does the nearest gallery item share the query's class?) and the class of
    each scored query (the bootstrap's groups: queries of one class share their gallery
    positives, so they are resampled together).

    Queries are those :func:`dmlbench.metrics.retrieval.embedding_metrics` scores (with at
    least one positive in the gallery), so the hits' mean equals its ``recall@1``.
    """
    from dmlbench.metrics.retrieval import knn, metric_space

    x = metric_space(embeddings, normalize)
    labels = np.asarray(labels).reshape(-1)
    same = queries is None
    q = np.arange(len(x)) if queries is None else np.asarray(queries)
    g = np.arange(len(x)) if gallery is None else np.asarray(gallery)
    classes, counts = np.unique(labels[g], return_counts=True)
    pos = np.searchsorted(classes, labels[q]).clip(0, len(classes) - 1)
    positives = np.where(classes[pos] == labels[q], counts[pos], 0) - (1 if same else 0)
    q = q[positives > 0]
    if q.size == 0:
        return np.zeros(0), labels[q]
    nn = knn(x[q], x[g], 1, q if same else None)[:, 0]
    return (labels[g][nn] == labels[q]).astype(np.float64), labels[q]
