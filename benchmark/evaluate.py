"""The metric engine: Recall@K, NMI, MAP@R and R-Precision from one exact k-NN search.

Definitions (DESIGN.md §6):

- Recall@K: fraction of queries with at least one same-class item among their K nearest
  neighbours, the query itself excluded.
- MAP@R and R-Precision (Musgrave et al. 2020): R is the number of *other* items of the query's
  class in the gallery; R-Precision is the fraction of same-class items among the R nearest;
  MAP@R averages precision@i over the same-class positions i ≤ R, divided by R.
- NMI: k-means (faiss) with k = number of classes, NMI (scikit-learn) against the labels.

Queries with no other item of their class ("lone" queries) cannot be scored and are left out
of every retrieval metric, as pytorch-metric-learning's AccuracyCalculator does; their count
is reported as ``lone_queries``. Distances are Euclidean on L2-normalised embeddings unless the
protocol says otherwise. The neighbours are computed once and shared by all retrieval metrics.
"""

from __future__ import annotations

import numpy as np

from dmlbench.data.base import Split
from dmlbench.distributed import faiss_flat_l2
from dmlbench.errors import DmlbenchError
from dmlbench.protocol import MetricsSpec


def l2_normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def knn(
    queries: np.ndarray, gallery: np.ndarray, k: int, self_index: np.ndarray | None = None
) -> np.ndarray:
    """Indices (Q, k) of the exact k nearest gallery items (squared L2), nearest first.

    ``self_index`` gives each query's own position in the gallery (queries drawn from the
    gallery); that item is removed from the result even when ties put it elsewhere than first.
    """

    queries = np.ascontiguousarray(queries, dtype=np.float32)
    gallery = np.ascontiguousarray(gallery, dtype=np.float32)
    index = faiss_flat_l2(gallery.shape[1])  # on a GPU when faiss-gpu and a GPU are present
    index.add(gallery)
    extra = 0 if self_index is None else 1
    _, idx = index.search(queries, min(k + extra, gallery.shape[0]))
    if self_index is None:
        return idx
    is_self = idx == np.asarray(self_index)[:, None]
    order = np.argsort(is_self, axis=1, kind="stable")  # non-self first, order kept
    return np.take_along_axis(idx, order, axis=1)[:, : idx.shape[1] - 1]


def retrieval_metrics(
    neighbour_labels: np.ndarray,
    query_labels: np.ndarray,
    r: np.ndarray,
    recall_at: list[int],
    map_at_r: bool = True,
    r_precision: bool = True,
) -> dict[str, float]:
    """Recall@K, MAP@R, R-Precision from the labels of each query's ranked neighbours.

    Args:
        neighbour_labels: (Q, k) labels of the nearest gallery items, nearest first.
        query_labels: (Q,) labels of the queries.
        r: (Q,) number of same-class gallery items per query (self excluded); rows with
            r = 0 must already be removed.
    """
    match = neighbour_labels == query_labels[:, None]
    out: dict[str, float] = {}
    for k in recall_at:
        out[f"recall@{k}"] = float(match[:, :k].any(axis=1).mean())
    if map_at_r or r_precision:
        width = min(int(r.max()), match.shape[1])
        rel = match[:, :width] & (np.arange(width)[None, :] < r[:, None])
        if r_precision:
            out["r_precision"] = float((rel.sum(axis=1) / r).mean())
        if map_at_r:
            precision = np.cumsum(rel, axis=1) / np.arange(1, width + 1)[None, :]
            out["map@r"] = float(((precision * rel).sum(axis=1) / r).mean())
    return out


def nmi(embeddings: np.ndarray, labels: np.ndarray, seed: int = 0) -> float:
    """NMI between k-means clusters (k = number of classes) and the labels."""
    import faiss
    from sklearn.metrics import normalized_mutual_info_score

    classes = np.unique(labels)
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    kmeans = faiss.Kmeans(
        x.shape[1],
        len(classes),
        niter=50,
        seed=seed,
        verbose=False,
        min_points_per_centroid=1,
        max_points_per_centroid=1_000_000,
    )
    kmeans.train(x)
    _, assign = kmeans.index.search(x, 1)
    return float(normalized_mutual_info_score(labels, assign[:, 0]))


def check_ks(spec: MetricsSpec, split: Split) -> None:
    """Every K must leave something to rank: K ≤ gallery size (minus the query itself)."""
    gallery = len(split) if split.gallery is None else len(split.gallery)
    usable = gallery - (1 if split.gallery is None else 0)
    for key in ("recall_at", "ndcg_at", "label_distance_at"):
        too_big = [k for k in getattr(spec, key) if k > usable]
        if too_big:
            raise DmlbenchError(
                f"metrics.{key}: K={too_big[0]} is larger than the gallery ({usable} items)"
            )


def evaluate(
    embeddings: np.ndarray,
    labels: np.ndarray,
    spec: MetricsSpec,
    queries: np.ndarray | None = None,
    gallery: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """All metrics the protocol asks for, on class labels.

    Args:
        embeddings: (N, d) embeddings of the evaluation split.
        labels: (N,) class labels.
        spec: the protocol's ``metrics`` section.
        queries, gallery: index arrays for query → gallery evaluation (In-shop); when ``None``
            every item queries all the others.
        seed: seed of the k-means used for NMI.
    """
    x = np.asarray(embeddings, dtype=np.float32)
    if spec.normalize:
        x = l2_normalize(x)
    labels = np.asarray(labels)
    same_source = queries is None
    q_idx = np.arange(len(x)) if queries is None else np.asarray(queries)
    g_idx = np.arange(len(x)) if gallery is None else np.asarray(gallery)
    q_labels, g_labels = labels[q_idx], labels[g_idx]

    classes, g_counts = np.unique(g_labels, return_counts=True)
    pos = np.searchsorted(classes, q_labels).clip(0, len(classes) - 1)
    r = np.where(classes[pos] == q_labels, g_counts[pos], 0) - (1 if same_source else 0)
    scored = r > 0
    out: dict[str, float] = {"queries": float(scored.sum()), "lone_queries": float((~scored).sum())}
    if scored.any():
        max_k = max([*spec.recall_at, int(r.max())])
        k = min(max_k, len(g_idx) - (1 if same_source else 0))
        self_index = q_idx[scored] if same_source else None  # q_idx == g_idx then
        nn_idx = knn(x[q_idx][scored], x[g_idx], k, self_index)
        out.update(
            retrieval_metrics(
                g_labels[nn_idx],
                q_labels[scored],
                r[scored],
                spec.recall_at,
                spec.map_at_r,
                spec.r_precision,
            )
        )
    if spec.nmi:
        out["nmi"] = nmi(x, labels, seed=seed)
    return out
