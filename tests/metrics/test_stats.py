"""Confidence intervals: Student t over seeds, bootstrap over queries, per-query R@1 hits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.metrics.stats import bootstrap_mean, recall_at_1_hits_and_classes, t_interval
from dmlbench.protocol import MetricsSpec


def test_t_interval_matches_the_textbook_formula() -> None:
    x = [0.60, 0.64, 0.62]
    mean, half = t_interval(x)
    # t(0.975, 2) = 4.302652729749464 (tables); sem = std(ddof=1) / sqrt(3) = 0.02 / sqrt(3)
    assert mean == pytest.approx(0.62)
    assert half == pytest.approx(4.302652729749464 * 0.02 / math.sqrt(3))


def test_t_interval_with_one_value_has_no_width() -> None:
    mean, half = t_interval([0.5])
    assert mean == 0.5 and math.isnan(half)


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_queries() -> None:
    rng = np.random.default_rng(0)
    small, large = rng.random(100) < 0.7, rng.random(10_000) < 0.7
    lo_s, hi_s = bootstrap_mean(small, seed=1)
    lo_l, hi_l = bootstrap_mean(large, seed=1)
    assert lo_s < small.mean() < hi_s and lo_l < large.mean() < hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s) / 5  # ~ 1/sqrt(n): 10× narrower for 100× queries
    # the normal approximation of a proportion's interval, as an independent check
    se = math.sqrt(large.mean() * (1 - large.mean()) / large.size)
    assert hi_l - lo_l == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert bootstrap_mean(large, seed=1) == (lo_l, hi_l)  # seeded


@pytest.mark.parametrize("split", ["all", "query-gallery"])
def test_hits_average_to_the_evaluator_s_recall_at_1(split: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    labels = rng.integers(0, 40, size=300)
    labels[0] = 999  # a class with a single image: not scored
    q = g = None
    if split == "query-gallery":
        q, g = np.arange(0, 300, 3), np.setdiff1d(np.arange(300), np.arange(0, 300, 3))
    spec = MetricsSpec(recall_at=[1], nmi=False, map_at_r=False, r_precision=False)
    hits, classes = recall_at_1_hits_and_classes(x, labels, q, g)
    assert classes.shape == hits.shape and 999 not in classes
    assert hits.mean() == pytest.approx(embedding_metrics(x, labels, spec, q, g)["recall@1"])
    assert hits.size == embedding_metrics(x, labels, spec, q, g)["queries"]
