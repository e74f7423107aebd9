"""Retrieval metrics of class labels: Recall@K, MAP@R, R-Precision (and NMI, from
:mod:`dmlbench.metrics.clustering`), through :func:`evaluate`.

Definitions:

- Recall@K: fraction of queries with at least one same-class item among their K nearest
  neighbours, the query itself excluded.
- MAP@R and R-Precision (Musgrave et al. 2020): R is the number of *other* items of the query's
  class in the gallery; R-Precision is the fraction of same-class items among the R nearest;
  MAP@R averages precision@i over the same-class positions i ≤ R, divided by R.

Ties: gallery items at exactly the same distance from a query are ranked by gallery index
(:func:`knn`), so a metric never depends on float32 rounding inside faiss.

Queries with no other item of their class ("lone" queries) cannot be scored and are left out
of every retrieval metric, as pytorch-metric-learning's AccuracyCalculator does; their count
is reported as ``lone_queries``. Distances are Euclidean on L2-normalised embeddings unless the
protocol says otherwise.

How it is computed (the numbers are those of one exact k-NN search with k = max(K, R); only
the work differs, which matters at SOP scale, see ``python -m dmlbench.perf.evaluate``): one
exact k-NN search (faiss, blocked: never an N×N matrix) with k = the largest R (at least 16)
gives MAP@R, R-Precision and every Recall@K with K ≤ k. A larger K (SOP's Recall@1000) only
needs the rank of each query's first same-class item, so a second search with k = K runs only
for the queries whose first same-class item is not in the first list.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlbench.data.base import Split
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.catalogue import MAP_AT_R, NMI, R_PRECISION, RECALL
from dmlbench.metrics.clustering import nmi
from dmlbench.protocol import MetricsSpec

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

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


def knn(
    queries: np.ndarray,
    gallery: np.ndarray,
    k: int,
    self_index: np.ndarray | None = None,
    labels: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Indices (Q, k) of the exact k nearest gallery items (squared L2), nearest first.

    Ties are broken by gallery index, deterministically: faiss ranks by float32 distances, in
    which two items at exactly the same distance land in an order set by rounding (on
    quantised embeddings Recall@1 then moves by points between runs of the same numbers). So
    the candidates are re-ranked by their float64 distance, then by index, and faiss is asked
    for more candidates until no row's k-th distance ties (within float32 rounding) with a
    candidate it did not return. ``self_index`` gives each query's own position in the gallery
    (queries drawn from the gallery); that item is removed from the result.

    ``labels`` (query labels, gallery labels), for metrics of class labels, which read only
    whether each neighbour is of the query's class: then only the order between candidates of
    the query's class and the others is made exact, and candidates of the same kind may keep
    faiss's order among themselves (the same-class pattern of every list is the one without
    ``labels``; a quarter of the float64 work at CUB scale).
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    gallery = np.ascontiguousarray(gallery, dtype=np.float32)
    index = faiss_flat_l2(gallery.shape[1])  # on the run's GPU when faiss has GPU support
    index.add(gallery)
    extra = 0 if self_index is None else 1
    want = min(k + extra, gallery.shape[0])
    g_scale = (gallery**2).sum(axis=1).max()
    q_scale = g_scale if queries is gallery else (queries**2).sum(axis=1).max(initial=0.0)
    scale = float(q_scale + g_scale)
    take = min(want + TIE_CANDIDATES, gallery.shape[0])
    while True:
        dist, idx = index.search(queries, take)
        boundary = dist[:, want - 1] + TIE_RTOL * max(scale, 1e-12)
        if take == gallery.shape[0] or bool((dist[:, -1] > boundary).all()):
            break
        take = min(2 * take, gallery.shape[0])
    kind = None
    if labels is not None:  # 1: of the query's class, 0: another, 2: the query itself
        kind = (labels[1][idx] == np.asarray(labels[0])[:, None]).view(np.int8)
        if self_index is not None:
            kind = np.where(idx == np.asarray(self_index)[:, None], np.int8(2), kind)
    idx = _rerank_near_ties(queries, gallery, dist, idx, TIE_RTOL * max(scale, 1e-12), want, kind)
    if self_index is None:
        return idx[:, :want]
    # The query's own item leaves its list, the others keep their order (no sort: one gather).
    is_self = idx == np.asarray(self_index)[:, None]
    at = np.where(is_self.any(axis=1), is_self.argmax(axis=1), idx.shape[1])
    cols = np.arange(want - 1)[None, :]
    return np.take_along_axis(idx, cols + (cols >= at[:, None]), axis=1)


TIE_CANDIDATES = 8  # extra candidates fetched so ties at the k-th place can be resolved
TIE_RTOL = 1e-5  # float32 rounding of squared distances, relative to their largest scale


def _rerank_near_ties(
    queries: np.ndarray,
    gallery: np.ndarray,
    dist: np.ndarray,
    idx: np.ndarray,
    tol: float,
    keep: int | None = None,
    kind: np.ndarray | None = None,
) -> np.ndarray:
    """Candidates ordered by float64 distance, then gallery index, where faiss's float32 order
    may be wrong: inside each run of candidates whose consecutive float32 distances lie within
    ``tol`` (float32 rounding) of each other.

    Two candidates further apart than the rounding are already in their exact order (faiss's
    float32 distance is within ``tol / 2`` of the exact one: the engine has always relied on it
    for the rows without a run, which it never re-ranked), so only the members of a run need
    their float64 distance, and only their order within the run can change. Until 2026-11 every
    candidate of a row with a run was recomputed in float64 and the whole row sorted: the same
    order (``tests/metrics/test_fast_evaluation.py`` checks it against that engine, bit for bit)
    at 20 times the work, since at CUB scale 87% of rows hold a run somewhere among their 89
    candidates while only 5% of the candidates are in one; that sort was 75% of the
    evaluation (docs/performance.md, "Where evaluation time goes").

    Only the first ``keep`` candidates are returned in that order (the rest are cut off by the
    caller): a run that starts after them is left as faiss ranked it. With ``kind`` (a small
    integer per candidate), only runs holding two kinds are ordered: the sequence of kinds along
    each row is then the exact one, the order among candidates of one kind is faiss's.
    """
    near = np.diff(dist, axis=1) <= tol  # near[:, j]: candidates j and j + 1 may swap
    if keep is not None and keep < near.shape[1]:  # links beyond: only the run across the cut
        near[:, keep:] = np.logical_and.accumulate(near[:, keep - 1 :], axis=1)[:, 1:]
    rows = np.flatnonzero(near.any(axis=1))
    if not len(rows):
        return idx
    near = near[rows]
    sub = idx[rows]
    run = np.zeros(sub.shape, dtype=np.int64)  # run number of each candidate along its row
    np.cumsum(~near, axis=1, out=run[:, 1:])
    member = np.zeros(sub.shape, dtype=bool)
    member[:, 1:] = near
    member[:, :-1] |= near
    if kind is not None:  # a run of one kind: its order among itself changes no kind's place
        k = kind[rows]
        change = near & (k[:, 1:] != k[:, :-1])  # a link inside a run between two kinds
        flat = run + (run[:, -1:] + 1).cumsum()[:, None] - (run[:, -1:] + 1)  # runs numbered
        mixed = np.bincount(flat[:, 1:].ravel(), change.ravel(), int(flat[-1, -1]) + 1) > 0
        member &= mixed[flat]
        keep_rows = member.any(axis=1)
        rows, sub, run, member = rows[keep_rows], sub[keep_rows], run[keep_rows], member[keep_rows]
        if not len(rows):
            return idx
    r, c = np.nonzero(member)
    exact = np.zeros(sub.shape, dtype=np.float64)  # 0 outside runs: a run of one keeps its place
    exact[r, c] = _pair_distances(queries, gallery, rows[r], sub[r, c])
    idx = idx.copy()
    idx[rows] = np.take_along_axis(sub, np.lexsort((sub, exact, run)), axis=1)
    return idx


def _pair_distances(
    queries: np.ndarray, gallery: np.ndarray, q: np.ndarray, g: np.ndarray
) -> np.ndarray:
    """Float64 squared distances of the pairs (queries[q[i]], gallery[g[i]]), in blocks.

    Each is the sum of the squared float64 differences over the d coordinates, as one
    contiguous NumPy reduction: the same float64 value, bit for bit, as before 2026-11 (when
    a block of queries times all its candidates was reduced along its last axis), so exact ties
    keep falling to the lower index."""
    out = np.empty(len(q), dtype=np.float64)
    block = max(1, 2**18 // max(1, gallery.shape[1]))  # 2 MB of float64: in cache
    for s in range(0, len(q), block):
        diff = queries[q[s : s + block]].astype(np.float64)
        diff -= gallery[g[s : s + block]]
        diff *= diff
        out[s : s + block] = diff.sum(axis=1)
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
        out[RECALL.at(k)] = float(match[:, :k].any(axis=1).mean())
    if map_at_r or r_precision:
        width = min(int(r.max()), match.shape[1])
        rel = match[:, :width] & (np.arange(width)[None, :] < r[:, None])
        if r_precision:
            out[R_PRECISION.name] = float((rel.sum(axis=1) / r).mean())
        if map_at_r:
            precision = np.cumsum(rel, axis=1) / np.arange(1, width + 1)[None, :]
            out[MAP_AT_R.name] = float(((precision * rel).sum(axis=1) / r).mean())
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
    nn = knn(queries, gallery, k1, self_index, (query_labels, gallery_labels))
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
                gallery_labels[
                    knn(queries[todo], gallery, k2, own, (query_labels[todo], gallery_labels))
                ]
                == query_labels[todo, None]
            )
            first[todo] = np.where(match2.any(axis=1), match2.argmax(axis=1), usable)
        for k in large:
            out[RECALL.at(k)] = float((first < k).mean())
    order = [*(RECALL.at(k) for k in spec.recall_at), R_PRECISION.name, MAP_AT_R.name]
    return {key: out[key] for key in order if key in out}


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
    for key in ("recall_at", "ndcg_at", "label_distance_at"):
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


def faiss_flat_l2(dim: int, device: torch.device | str | None = None) -> Any:
    """An exact L2 index on the run's GPU when faiss has GPU support, else on the CPU.

    Args:
        dim: the width of the vectors.
        device: the run's device; ``None``: torch's current CUDA device when this process has
            initialised CUDA (a run on a GPU has), else the CPU.
    """
    import faiss

    index = faiss.IndexFlatL2(dim)
    gpu = faiss_gpu(device)
    if gpu is None:
        return index
    if gpu not in _GPU_RESOURCES:
        _GPU_RESOURCES[gpu] = faiss.StandardGpuResources()  # must outlive the index
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES[gpu], gpu, index)


def faiss_gpu(device: torch.device | str | None = None) -> int | None:
    """The GPU a faiss index goes on (the run's CUDA device), or ``None`` for the CPU.

    faiss-cpu, the default dependency, has no GPU support, and a faiss with it would otherwise
    put every index on GPU 0, also under a run or search worker on another GPU, or beside a run
    on the CPU. So a GPU is used only when the run's device is CUDA and faiss can, on that
    device; the choice is logged once per process and device, a CUDA run whose search stays on
    the CPU as a warning saying how to install faiss with GPU support.
    """
    import faiss
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_initialized() else "cpu"
    device = torch.device(device)
    gpu = None
    if device.type == "cuda":
        gpu = torch.cuda.current_device() if device.index is None else device.index
    if gpu is not None and not (hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus()):
        if ("cpu-only", gpu) not in _LOGGED:
            _LOGGED.add(("cpu-only", gpu))
            log.warning(
                "k-NN search on the CPU although the run is on cuda:%d: this faiss has no GPU "
                "support (pip uninstall faiss-cpu && pip install faiss-gpu-cu12)",
                gpu,
            )
        return None
    if ("index", gpu) not in _LOGGED:
        _LOGGED.add(("index", gpu))
        log.info("k-NN search: faiss index on %s", "the CPU" if gpu is None else f"GPU {gpu}")
    return gpu


_GPU_RESOURCES: dict[int, Any] = {}  # one faiss.StandardGpuResources per GPU
_LOGGED: set[tuple[str, int | None]] = set()  # each choice is logged once per process
