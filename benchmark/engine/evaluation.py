"""Scoring embeddings of a split: the one function behind every number a record carries.

A final run's test metrics, a search trial's validation score, the metrics recomputed from a
kept embeddings file and the leaderboard's fingerprint all come from :func:`evaluate`, so they
cannot drift apart (they once dispatched on the label kind in three places). It is a function
of the embeddings alone: a kept embeddings file reproduces a record's numbers exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlbench.data.base import Split
from dmlbench.metrics.catalogue import HITS_METRIC, ci_keys
from dmlbench.protocol import MetricsSpec
from dmlbench.records import QueryHits, QueryValues


def evaluate(
    spec: MetricsSpec,
    embeddings: np.ndarray,
    split: Split,
    seed: int,
    *,
    query_hits: bool = False,
) -> tuple[dict[str, float], QueryHits | QueryValues | None]:
    """The metrics ``spec`` lists of ``embeddings`` of ``split``.

    Args:
        spec: the protocol's metrics (or the reduced set a validation needs).
        seed: seed of the k-means behind NMI.
        query_hits: also each scored query's Recall@1 hit and class, with the bootstrap
            interval of Recall@1 over test queries (``ci_recall@1_lo/hi``): what a final
            record keeps for paired comparisons over the same queries. Class labels with
            Recall@1 only. On continuous labels, each query's nDCG@K and mean label
            distance@K instead (:class:`~dmlbench.records.QueryValues`). ``None`` otherwise.
    """
    if split.label_kind == "continuous":
        from dmlbench.metrics.continuous import evaluate_continuous_per_query

        metrics, per = evaluate_continuous_per_query(embeddings, split, spec)
        return metrics, QueryValues.encode(per) if query_hits and per else None
    from dmlbench.metrics.retrieval import embedding_metrics

    metrics = embedding_metrics(
        embeddings, split.labels, spec, split.queries, split.gallery, seed=seed
    )
    if not query_hits or 1 not in spec.recall_at:
        return metrics, None
    from dmlbench.metrics.stats import bootstrap_mean, recall_at_1_hits_and_classes

    hits, classes = recall_at_1_hits_and_classes(
        embeddings, split.labels, split.queries, split.gallery, spec.normalize
    )
    lo, hi = bootstrap_mean(hits, seed=seed)  # how much would other test queries move it?
    lo_key, hi_key = ci_keys(HITS_METRIC)
    metrics[lo_key], metrics[hi_key] = lo, hi
    return metrics, QueryHits.encode(hits, classes)


def evaluate_model(
    spec: MetricsSpec, model: Any, split: Split, device: Any, seed: int
) -> dict[str, float]:
    """:func:`evaluate` of ``model``'s embeddings of ``split`` (no query hits)."""
    from dmlbench.engine.train import embed

    return evaluate(spec, embed(model, split, device), split, seed)[0]
