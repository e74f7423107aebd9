"""NMI: k-means with k = number of classes, scored against the labels (scikit-learn's NMI).

The k-means is faiss's (its initialisation, update, empty-cluster split and stopping rule:
``faiss.Kmeans``, 50 iterations, no subsampling). When n × classes ≥
``BOUNDED_KMEANS_MIN_WORK`` (SOP, In-shop) the same iterations run in
:func:`bounded_kmeans_assign`, which keeps each point's nearest centroids and a lower bound on
the others, so only points whose bound fails are searched again (at SOP scale: all of them in
the first two iterations, then ~15%, then a few dozen). It takes the exact nearest centroid
where faiss takes the float32 one: the clusters differ only if a point is equidistant to two
centroids within float32 rounding (ties go to the lowest index), which moves NMI by the order
of 1/n. Smaller inputs (and fewer than 17 classes) run ``faiss.Kmeans`` itself.

Why a copy instead of ``faiss.Kmeans`` everywhere: at SOP scale (60,502 × 128, 11,316 clusters)
it takes 6.4 s where ``faiss.Kmeans`` with the same settings (through pytorch-metric-learning's
``FaissKMeans``) takes 18.6 s, 0.34× (median of 3 quiet interleaved rounds,
``reports/perf/evaluate.md``), for the same NMI to the sixth digit; at CUB scale the two are
within noise (0.29 s vs 0.32 s), which is why only large inputs take the copy. The copy follows
faiss's training loop step by step, so a change in faiss could make them drift apart:
``tests/perf/test_perf_scripts.py::test_bounded_kmeans_equals_faiss`` compares the clusters
with the installed faiss's on three kinds of data (early convergence, empty-cluster splits,
unnormalised) and fails when they differ.
"""

from __future__ import annotations

import numpy as np
import torch

from dmlbench.errors import DmlbenchError

KMEANS_NITER = 50


BOUNDED_KMEANS_MIN_WORK = 50_000_000  # n × k from which NMI uses bounded_kmeans_assign


def nmi(embeddings: np.ndarray, labels: np.ndarray, seed: int = 0) -> float:
    """NMI between k-means clusters (k = number of classes) and the labels."""
    from sklearn.metrics import normalized_mutual_info_score

    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    assign = kmeans_assign(x, len(np.unique(labels)), seed)
    return float(normalized_mutual_info_score(labels, assign))


def kmeans_assign(x: np.ndarray, k: int, seed: int, niter: int = KMEANS_NITER) -> np.ndarray:
    """Cluster of every row after faiss's k-means (no subsampling, one centroid per class)."""
    import faiss

    if len(x) * k < BOUNDED_KMEANS_MIN_WORK or k <= 16 or len(x) == k:
        kmeans = faiss.Kmeans(
            x.shape[1],
            k,
            niter=niter,
            seed=seed,
            verbose=False,
            min_points_per_centroid=1,
            max_points_per_centroid=1_000_000,
        )
        kmeans.train(x)
        _, assign = kmeans.index.search(x, 1)
        return np.asarray(assign[:, 0])
    return bounded_kmeans_assign(x, k, seed, niter)


def bounded_kmeans_assign(x: np.ndarray, k: int, seed: int, niter: int) -> np.ndarray:
    """``faiss.Kmeans(d, k, niter=niter, seed=seed, ...)`` then ``index.search(x, 1)``.

    Follows faiss's ``Clustering::train`` step by step: centroids start as the rows
    ``rand_perm(n, seed + 1)[:k]`` (all rows when n = k); each iteration assigns, sums the
    objective in float32, recomputes centroids (float32 sums in row order, times 1/count),
    splits empty clusters and stops once the objective equals the previous one, keeping the
    centroids just computed. Only the assignment differs: :class:`_BoundedAssigner`.
    """
    import faiss

    n = len(x)
    if not 3 <= k <= n:
        raise ValueError(f"k-means: need 3 <= k <= n, got k={k}, n={n}")
    if not np.isfinite(x).all():
        raise DmlbenchError("NMI: the embeddings contain NaN or Inf")
    nearest = _BoundedAssigner(x)
    if n == k:  # faiss copies the rows and does not iterate
        return nearest(x.copy())[0]
    perm = np.empty(n, dtype=np.int32)
    faiss.rand_perm(faiss.swig_ptr(perm), n, seed + 1)  # type: ignore[attr-defined]
    centroids = x[perm[:k]].copy()
    early_stop = hasattr(faiss.ClusteringParameters(), "early_stop_threshold")
    sums = _ClusterSums(x, k)
    previous = None
    for _ in range(niter):
        assign, dis = nearest(centroids)
        objective = np.cumsum(dis, dtype=np.float32)[-1]  # faiss: float, summed in order
        new, counts = sums.centroids(assign)
        _split_empty_clusters(new, counts, n)
        nearest.moved(centroids, new)
        centroids = new
        if early_stop and previous is not None and objective == previous:
            break
        previous = objective
    return nearest(centroids)[0]


class _ClusterSums:
    """faiss's ``compute_centroids``: float32 sums in row order, times float32(1/count).

    Clusters whose members did not change keep their previous mean (the same sum, bit for bit).
    """

    def __init__(self, x: np.ndarray, k: int) -> None:
        self.x, self.k = x, k
        self.means = np.zeros((k, x.shape[1]), dtype=np.float32)
        self.assign: np.ndarray | None = None

    def centroids(self, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = np.bincount(assign, minlength=self.k).astype(np.float32)
        if self.assign is None:
            changed = np.ones(self.k, dtype=bool)
        else:
            moved = assign != self.assign
            changed = np.zeros(self.k, dtype=bool)
            changed[assign[moved]] = changed[self.assign[moved]] = True
        rows = np.flatnonzero(changed[assign])
        self.means[changed] = 0.0
        np.add.at(self.means, assign[rows], self.x[rows])  # sequential, in row order
        filled = changed & (counts > 0)
        self.means[filled] *= (np.float32(1.0) / counts[filled])[:, None]
        self.assign = assign
        return self.means.copy(), counts


def _split_empty_clusters(centroids: np.ndarray, counts: np.ndarray, n: int) -> None:
    """faiss's ``split_clusters``: each empty cluster copies a large one (drawn with
    probability ∝ count − 1, by a mt19937 seeded 1234), and both are nudged by ±1/1024."""
    empty = np.flatnonzero(counts == 0)
    if len(empty) == 0:
        return
    k = len(counts)
    rng = np.random.RandomState(1234)  # the same mt19937 stream as faiss::RandomGenerator
    denominator = np.float64(np.float32(n - k))
    even = np.arange(centroids.shape[1]) % 2 == 0
    up, down = np.float32(1.0 + 1.0 / 1024.0), np.float32(1.0 - 1.0 / 1024.0)
    pending = np.empty(0, dtype=np.float32)
    for ci in empty:
        p = ((counts.astype(np.float64) - 1.0) / denominator).astype(np.float32)
        cj = None
        while cj is None:  # cj = 0, 1, 2, ... one draw each, until draw < p[cj]
            if len(pending) < k:
                fresh = rng.randint(0, 2**32, size=max(k, 1 << 16), dtype=np.uint32)
                pending = np.concatenate([pending, fresh.astype(np.float32) / np.float32(2**32)])
            hits = np.flatnonzero(pending[:k] < p)
            if len(hits):
                cj = int(hits[0])
            pending = pending[(cj + 1) if cj is not None else k :]
        centroids[ci] = centroids[cj]
        centroids[ci] *= np.where(even, up, down)
        centroids[cj] *= np.where(even, down, up)
        counts[ci] = counts[cj] / np.float32(2)
        counts[cj] -= counts[ci]


class _BoundedAssigner:
    """Exact nearest centroid of every row, over successive centroid sets.

    Each row keeps its ``m`` nearest centroids as candidates (with float32 squared distances)
    and ``lb``, a lower bound on its distance to every other centroid. When centroids move by
    δ_j, candidate distances are recomputed, ``lb`` drops by the largest δ outside the
    ``k / 32`` largest movers, whose distances are computed exactly; a row is searched again
    (faiss, k = m + 1) only when its best candidate is not certainly below ``lb``. float32
    values carry an error bound ``ERR · (|x|² + max|c|²)``; where it leaves the choice open,
    the row's distances to all centroids are computed in float64 (ties: lowest index).
    """

    ERR = 2e-5

    def __init__(self, x: np.ndarray, m: int = 8, block: int = 8192) -> None:
        self.x = x
        self.xt = torch.from_numpy(x)
        self.xsq = (self.xt * self.xt).sum(1)
        self.m, self.block = m, block
        self.cand: torch.Tensor | None = None
        self.d2 = torch.empty(0)
        self.lb = torch.empty(0)
        self.stale = torch.empty(0, dtype=torch.long)
        self.moving = torch.empty(0, dtype=torch.bool)
        self.nearest = torch.empty(0, dtype=torch.long)
        self.dis = torch.empty(0, dtype=torch.float32)

    def __call__(self, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(nearest centroid, float32 of its exact squared distance) for every row."""
        c = torch.from_numpy(centroids)
        csq = (c * c).sum(1)
        err = self.ERR * (self.xsq + float(csq.max()))
        n, k = len(self.x), len(centroids)
        if self.cand is None:
            m = min(self.m, k - 1)
            self.cand = torch.empty((n, m), dtype=torch.long)
            self.d2 = torch.empty((n, m), dtype=torch.float32)
            self.lb = torch.empty(n, dtype=torch.float32)
            search = torch.arange(n)
        else:
            for s in range(0, len(self.stale), self.block):
                rows = self.stale[s : s + self.block]
                cand = self.cand[rows]
                dot = torch.bmm(c[cand], self.xt[rows][:, :, None])[:, :, 0]
                self.d2[rows] = self.xsq[rows][:, None] + csq[cand] - 2.0 * dot
            best = self.d2.min(1).values
            search = torch.nonzero(~((best + err).sqrt() < self.lb))[:, 0]
        if len(search):
            dist, idx = _faiss_knn(self.x[search.numpy()], centroids, self.cand.shape[1] + 1)
            self.cand[search] = idx[:, :-1]
            self.d2[search] = dist[:, :-1]
            self.lb[search] = (dist[:, -1] - err[search]).clamp_min(0.0).sqrt()
        two = torch.topk(self.d2, 2, dim=1, largest=False)
        nearest = self.cand.gather(1, two.indices[:, :1])[:, 0]
        gap = two.values[:, 1] - two.values[:, 0]
        unsure = (gap <= 2 * err) | ~((two.values[:, 0] + err).sqrt() < self.lb)
        rows = torch.nonzero(unsure)[:, 0]
        c64 = c.double()
        for s in range(0, len(rows), 512):
            r = rows[s : s + 512]
            x64 = self.xt[r].double()
            d2 = (x64 * x64).sum(1)[:, None] + (c64 * c64).sum(1)[None, :] - 2.0 * x64 @ c64.t()
            low = d2 == d2.min(1, keepdim=True).values
            nearest[r] = torch.where(low, torch.arange(k), k).min(1).values
        if len(self.dis) == n:
            rows = torch.nonzero((nearest != self.nearest) | self.moving[nearest])[:, 0]
        else:
            self.dis = torch.empty(n, dtype=torch.float32)
            rows = torch.arange(n)
        diff = self.xt[rows].double() - c64[nearest[rows]]
        self.dis[rows] = (diff * diff).sum(1).float()
        self.nearest = nearest
        return nearest.numpy(), self.dis.numpy().copy()

    def moved(self, old: np.ndarray, new: np.ndarray) -> None:
        """Centroids go from ``old`` to ``new``: update candidate distances and bounds."""
        assert self.cand is not None
        delta = torch.from_numpy(np.sqrt(((new.astype(np.float64) - old) ** 2).sum(1)))
        delta = (delta * (1 + 1e-6)).float()
        moving = self.moving = delta > 0
        self.stale = torch.nonzero(moving[self.cand].any(1))[:, 0]
        count = int(moving.sum())
        if count == 0:
            return
        order = torch.argsort(delta, descending=True)
        nbig = min(max(16, len(delta) // 32), count)
        big = order[:nbig]
        if nbig < len(delta):
            self.lb -= delta[order[nbig]]
        else:  # every centroid is computed below
            self.lb.fill_(float("inf"))
        c = torch.from_numpy(new)
        cmax = float((c * c).sum(1).max())
        cb = c[big]
        position = torch.full((len(delta),), -1, dtype=torch.long)
        position[big] = torch.arange(nbig)
        for s in range(0, len(self.x), self.block):
            rows = slice(s, s + self.block)
            d2 = torch.addmm((cb * cb).sum(1)[None, :], self.xt[rows], cb.t(), alpha=-2.0)
            d2 += self.xsq[rows][:, None]
            pos = position[self.cand[rows]]  # candidates among the big movers are exact anyway
            hit = torch.nonzero(pos >= 0)
            d2[hit[:, 0], pos[hit[:, 0], hit[:, 1]]] = float("inf")
            err = self.ERR * (self.xsq[rows] + cmax)
            low = (d2.min(1).values - err).clamp_min(0.0).sqrt()
            self.lb[rows] = torch.minimum(self.lb[rows], low)


def _faiss_knn(x: np.ndarray, y: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    import faiss

    dist, idx = faiss.knn(np.ascontiguousarray(x), y, k)
    return torch.from_numpy(dist), torch.from_numpy(idx)
