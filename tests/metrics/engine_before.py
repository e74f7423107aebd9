"""Today's metric engine, frozen (dmlbench 2026-11-26, before the fast evaluation): the
oracle the fast engine must equal bit for bit (``tests/metrics/test_fast_evaluation.py``).

A verbatim copy of ``knn``, its tie-break, ``retrieval_metrics``, ``ranked_retrieval`` and
``evaluate`` as they were; only the imports differ. Do not edit: it is the reference.
"""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

import numpy as np

from dmlbench.metrics.clustering import nmi
from dmlbench.metrics.retrieval import faiss_flat_l2, l2_normalize
from dmlbench.protocol import MetricsSpec

MIN_FIRST_K = 16  # the first k-NN list is at least this long (a few more neighbours are free)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def knn(
    queries: np.ndarray, gallery: np.ndarray, k: int, self_index: np.ndarray | None = None
) -> np.ndarray:
    """Indices (Q, k) of the exact k nearest gallery items (squared L2), nearest first.

    Ties are broken by gallery index, deterministically: faiss ranks by float32 distances, in
    which two items at exactly the same distance land in an order set by rounding (on
    quantised embeddings Recall@1 then moves by points between runs of the same numbers). So
    the candidates are re-ranked by their float64 distance, then by index, and faiss is asked
    for more candidates until no row's k-th distance ties (within float32 rounding) with a
    candidate it did not return. ``self_index`` gives each query's own position in the gallery
    (queries drawn from the gallery); that item is removed from the result.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    gallery = np.ascontiguousarray(gallery, dtype=np.float32)
    index = faiss_flat_l2(gallery.shape[1])  # on the run's GPU when faiss has GPU support
    index.add(gallery)
    extra = 0 if self_index is None else 1
    want = min(k + extra, gallery.shape[0])
    scale = float((queries**2).sum(axis=1).max(initial=0.0) + (gallery**2).sum(axis=1).max())
    take = min(want + TIE_CANDIDATES, gallery.shape[0])
    while True:
        dist, idx = index.search(queries, take)
        boundary = dist[:, want - 1] + TIE_RTOL * max(scale, 1e-12)
        if take == gallery.shape[0] or bool((dist[:, -1] > boundary).all()):
            break
        take = min(2 * take, gallery.shape[0])
    idx = _rerank_near_ties(queries, gallery, dist, idx, TIE_RTOL * max(scale, 1e-12))
    if self_index is not None:
        is_self = idx == np.asarray(self_index)[:, None]
        order = np.argsort(is_self, axis=1, kind="stable")  # non-self first, order kept
        idx = np.take_along_axis(idx, order, axis=1)
    return idx[:, : want - extra]


TIE_CANDIDATES = 8  # extra candidates fetched so ties at the k-th place can be resolved
TIE_RTOL = 1e-5  # float32 rounding of squared distances, relative to their largest scale


def _rerank_near_ties(
    queries: np.ndarray, gallery: np.ndarray, dist: np.ndarray, idx: np.ndarray, tol: float
) -> np.ndarray:
    """Candidates ordered by float64 distance, then gallery index — recomputed only for the rows
    where two candidates lie within ``tol`` (float32 rounding) of each other.

    Where every gap between consecutive float32 distances exceeds the rounding, faiss's order
    is already the exact one and there is no tie to break. Measured on 5,924 random unit
    vectors of 512-d (CUB's shape), one core busy: k = 60 took 1.2–1.4 s against 1.5–1.7 s when
    every row was re-ranked; at k = 1,000 nearly every row holds a near-tie and the time is the
    same (about 19 s)."""
    near = (np.diff(dist, axis=1) <= tol).any(axis=1)
    if not near.any():
        return idx
    rows = np.flatnonzero(near)
    sub = idx[rows]
    exact = _squared_distances(queries[rows], gallery, sub)
    idx = idx.copy()
    idx[rows] = np.take_along_axis(sub, np.lexsort((sub, exact)), axis=1)
    return idx


def _squared_distances(queries: np.ndarray, gallery: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Float64 squared distances from each query to its candidates, in blocks of queries."""
    out = np.empty(idx.shape, dtype=np.float64)
    block = max(1, 2**22 // max(1, idx.shape[1] * gallery.shape[1]))
    for s in range(0, len(queries), block):
        q = queries[s : s + block].astype(np.float64)[:, None, :]
        g = gallery[idx[s : s + block]].astype(np.float64)
        out[s : s + block] = ((q - g) ** 2).sum(axis=2)
    return out


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


def ranked_retrieval(
    queries: np.ndarray,
    gallery: np.ndarray,
    query_labels: np.ndarray,
    gallery_labels: np.ndarray,
    r: np.ndarray,
    spec: MetricsSpec,
    self_index: np.ndarray | None = None,
) -> dict[str, float]:
    """Recall@K, MAP@R, R-Precision of scored queries (r > 0), as one k-NN with k = max(K, R).

    A first search with k = max(R, ``MIN_FIRST_K``) answers MAP@R, R-Precision and Recall@K for
    K ≤ k; for a larger K only queries without a same-class item in that list are searched
    again, with k = K, to find the rank of their first same-class item.
    """
    usable = len(gallery) - (0 if self_index is None else 1)
    need_r = int(r.max()) if spec.map_at_r or spec.r_precision else 0
    k1 = min(max(need_r, MIN_FIRST_K), usable)
    nn = knn(queries, gallery, k1, self_index)
    out = retrieval_metrics(
        gallery_labels[nn],
        query_labels,
        r,
        [k for k in spec.recall_at if k <= k1],
        spec.map_at_r,
        spec.r_precision,
    )
    large = [k for k in spec.recall_at if k > k1]
    if large:
        match = gallery_labels[nn] == query_labels[:, None]
        first = np.where(match.any(axis=1), match.argmax(axis=1), usable)  # rank, 0-based
        todo = np.flatnonzero(first >= k1)
        if len(todo):
            k2 = min(max(large), usable)
            own = None if self_index is None else np.asarray(self_index)[todo]
            match2 = (
                gallery_labels[knn(queries[todo], gallery, k2, own)] == query_labels[todo, None]
            )
            first[todo] = np.where(match2.any(axis=1), match2.argmax(axis=1), usable)
        for k in large:
            out[f"recall@{k}"] = float((first < k).mean())
    order = [*(f"recall@{k}" for k in spec.recall_at), "r_precision", "map@r"]
    return {key: out[key] for key in order if key in out}


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
        queries, gallery: index arrays for query → gallery evaluation (In-shop). Without a
            gallery, the queries (every item when ``queries`` is ``None``) search all items,
            each query excluding itself, never retrieving itself.
        seed: seed of the k-means used for NMI.
    """
    x = np.asarray(embeddings, dtype=np.float32)
    if spec.normalize:
        x = l2_normalize(x)
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
        out.update(
            ranked_retrieval(
                x[q_idx][scored], x[g_idx], q_labels[scored], g_labels, r[scored], spec, self_index
            )
        )
    if spec.nmi:
        out["nmi"] = nmi(x, labels, seed=seed)
    return out
