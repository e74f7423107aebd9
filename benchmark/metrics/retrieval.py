"""Retrieval metrics of class labels: Recall@K, MAP@R, R-Precision, and on request MRR and
the per-class means of Recall@K and MAP@R (and NMI, from :mod:`dmlbench.metrics.clustering`),
through :func:`evaluate`.

Definitions:

- Recall@K: fraction of queries with at least one same-class item among their K nearest
  neighbours, the query itself excluded.
- MAP@R and R-Precision (Musgrave et al. 2020): R is the number of *other* items of the query's
  class in the gallery; R-Precision is the fraction of same-class items among the R nearest;
  MAP@R averages precision@i over the same-class positions i ≤ R, divided by R.
- MRR (``mrr``): the mean over queries of 1 / the rank of the first same-class item in the
  whole gallery (pytorch-metric-learning's ``mean_reciprocal_rank`` with ``k="all"``).
- Per-class means (``class_recall@K``, ``class_map@r``): each query's Recall@K hit or average
  precision at R, averaged within the query's class, then over classes
  (pytorch-metric-learning's ``avg_of_avgs=True``); the plain metrics average over queries, so
  a class of 500 images weighs 100 times one of 5.

Ties: gallery items at exactly the same distance from a query are ranked by gallery index
(:func:`~dmlbench.metrics.knn.knn`), so a metric never depends on float32 rounding inside faiss.

Queries with no other item of their class ("lone" queries) cannot be scored and are left out
of every retrieval metric, as pytorch-metric-learning's AccuracyCalculator does; their count
is reported as ``lone_queries``. Distances are Euclidean on L2-normalised embeddings unless the
protocol says otherwise.

How it is computed (the numbers are those of one exact k-NN search with k = max(K, R); only
the work differs, which matters at SOP scale, see ``python -m dmlbench.perf.evaluate``): one
exact k-NN search (faiss, blocked: never an N×N matrix) with k = the largest R (at least 16)
gives MAP@R, R-Precision and every Recall@K with K ≤ k. A larger K (SOP's Recall@1000) only
needs the rank of each query's first same-class item, so a second search with k = K runs only
for the queries whose first same-class item is not in the first list (MRR: k = the gallery).
"""

from __future__ import annotations

import numpy as np

from dmlbench.data.base import Split
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.catalogue import (
    CLASS_MAP_AT_R,
    CLASS_RECALL,
    MAP_AT_R,
    MRR,
    NMI,
    R_PRECISION,
    RECALL,
)
from dmlbench.metrics.clustering import nmi
from dmlbench.metrics.knn import faiss_flat_l2 as faiss_flat_l2  # re-exported: its old home
from dmlbench.metrics.knn import faiss_gpu as faiss_gpu
from dmlbench.metrics.knn import knn
from dmlbench.protocol import MetricsSpec

MIN_FIRST_K = 16  # the first k-NN list is at least this long (a few more neighbours are free)


# Rows whose largest absolute value lies in [SAFE_LOW, SAFE_HIGH] are normalised by today's
# float32 arithmetic, unchanged (every committed number comes from it): their squares neither
# overflow nor underflow and their norm is above the 1e-12 floor. Rows outside are first
# multiplied by a power of two, which is exact, so a row scaled by 2**k normalises to the same
# bits as the row itself.
SAFE_LOW = 2.0**-33  # ~1.2e-10: squares ~1e-20, far above float32's smallest normal 1.2e-38
SAFE_HIGH = 2.0**50  # ~1.1e15: squares ~1.3e30, a sum of 10**8 of them below float32's 3.4e38
UNNORMALISED_LOW = 2.0**-20  # ~1e-6: squared distances above knn's 1e-12 tie-scale floor


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (an all-zero row stays zero).

    Squaring in float32 overflows beyond ~1e19 (every row became zero: Recall@1 0.005 on
    embeddings x 1e20) and underflows below ~1e-19 (rows divided by the 1e-12 floor never
    reached the unit sphere); under ``normalize: true`` scaling cannot change a score, so rows
    outside the safe range are brought into it by an exact power of two first.
    """
    peak = np.abs(x).max(axis=1, keepdims=True, initial=0) if x.size else None
    if peak is not None:
        outside = ((peak > SAFE_HIGH) | (peak < SAFE_LOW)) & (peak > 0) & np.isfinite(peak)
        if outside.any():
            exponent = np.frexp(peak)[1]  # peak = m * 2**exponent, 0.5 <= m < 1
            x = np.ldexp(x, np.where(outside, -exponent, 0).astype(np.int32))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def in_safe_range(x: np.ndarray) -> np.ndarray:
    """Unnormalised embeddings (``normalize: false``), scaled as a whole by a power of two
    when their largest value would make squared distances overflow or underflow in float32.

    A common power-of-two factor is exact and changes no ranking and no k-means assignment,
    so every metric is the same as on the unscaled embeddings, where those can be computed;
    embeddings already in range are returned as they are (the same bits).
    """
    peak = float(np.abs(x).max(initial=0)) if x.size else 0.0
    if peak == 0 or not np.isfinite(peak) or UNNORMALISED_LOW <= peak <= SAFE_HIGH:
        return x
    return np.ldexp(x, np.int32(-np.frexp(peak)[1])).astype(x.dtype, copy=False)


def metric_space(embeddings: np.ndarray, normalize: bool) -> np.ndarray:
    """The float32 points every metric is computed on: L2-normalised rows when the protocol
    says so, else the embeddings in a range where float32 distances are exact enough."""
    x = np.asarray(embeddings, dtype=np.float32)
    return l2_normalize(x) if normalize else in_safe_range(x)


def retrieval_metrics(
    neighbour_labels: np.ndarray,
    query_labels: np.ndarray,
    r: np.ndarray,
    recall_at: list[int],
    map_at_r: bool = True,
    r_precision: bool = True,
    *,
    class_recall_at: list[int] | tuple[int, ...] = (),
    class_map_at_r: bool = False,
) -> dict[str, float]:
    """Recall@K, MAP@R, R-Precision (and their per-class means) from the labels of each
    query's ranked neighbours.

    Args:
        neighbour_labels: (Q, k) labels of the nearest gallery items, nearest first.
        query_labels: (Q,) labels of the queries.
        r: (Q,) number of same-class gallery items per query (self excluded); rows with
            r = 0 must already be removed.
    """
    match = neighbour_labels == query_labels[:, None]
    out: dict[str, float] = {}
    for k in recall_at:
        out[RECALL.at(k)] = float(match[:, :k].any(axis=1).mean())
    for k in class_recall_at:
        out[CLASS_RECALL.at(k)] = class_mean(match[:, :k].any(axis=1), query_labels)
    if map_at_r or r_precision or class_map_at_r:
        width = min(int(r.max()), match.shape[1])
        rel = match[:, :width] & (np.arange(width)[None, :] < r[:, None])
        if r_precision:
            out[R_PRECISION.name] = float((rel.sum(axis=1) / r).mean())
        if map_at_r or class_map_at_r:
            precision = np.cumsum(rel, axis=1) / np.arange(1, width + 1)[None, :]
            average_precision = (precision * rel).sum(axis=1) / r
            if map_at_r:
                out[MAP_AT_R.name] = float(average_precision.mean())
            if class_map_at_r:
                out[CLASS_MAP_AT_R.name] = class_mean(average_precision, query_labels)
    return out


def class_mean(values: np.ndarray, labels: np.ndarray) -> float:
    """The mean over classes of the mean of ``values`` within each class of ``labels``."""
    _, inverse = np.unique(labels, return_inverse=True)
    sums = np.bincount(inverse, weights=np.asarray(values, dtype=np.float64))
    return float((sums / np.bincount(inverse)).mean())


def ranked_retrieval(
    queries: np.ndarray,
    gallery: np.ndarray,
    query_labels: np.ndarray,
    gallery_labels: np.ndarray,
    r: np.ndarray,
    spec: MetricsSpec,
    self_index: np.ndarray | None = None,
) -> dict[str, float]:
    """Recall@K, MAP@R, R-Precision (MRR, per-class means) of scored queries (r > 0), as one
    k-NN with k = max(K, R).

    A first search with k = max(R, ``MIN_FIRST_K``) answers MAP@R, R-Precision and Recall@K for
    K ≤ k; for a larger K (or MRR) only queries without a same-class item in that list are
    searched again, with k = K (the whole gallery for MRR), to find the rank of their first
    same-class item.
    """
    usable = len(gallery) - (0 if self_index is None else 1)
    wants_r = spec.map_at_r or spec.r_precision or spec.class_map_at_r
    need_r = int(r.max()) if wants_r else 0
    k1 = min(max(need_r, MIN_FIRST_K), usable)
    nn = knn(queries, gallery, k1, self_index, (query_labels, gallery_labels))
    out = retrieval_metrics(
        gallery_labels[nn],
        query_labels,
        r,
        [k for k in spec.recall_at if k <= k1],
        spec.map_at_r,
        spec.r_precision,
        class_recall_at=[k for k in spec.class_recall_at if k <= k1],
        class_map_at_r=spec.class_map_at_r,
    )
    large = [k for k in spec.recall_at if k > k1]
    class_large = [k for k in spec.class_recall_at if k > k1]
    if large or class_large or spec.mrr:
        match = gallery_labels[nn] == query_labels[:, None]
        first = np.where(match.any(axis=1), match.argmax(axis=1), usable)  # rank, 0-based
        todo = np.flatnonzero(first >= k1)
        if len(todo):
            k2 = usable if spec.mrr else min(max(large + class_large), usable)
            first[todo] = _first_positions(
                queries, gallery, query_labels, gallery_labels, self_index, todo, k2, usable
            )
        for k in large:
            out[RECALL.at(k)] = float((first < k).mean())
        for k in class_large:
            out[CLASS_RECALL.at(k)] = class_mean(first < k, query_labels)
        if spec.mrr:  # every scored query has a positive in the gallery: first < usable
            out[MRR.name] = float((1.0 / (first + 1.0)).mean())
    order = [
        *(RECALL.at(k) for k in spec.recall_at),
        R_PRECISION.name,
        MAP_AT_R.name,
        MRR.name,
        *(CLASS_RECALL.at(k) for k in spec.class_recall_at),
        CLASS_MAP_AT_R.name,
    ]
    return {key: out[key] for key in order if key in out}


def _first_positions(
    queries: np.ndarray,
    gallery: np.ndarray,
    query_labels: np.ndarray,
    gallery_labels: np.ndarray,
    self_index: np.ndarray | None,
    todo: np.ndarray,
    k: int,
    missing: int,
) -> np.ndarray:
    """The 0-based rank of the first same-class item among the ``k`` nearest of each query in
    ``todo`` (``missing`` where there is none), in blocks of queries: a k as large as the
    gallery (MRR) would otherwise hold a (queries x gallery) index matrix at once."""
    out = np.empty(len(todo), dtype=np.int64)
    block = max(1, 2**24 // max(1, k))
    for s in range(0, len(todo), block):
        part = todo[s : s + block]
        own = None if self_index is None else np.asarray(self_index)[part]
        nn = knn(queries[part], gallery, k, own, (query_labels[part], gallery_labels))
        match = gallery_labels[nn] == query_labels[part, None]
        out[s : s + block] = np.where(match.any(axis=1), match.argmax(axis=1), missing)
    return out


def check_ks(spec: MetricsSpec, split: Split) -> None:
    """The test split must give every metric a meaning: K ≤ gallery size (minus the query
    itself) and, for class labels, at least two classes and a query with a positive.

    A test split of one class scores 100% on every metric, trained or untrained, and a split
    where no query has another image of its class scores nothing: both are settings to refuse
    before training, not numbers to report.
    """
    if split.label_kind == "class":
        _check_classes(split)
    gallery = len(split) if split.gallery is None else len(split.gallery)
    usable = gallery - (1 if split.gallery is None else 0)
    for key in ("recall_at", "class_recall_at", "ndcg_at", "label_distance_at"):
        too_big = [k for k in getattr(spec, key) if k > usable]
        if too_big:
            raise DmlbenchError(
                f"metrics.{key}: K={too_big[0]} is larger than the gallery ({usable} items)"
            )


def _check_classes(split: Split) -> None:
    labels = np.asarray(split.labels)
    queries = labels if split.queries is None else labels[split.queries]
    gallery = labels if split.gallery is None else labels[split.gallery]
    classes = np.unique(gallery)
    if classes.size < 2:
        raise DmlbenchError(
            f"test split: {classes.size} class ({', '.join(map(str, classes[:1]))}) in its "
            "gallery: every metric would be trivially 100%; give it at least 2 classes"
        )
    present, counts = np.unique(gallery, return_counts=True)
    own = 1 if split.gallery is None else 0  # a query does not retrieve itself
    positives = dict(zip(present.tolist(), (counts - own).tolist(), strict=True))
    if not any(positives.get(q, 0) > 0 for q in np.unique(queries).tolist()):
        raise DmlbenchError(
            "test split: no query has another item of its class to retrieve, so no metric is "
            "defined; give its classes at least 2 images each"
        )


def embedding_metrics(
    embeddings: np.ndarray,
    labels: np.ndarray,
    spec: MetricsSpec,
    queries: np.ndarray | None = None,
    gallery: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """All metrics the protocol asks for, of embeddings with class labels.

    The arrays-in, numbers-out core that :func:`dmlbench.engine.evaluation.evaluate` (a split,
    continuous labels and query hits) calls; tests and the perf scripts call it directly.

    Args:
        embeddings: (N, d) embeddings of the evaluation split.
        labels: (N,) class labels.
        spec: the protocol's ``metrics`` section.
        queries, gallery: index arrays for query → gallery evaluation (In-shop). Without a
            gallery, the queries (every item when ``queries`` is ``None``) search all items,
            each query excluding itself, never retrieving itself.
        seed: seed of the k-means used for NMI.
    """
    x = metric_space(embeddings, spec.normalize)
    labels = np.asarray(labels)
    same_source = gallery is None  # queries drawn from the gallery: each excludes itself
    q_idx = np.arange(len(x)) if queries is None else np.asarray(queries)
    g_idx = np.arange(len(x)) if gallery is None else np.asarray(gallery)
    q_labels, g_labels = labels[q_idx], labels[g_idx]

    classes, g_counts = np.unique(g_labels, return_counts=True)
    pos = np.searchsorted(classes, q_labels).clip(0, len(classes) - 1)
    r = np.where(classes[pos] == q_labels, g_counts[pos], 0) - (1 if same_source else 0)
    scored = r > 0
    out: dict[str, float] = {"queries": float(scored.sum()), "lone_queries": float((~scored).sum())}
    if scored.any():
        self_index = q_idx[scored] if same_source else None  # g_idx is every item then
        every = queries is None and bool(scored.all())  # then no copy of the embeddings
        out.update(
            ranked_retrieval(
                x if every else x[q_idx][scored],
                x if gallery is None else x[g_idx],
                q_labels[scored],
                g_labels,
                r[scored],
                spec,
                self_index,
            )
        )
    if spec.nmi:
        out[NMI.name] = nmi(x, labels, seed=seed)
    return out
