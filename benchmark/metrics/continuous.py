"""Metrics for continuous labels: mean label distance@K and modified nDCG@K.

Definitions (Kim et al., CVPR 2019, §4.1 and eq. 12; their ``eval_retrieval``):

- Retrieval ranks the gallery (database) by Euclidean distance between embeddings, on
  L2-normalised embeddings when ``metrics.normalize`` is set. When the split has no
  ``queries``, every item queries all the others (itself excluded).
- mean label distance@K (``mld@K``): the label distance between a query and each of its top-K
  retrievals, averaged over the K and over queries; lower is better. A split may scale it by
  ``extras["mld_scale"]`` (MPII: 224/288, as Kim et al.'s evaluation does).
- modified nDCG@K (``ndcg@K``): relevance r_i = −log2(d_i + 1) of the i-th retrieval (d_i its
  label distance to the query), gain 2^{r_i} = 1/(d_i + 1), discount 1/log2(i + 1);
  DCG@K = Σ_{i≤K} gain_i / log2(i + 1) and nDCG@K = DCG@K / Z_K, where Z_K is the same sum over
  the K gallery items nearest to the query in label space, in label order. A perfect ranking
  scores 1. Averaged over queries.

The embedding k-NN uses faiss (exact, ``metrics.retrieval.knn``). The ideal ordering uses the
exact label-space neighbours of :func:`dmlbench.data.dense.exact_knn` (no Q×N matrix), or, for
``precomputed`` label distances, the shipped query×gallery matrix, partially sorted in blocks.
K larger than the gallery is clipped to the gallery size.
"""

from __future__ import annotations

import numpy as np

from dmlbench.data.base import Split
from dmlbench.data.dense import exact_knn, label_distance_for
from dmlbench.errors import DataError
from dmlbench.metrics.catalogue import MLD, NDCG
from dmlbench.metrics.retrieval import knn, metric_space
from dmlbench.protocol import MetricsSpec


def gain(d: np.ndarray) -> np.ndarray:
    """2^{r} with r = −log2(d + 1), i.e. 1 / (d + 1)."""
    return np.power(2.0, -np.log2(np.asarray(d, dtype=np.float64) + 1.0))


def _ranked_sums(
    retrieved: np.ndarray, ideal: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative DCG, ideal DCG and mean label distance (Q, k) of ranked lists."""
    k = retrieved.shape[1]
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = np.cumsum(gain(retrieved) * discount, axis=1)
    z = np.cumsum(gain(ideal) * discount, axis=1)
    mld = np.cumsum(retrieved, axis=1) / np.arange(1, k + 1)
    return dcg, z, mld


def continuous_metrics(
    retrieved: np.ndarray,
    ideal: np.ndarray,
    ndcg_at: list[int],
    label_distance_at: list[int],
    mld_scale: float = 1.0,
) -> dict[str, float]:
    """nDCG@K and mean label distance@K from label distances of ranked lists.

    Args:
        retrieved: (Q, k) label distance from each query to its retrievals, in rank order.
        ideal: (Q, k) the k smallest label distances from each query to the gallery, ascending.
    """
    k = retrieved.shape[1]
    dcg, z, mld = _ranked_sums(retrieved, ideal)
    out: dict[str, float] = {}
    for K in ndcg_at:
        c = min(K, k) - 1
        out[NDCG.at(K)] = float((dcg[:, c] / z[:, c]).mean())
    for K in label_distance_at:
        out[MLD.at(K)] = float(mld[:, min(K, k) - 1].mean() * mld_scale)
    return out


def per_query_values(
    retrieved: np.ndarray,
    ideal: np.ndarray,
    ndcg_at: list[int],
    label_distance_at: list[int],
    mld_scale: float = 1.0,
) -> dict[str, np.ndarray]:
    """Each query's own nDCG@K and mean label distance@K (scaled), whose means over the
    queries are :func:`continuous_metrics` (up to float rounding: those keep their own
    order of operations, so committed metrics do not move). The verdicts need them to count
    the test-query component of a board's uncertainty."""
    k = retrieved.shape[1]
    dcg, z, mld = _ranked_sums(retrieved, ideal)
    out: dict[str, np.ndarray] = {}
    for K in ndcg_at:
        c = min(K, k) - 1
        out[NDCG.at(K)] = dcg[:, c] / z[:, c]
    for K in label_distance_at:
        out[MLD.at(K)] = mld[:, min(K, k) - 1] * mld_scale
    return out


def evaluate_continuous(
    embeddings: np.ndarray, split: Split, spec: MetricsSpec
) -> dict[str, float]:
    """``ndcg@K`` and ``mld@K`` for the K the protocol lists, plus the number of queries."""
    return evaluate_continuous_per_query(embeddings, split, spec)[0]


def evaluate_continuous_per_query(
    embeddings: np.ndarray, split: Split, spec: MetricsSpec
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """:func:`evaluate_continuous` and each query's values (:func:`per_query_values`)."""
    ks = [*spec.ndcg_at, *spec.label_distance_at]
    if not ks:
        return {}, {}
    x = metric_space(embeddings, spec.normalize)
    same_source = split.gallery is None  # queries drawn from the gallery exclude themselves
    q_idx = np.arange(len(x)) if split.queries is None else np.asarray(split.queries)
    g_idx = np.arange(len(x)) if split.gallery is None else np.asarray(split.gallery)
    k = min(max(ks), len(g_idx) - (1 if same_source else 0))
    if k < 1 or len(q_idx) == 0:
        raise DataError("continuous evaluation needs at least one query and one other item")
    self_index = q_idx if same_source else None
    nn = knn(x[q_idx], x[g_idx], k, self_index)
    retrieved, ideal = _label_distances(split, q_idx, g_idx, nn, k, self_index)
    scale = float(split.extras.get("mld_scale", 1.0))
    out = {"queries": float(len(q_idx))}
    out.update(continuous_metrics(retrieved, ideal, spec.ndcg_at, spec.label_distance_at, scale))
    per = per_query_values(retrieved, ideal, spec.ndcg_at, spec.label_distance_at, scale)
    return out, per


def distances_from_lists(split: Split) -> np.ndarray:
    """(N, N) label distances of a split that carries shipped neighbour lists only.

    A validation fold of a ``precomputed`` data set (MPII's training images) has neighbour
    lists, not a query x gallery matrix: every item queries the others, and the lists give the
    distance to each other item (the MPII bundle lists every other image, so the matrix is
    exact). A pair missing from the lists is at infinite distance (zero gain): never an ideal
    neighbour, and a retrieval of it earns nothing. N x N float32 is 38 MB for a quarter of
    MPII's 12,366 training images.
    """
    nn = np.asarray(split.extras["neighbours"])
    dist = np.asarray(split.extras["neighbour_distances"], dtype=np.float32)
    matrix = np.full((len(nn), len(nn)), np.inf, dtype=np.float32)
    np.put_along_axis(matrix, nn, dist, axis=1)
    np.fill_diagonal(matrix, 0.0)
    return matrix


def _label_distances(
    split: Split,
    q_idx: np.ndarray,
    g_idx: np.ndarray,
    nn: np.ndarray,
    k: int,
    self_index: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Label distances of the retrieved lists (Q, k) and of the ideal lists (Q, k)."""
    if split.extras.get("label_distance") == "precomputed":
        matrix = split.extras.get("distances")
        if matrix is None and "neighbours" in split.extras and self_index is not None:
            matrix = distances_from_lists(split)
        if matrix is None or matrix.shape != (len(q_idx), len(g_idx)):
            raise DataError(
                "precomputed evaluation needs extras['distances'] of shape "
                f"(queries, gallery) = ({len(q_idx)}, {len(g_idx)})"
            )
        retrieved = np.take_along_axis(matrix, nn, axis=1).astype(np.float64)
        ideal = np.empty((len(q_idx), k))
        for s in range(0, len(q_idx), 1024):
            block = np.asarray(matrix[s : s + 1024], dtype=np.float64)
            if self_index is not None:
                block[np.arange(len(block)), self_index[s : s + 1024]] = np.inf
            part = np.partition(block, k - 1, axis=1)[:, :k]
            ideal[s : s + 1024] = np.sort(part, axis=1)
        return retrieved, ideal
    distance = label_distance_for(split)
    labels = np.asarray(split.labels, dtype=np.float64)
    q_labels, g_labels = labels[q_idx], labels[g_idx]
    retrieved = distance.rowwise(q_labels[:, None, :], g_labels[nn])
    _, ideal = exact_knn(q_labels, g_labels, k, distance, self_index=self_index)
    return retrieved, ideal
