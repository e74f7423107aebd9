"""Continuous labels: label distances, exact label-space neighbour lists and Kim et al.'s samplers.

A continuous split (``Split.label_kind == "continuous"``) names its label distance in
``split.extras["label_distance"]``:

- ``pose``: labels are joint coordinates (N, J·dims), flattened joint by joint; the distance is
  the sum over joints of the Euclidean distance between corresponding joints (Kwak et al. 2016,
  the pose distance of Kim et al. §4.3). ``extras["joint_dims"]`` (default 2) gives dims.
- ``euclidean``: the Euclidean distance between label vectors.
- ``precomputed``: distances ship with the data (the MPII thin-slicing bundle). The label
  "vector" of item i is then ``[i]`` (its index, exact in float32 up to 2**24), and the split
  carries ``extras["neighbours"]`` (N, M) indices sorted by label distance and
  ``extras["neighbour_distances"]`` (N, M) (training), or ``extras["distances"]`` (Q, G)
  between ``split.queries`` and ``split.gallery`` (evaluation).

Neighbour lists (:func:`neighbour_lists`) are exact and never hold an N×N matrix: faiss
(exact, flat index) returns candidates under a metric of the flattened label vectors that
bounds the label distance from below, and they are re-ranked under the label distance. For
``euclidean`` the metric is L2 itself; for ``pose`` it is L1, since a joint's Euclidean norm
is at least its L1 norm / √dims (a much tighter bound than L2, whose factor is √joints). Once
the k-th re-ranked distance is no larger than the bound at the candidate set's radius, no
other item can be closer; rows that fail the test are searched again with twice as many
candidates. Memory is O(N·k) plus one block of queries. Lists are cached under
``cache_dir()/neighbours``, keyed by a hash of the labels, the distance and k.

Samplers (Kim et al. §3.3 and §4.1; Kim et al.'s ``Dense_PairDataset`` / ``Naive_PairDataset``):

- :class:`DenseTripletSampler`: a minibatch is one anchor, its k label-nearest neighbours
  (nearest first) and ``batch_size − 1 − k`` others drawn uniformly from the rest.
- :class:`BinaryNeighbourSampler`: one anchor, ``positives`` drawn from its ``pool``
  label-nearest neighbours, and negatives drawn from everything beyond the pool.

Both put the anchor first; the losses rely on that. An epoch makes every training image the
anchor once, in an order that depends only on (seed, epoch), as Kim et al.'s code does.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from dmlbench.data.npz_cache import load_or_rebuild
from dmlbench.errors import DataError

if TYPE_CHECKING:
    from dmlbench.data.base import Split

log = logging.getLogger(__name__)

NEIGHBOURS_VERSION = 1
LABEL_DISTANCES = ("pose", "euclidean", "precomputed")


class LabelDistance:
    """A distance between label vectors, in numpy (evaluation, mining) and torch (losses).

    ``candidate_metric`` (``l2`` or ``l1``, on the flattened vectors) is what faiss searches
    for candidates, and ``lower_bound`` a factor c with distance >= c × candidate distance.
    """

    name: ClassVar[str] = ""
    candidate_metric: ClassVar[str] = "l2"
    lower_bound: float = 1.0

    def rowwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Distances between corresponding rows of ``a`` and ``b`` (broadcasting, last axis L)."""
        raise NotImplementedError

    def from_anchor(self, labels: torch.Tensor) -> torch.Tensor:
        """Distances (B,) from row 0 (the anchor) to every row of ``labels`` (B, L)."""
        raise NotImplementedError

    def key(self) -> str:
        return self.name


class EuclideanDistance(LabelDistance):
    name = "euclidean"

    def rowwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.sqrt(((np.asarray(a, np.float64) - b) ** 2).sum(axis=-1))

    def from_anchor(self, labels: torch.Tensor) -> torch.Tensor:
        return (labels - labels[:1]).pow(2).sum(dim=1).sqrt()


class PoseDistance(LabelDistance):
    """Sum over joints of the Euclidean distance between corresponding joints."""

    name = "pose"
    candidate_metric = "l1"

    def __init__(self, joint_dims: int = 2) -> None:
        self.joint_dims = joint_dims
        self.lower_bound = 1.0 / np.sqrt(joint_dims)  # ‖v‖₂ >= ‖v‖₁ / √dims per joint

    def _joints(self, x: np.ndarray) -> np.ndarray:
        if x.shape[-1] % self.joint_dims:
            raise DataError(
                f"pose labels of width {x.shape[-1]} are not joints of {self.joint_dims}"
            )
        return x.reshape(*x.shape[:-1], -1, self.joint_dims)

    def rowwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        diff = self._joints(np.asarray(a, np.float64) - b)
        return np.sqrt((diff**2).sum(axis=-1)).sum(axis=-1)

    def from_anchor(self, labels: torch.Tensor) -> torch.Tensor:
        diff = (labels - labels[:1]).reshape(len(labels), -1, self.joint_dims)
        return diff.pow(2).sum(dim=2).sqrt().sum(dim=1)

    def key(self) -> str:
        return f"pose{self.joint_dims}"


class PrecomputedDistance(LabelDistance):
    """Distances looked up in shipped neighbour lists; labels are item indices (N, 1).

    Args:
        neighbours: (N, M) indices, row a sorted by label distance from item a.
        distances: (N, M) the matching distances.
    """

    name = "precomputed"

    def __init__(self, neighbours: np.ndarray, distances: np.ndarray) -> None:
        if neighbours.shape != distances.shape:
            raise DataError(
                f"neighbour lists {neighbours.shape} and distances {distances.shape} differ"
            )
        self.neighbours = neighbours
        self.distances = distances

    def lookup(self, anchor: int, others: np.ndarray) -> np.ndarray:
        row = self.neighbours[anchor]
        hit = row[None, :] == np.asarray(others)[:, None]
        found = hit.any(axis=1)
        if not found.all():
            missing = np.asarray(others)[~found][:5].tolist()
            raise DataError(f"no precomputed label distance from item {anchor} to items {missing}")
        return np.asarray(self.distances[anchor][hit.argmax(axis=1)], dtype=np.float64)

    def rowwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise DataError("precomputed label distances are looked up, not computed from labels")

    def from_anchor(self, labels: torch.Tensor) -> torch.Tensor:
        idx = labels[:, 0].detach().cpu().round().long().numpy()
        out = np.zeros(len(idx))
        out[1:] = self.lookup(int(idx[0]), idx[1:])
        out[1:][idx[1:] == idx[0]] = 0.0
        return torch.as_tensor(out, dtype=labels.dtype, device=labels.device)


def label_distance_for(split: Split) -> LabelDistance:
    """The label distance a continuous split names in ``extras["label_distance"]``."""
    name = split.extras.get("label_distance", "euclidean")
    if name == "pose":
        return PoseDistance(int(split.extras.get("joint_dims", 2)))
    if name == "euclidean":
        return EuclideanDistance()
    if name == "precomputed":
        if "neighbours" not in split.extras:
            raise DataError("precomputed label distance without extras['neighbours']")
        return PrecomputedDistance(split.extras["neighbours"], split.extras["neighbour_distances"])
    raise DataError(f"unknown label distance '{name}'; known: {', '.join(LABEL_DISTANCES)}")


class AnchorDistances:
    """What a dense loss calls to get label distances from the anchor (row 0) of its batch.

    Outside the trainer (a loss built on its own) it is the Euclidean distance between label
    vectors; a continuous method binds it to its training split's distance in ``batch_sampler``.
    """

    def __init__(self, distance: LabelDistance | None = None) -> None:
        self.distance: LabelDistance = distance or EuclideanDistance()

    def bind(self, distance: LabelDistance) -> None:
        self.distance = distance

    def __call__(self, labels: torch.Tensor) -> torch.Tensor:
        if labels.ndim == 1:
            labels = labels[:, None]
        return self.distance.from_anchor(labels.to(torch.float64)).to(labels.dtype)


# --------------------------------------------------------------------------- exact neighbours


def exact_knn(
    queries: np.ndarray,
    database: np.ndarray,
    k: int,
    distance: LabelDistance,
    self_index: np.ndarray | None = None,
    block: int = 2048,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest database rows of every query under ``distance`` (see module docstring).

    Args:
        self_index: each query's own row in ``database`` (excluded), or ``None``.

    Returns:
        indices (Q, k) int64 and distances (Q, k) float64, nearest first.
    """
    import faiss

    if isinstance(distance, PrecomputedDistance):
        raise DataError("precomputed distances come with their own neighbour lists")
    db = np.asarray(database, dtype=np.float64)  # exact distances in float64,
    qs = np.asarray(queries, dtype=np.float64)  # faiss candidates in float32
    n_db = len(db)
    k = min(k, n_db - (0 if self_index is None else 1))
    if k < 1:
        raise DataError(f"cannot find neighbours among {n_db} items")
    l1 = distance.candidate_metric == "l1"
    index = faiss.IndexFlat(db.shape[1], faiss.METRIC_L1 if l1 else faiss.METRIC_L2)
    index.add(np.ascontiguousarray(db, dtype=np.float32))
    db_size = float(np.abs(db).sum(axis=1).max() if l1 else (db**2).sum(axis=1).max())
    out_i = np.empty((len(qs), k), dtype=np.int64)
    out_d = np.empty((len(qs), k), dtype=np.float64)
    for start in range(0, len(qs), block):
        rows = np.arange(start, min(start + block, len(qs)))
        width = min(n_db, max(4 * k, k + 16))
        while len(rows):
            own = None if self_index is None else self_index[rows]
            cand = index.search(np.ascontiguousarray(qs[rows], dtype=np.float32), width)[1]
            idx, dist, done = _rerank(qs[rows], db, cand, k, distance, own, db_size)
            done |= width >= n_db
            out_i[rows[done]], out_d[rows[done]] = idx[done], dist[done]
            rows = rows[~done]
            width = min(n_db, 2 * width)
    return out_i, out_d


def _rerank(
    q: np.ndarray,
    db: np.ndarray,
    cand: np.ndarray,
    k: int,
    distance: LabelDistance,
    self_index: np.ndarray | None,
    db_size: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k nearest candidates under ``distance`` and whether they are provably the k nearest.

    Every item outside the candidates is at least as far, under the candidate metric, as the
    last candidate (radius r), hence at label distance >= ``lower_bound`` × r. The slack covers
    float32 rounding in faiss, relative to the sizes of the vectors involved.
    """
    true = distance.rowwise(q[:, None, :], db[cand])
    if self_index is not None:
        true[cand == self_index[:, None]] = np.inf
    order = np.argsort(true, axis=1, kind="stable")[:, :k]
    idx = np.take_along_axis(cand, order, axis=1)
    dist = np.take_along_axis(true, order, axis=1)
    diff = q - db[cand[:, -1]]
    if distance.candidate_metric == "l1":
        slack = 1e-5 * (np.abs(q).sum(axis=1) + db_size) + 1e-12
        radius = np.maximum(np.abs(diff).sum(axis=1) - slack, 0.0)
    else:
        slack = 1e-5 * ((q**2).sum(axis=1) + db_size) + 1e-12
        radius = np.sqrt(np.maximum((diff**2).sum(axis=1) - slack, 0.0))
    return idx, dist, dist[:, -1] <= distance.lower_bound * radius


def neighbour_lists(
    labels: np.ndarray, distance: LabelDistance, k: int, cache: Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The k label-nearest other items of every item, nearest first, cached on disk.

    Returns:
        indices (N, k) int64 and distances (N, k) float32.
    """
    labels = np.ascontiguousarray(labels, dtype=np.float32)
    n = len(labels)

    def build() -> tuple[np.ndarray, ...]:
        idx, dist = exact_knn(labels, labels, k, distance, self_index=np.arange(n))
        return idx, dist.astype(np.float32)

    if cache is None:
        idx, dist32 = build()
        return idx, dist32

    def plausible(arrays: tuple[np.ndarray, ...]) -> bool:
        idx, dist = arrays
        return (
            idx.shape == (n, k)
            and idx.dtype.kind == "i"
            and dist.shape == (n, k)
            and dist.dtype == np.float32
            and bool(((idx >= 0) & (idx < n)).all())
            and bool(np.isfinite(dist).all())
        )

    h = hashlib.sha256(f"v{NEIGHBOURS_VERSION}|{distance.key()}|k{k}|{labels.shape}".encode())
    h.update(labels.tobytes())
    path = cache / "neighbours" / f"nn-{h.hexdigest()[:20]}.npz"
    idx, dist32 = load_or_rebuild(
        path, ("indices", "distances"), build, plausible, "neighbour cache"
    )
    return idx, dist32


def split_neighbours(split: Split, k: int) -> np.ndarray:
    """(N, >= k) label-nearest neighbours of every training item: shipped or computed."""
    from dmlbench.data.base import cache_dir

    if split.extras.get("label_distance") == "precomputed":
        nn = np.asarray(split.extras["neighbours"])
        if nn.shape[1] < k:
            raise DataError(f"the shipped neighbour lists hold {nn.shape[1]} < {k} neighbours")
        return nn
    idx, _ = neighbour_lists(np.asarray(split.labels), label_distance_for(split), k, cache_dir())
    return idx


# --------------------------------------------------------------------------- samplers


class _AnchorSampler:
    """Shared plumbing: one batch per anchor, anchors in a (seed, epoch)-seeded order."""

    def __init__(self, num_items: int, batch_size: int, seed: int) -> None:
        self.num_items = num_items
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_items

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        for anchor in rng.permutation(self.num_items):
            yield self.batch(int(anchor), rng)

    def batch(self, anchor: int, rng: np.random.Generator) -> list[int]:
        raise NotImplementedError

    def _others(self, rng: np.random.Generator, exclude: np.ndarray, count: int) -> np.ndarray:
        """``count`` distinct items outside ``exclude``, uniformly at random."""
        draw = rng.choice(
            self.num_items, size=min(self.num_items, count + len(exclude)), replace=False
        )
        return draw[~np.isin(draw, exclude)][:count]


class DenseTripletSampler(_AnchorSampler):
    """[anchor, its k label-nearest neighbours (nearest first), random others] (Kim et al. §3.3).

    Args:
        neighbours: (N, >= k) label-nearest neighbours of every item, nearest first.
        batch_size: images per batch (anchor included); clipped to the number of items.
        k: nearest neighbours per batch (Kim et al.: 5).
    """

    def __init__(self, neighbours: np.ndarray, batch_size: int, k: int, seed: int) -> None:
        super().__init__(len(neighbours), batch_size, seed)
        if k < 1 or neighbours.shape[1] < k:
            raise DataError(
                f"dense mining needs k >= 1 neighbours per item, have {neighbours.shape[1]}"
            )
        if min(batch_size, self.num_items) < k + 2:
            raise DataError(
                f"batch size {batch_size} leaves no room beyond anchor and {k} neighbours"
            )
        self.neighbours = neighbours[:, :k]
        self.k = k

    def batch(self, anchor: int, rng: np.random.Generator) -> list[int]:
        near = self.neighbours[anchor]
        size = min(self.batch_size, self.num_items)
        others = self._others(rng, np.append(near, anchor), size - 1 - self.k)
        return [anchor, *near.tolist(), *others.tolist()]


class BinaryNeighbourSampler(_AnchorSampler):
    """[anchor, P positives from its ``pool`` label-NNs, negatives from beyond] (Kim et al. §4.1).

    Kim et al.'s binary baseline: the ``pool`` (30) label-nearest neighbours are positives, the
    rest negatives; a batch holds ``positives`` (5) of them, drawn at random, and fills the rest
    with random negatives. Losses read rows 1..P as positives and the rest as negatives.
    """

    def __init__(
        self, neighbours: np.ndarray, batch_size: int, pool: int, positives: int, seed: int
    ) -> None:
        super().__init__(len(neighbours), batch_size, seed)
        if not 1 <= positives <= pool <= neighbours.shape[1]:
            raise DataError(
                f"need 1 <= positives ({positives}) <= pool ({pool}) <= neighbours per item "
                f"({neighbours.shape[1]})"
            )
        if batch_size < positives + 2 or self.num_items < batch_size + pool - positives:
            raise DataError(
                f"{self.num_items} items cannot fill batches of {batch_size} with "
                f"{positives} positives and negatives beyond the {pool}-NN pool"
            )
        self.pool = neighbours[:, :pool]
        self.positives = positives

    def batch(self, anchor: int, rng: np.random.Generator) -> list[int]:
        pool = self.pool[anchor]
        pos = rng.choice(pool, size=self.positives, replace=False)
        neg = self._others(rng, np.append(pool, anchor), self.batch_size - 1 - self.positives)
        return [anchor, *pos.tolist(), *neg.tolist()]
