"""Label distances, exact cached neighbour lists and Kim et al.'s batch samplers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from dmlbench.data import dense
from dmlbench.data.base import ArrayImages, Split
from dmlbench.data.dense import (
    AnchorDistances,
    BinaryNeighbourSampler,
    DenseTripletSampler,
    EuclideanDistance,
    PoseDistance,
    PrecomputedDistance,
    exact_knn,
    label_distance_for,
    neighbour_lists,
)
from dmlbench.errors import DataError


def brute_knn(labels: np.ndarray, dist: dense.LabelDistance, k: int) -> np.ndarray:
    full = dist.rowwise(labels[:, None, :], labels[None, :, :])
    np.fill_diagonal(full, np.inf)
    return np.sort(full, axis=1)[:, :k]


def test_pose_distance_hand_example() -> None:
    a = np.array([0.0, 0.0, 1.0, 1.0])
    b = np.array([3.0, 4.0, 1.0, 2.0])  # joint 1 moves by (3, 4), joint 2 by (0, 1)
    assert PoseDistance().rowwise(a, b) == pytest.approx(5.0 + 1.0)
    assert EuclideanDistance().rowwise(a, b) == pytest.approx(np.sqrt(9 + 16 + 1))
    t = torch.tensor(np.stack([a, b, a]))
    assert PoseDistance().from_anchor(t).tolist() == pytest.approx([0.0, 6.0, 0.0])


@pytest.mark.parametrize("dist", [PoseDistance(), EuclideanDistance()], ids=["pose", "euclid"])
@pytest.mark.parametrize("seed", [0, 1])
def test_exact_knn_equals_brute_force_and_widens_when_needed(
    dist: PoseDistance | EuclideanDistance, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(12, 28))
    labels = centres[rng.integers(0, 12, 400)] + rng.normal(size=(400, 28)) * 0.3
    calls: list[int] = []
    real = dense._rerank

    def counted(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(dense, "_rerank", counted)
    idx, d = exact_knn(labels, labels, 7, dist, self_index=np.arange(400), block=128)
    expected = brute_knn(labels, dist, 7)
    np.testing.assert_allclose(d, expected, rtol=1e-9)
    np.testing.assert_allclose(dist.rowwise(labels[:, None], labels[idx]), d, rtol=1e-9)
    assert not (idx == np.arange(400)[:, None]).any()
    if isinstance(dist, PoseDistance):
        assert len(calls) > 4  # the L2 candidates were not enough for some rows: re-searched


def test_neighbour_lists_are_cached_and_a_corrupt_cache_is_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    idx, d = neighbour_lists(labels, PoseDistance(), 5, tmp_path)
    files = list((tmp_path / "neighbours").glob("*.npz"))
    assert len(files) == 1 and idx.shape == (50, 5) and d.dtype == np.float32
    monkeypatch.setattr(dense, "exact_knn", lambda *a, **kw: pytest.fail("cache not used"))
    again, _ = neighbour_lists(labels, PoseDistance(), 5, tmp_path)
    assert np.array_equal(idx, again)
    monkeypatch.undo()
    files[0].write_bytes(b"not a zip")
    repaired, _ = neighbour_lists(labels, PoseDistance(), 5, tmp_path)
    assert np.array_equal(idx, repaired)
    other, _ = neighbour_lists(labels, EuclideanDistance(), 5, tmp_path)  # distance in the key
    assert len(list((tmp_path / "neighbours").glob("*.npz"))) == 2
    assert other.shape == (50, 5)


def neighbours_of(n: int, k: int, seed: int = 0) -> np.ndarray:
    labels = np.random.default_rng(seed).normal(size=(n, 6))
    idx, _ = exact_knn(labels, labels, k, EuclideanDistance(), self_index=np.arange(n))
    return idx


def test_dense_sampler_layout_epoch_and_determinism() -> None:
    nn = neighbours_of(100, 8)
    sampler = DenseTripletSampler(nn, batch_size=20, k=5, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 100
    assert sorted(b[0] for b in batches) == list(range(100))  # every item anchors once
    for b in batches:
        assert len(b) == 20 and len(set(b)) == 20
        assert b[1:6] == nn[b[0], :5].tolist()  # the k label-nearest, nearest first
    assert batches == list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != batches
    # the random others are spread over the data, not the next neighbours
    others = np.concatenate([b[6:] for b in batches])
    assert len(np.unique(others)) > 90


def test_binary_sampler_positives_from_pool_negatives_beyond() -> None:
    nn = neighbours_of(120, 30)
    sampler = BinaryNeighbourSampler(nn, batch_size=16, pool=30, positives=5, seed=0)
    for b in list(sampler)[:40]:
        anchor, pos, neg = b[0], b[1:6], b[6:]
        assert len(b) == 16 and len(set(b)) == 16
        assert set(pos) <= set(nn[anchor].tolist())
        assert not set(neg) & (set(nn[anchor].tolist()) | {anchor})
    with pytest.raises(DataError):
        BinaryNeighbourSampler(nn, batch_size=16, pool=31, positives=5, seed=0)


def test_samplers_reject_impossible_batches() -> None:
    nn = neighbours_of(10, 5)
    with pytest.raises(DataError):
        DenseTripletSampler(nn, batch_size=6, k=5, seed=0)  # no room for random others
    with pytest.raises(DataError):
        BinaryNeighbourSampler(nn, batch_size=8, pool=5, positives=2, seed=0)


def test_precomputed_lookup_and_binding_from_split() -> None:
    nbrs = np.array([[1, 2], [0, 2], [1, 0]])
    dists = np.array([[0.5, 2.0], [0.5, 1.0], [1.0, 2.0]])
    d = PrecomputedDistance(nbrs, dists)
    labels = torch.tensor([[2.0], [0.0], [1.0]])  # item indices; anchor is item 2
    assert d.from_anchor(labels).tolist() == pytest.approx([0.0, 2.0, 1.0])
    with pytest.raises(DataError, match="no precomputed"):
        PrecomputedDistance(nbrs[:, :1], dists[:, :1]).from_anchor(labels)
    images = ArrayImages(np.zeros((3, 1, 2, 2), dtype=np.uint8))
    s = Split(
        images,
        np.arange(3, dtype=np.float32)[:, None],
        label_kind="continuous",
        extras={"label_distance": "precomputed", "neighbours": nbrs, "neighbour_distances": dists},
    )
    bound = AnchorDistances()
    bound.bind(label_distance_for(s))
    assert bound(labels).tolist() == pytest.approx([0.0, 2.0, 1.0])
    with pytest.raises(DataError, match="unknown label distance"):
        label_distance_for(Split(images, s.labels, "continuous", extras={"label_distance": "x"}))


def test_dense_triplet_set_is_eq10() -> None:
    from dmlbench.methods.log_ratio import dense_triplets

    dy = torch.tensor([0.0, 0.3, 0.1, 0.3, 0.7])
    mask = dense_triplets(dy)
    expected = {(i, j) for i in range(1, 5) for j in range(1, 5) if dy[i] < dy[j]}
    got = {(int(i) + 1, int(j) + 1) for i, j in torch.nonzero(mask)}
    assert got == expected and (1, 3) not in got and (3, 1) not in got  # ties: no triplet


@pytest.mark.slow
@pytest.mark.heavy
def test_neighbour_lists_scale_to_100k_without_a_quadratic_matrix() -> None:
    import tracemalloc

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(500, 28)) * 0.3
    labels = centres[rng.integers(0, 500, 100_000)] + rng.normal(size=(100_000, 28)) * 0.02
    tracemalloc.start()
    idx, d = neighbour_lists(labels.astype(np.float32), PoseDistance(), 30, cache=None)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert idx.shape == (100_000, 30)
    assert peak < 1e9  # an N×N float32 matrix would be 40 GB
    sample = rng.choice(100_000, 20, replace=False)
    full = PoseDistance().rowwise(
        labels[sample][:, None].astype(np.float32), labels[None].astype(np.float32)
    )
    full[np.arange(20), sample] = np.inf
    np.testing.assert_allclose(d[sample], np.sort(full, axis=1)[:, :30], rtol=1e-5)
