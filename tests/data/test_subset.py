"""``Split.subset`` on shipped neighbour lists: a validation fold of MPII's training images.

A search carves a fold out of the training split; with ``precomputed`` label distances the
split carries (N, M) neighbour lists indexing the full split. A subset that kept them would let
the dense samplers draw items outside the fold (or past its end) and the losses look up
distances of the wrong items, so the lists are restricted to the members and renumbered. The
data here are points on a line, so every expected distance is known without the code under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dmlbench.data.base import ArrayImages, Split, restrict_neighbours
from dmlbench.data.dense import DenseTripletSampler, label_distance_for, split_neighbours
from dmlbench.search.validation import validation_folds
from tests.data import test_mpii

N = 12
# Unsorted and not a prefix: a renumbering by sorted order or by slicing would be caught.
MEMBERS = np.array([7, 2, 11, 5, 0])


def positions(n: int = N, seed: int = 0) -> np.ndarray:
    """Distinct points on a line; the label distance of two items is |p_i - p_j|."""
    return np.random.default_rng(seed).permutation(n).astype(np.float64) * 0.37 + 0.1


def complete_lists(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every other item, nearest first, as the MPII bundle ships them."""
    d = np.abs(p[:, None] - p[None, :])
    order = np.argsort(d, axis=1, kind="stable")
    lists = np.array([[j for j in row if j != i] for i, row in enumerate(order)])
    return lists, np.take_along_axis(d, lists, axis=1).astype(np.float32)


def precomputed_split(p: np.ndarray, lists: np.ndarray, dists: np.ndarray) -> Split:
    n = len(p)
    return Split(
        ArrayImages(np.zeros((n, 1, 2, 2), dtype=np.uint8)),
        np.arange(n, dtype=np.float32)[:, None],
        label_kind="continuous",
        extras={
            "label_distance": "precomputed",
            "neighbours": lists,
            "neighbour_distances": dists,
            "distances": np.zeros((3, n - 3), dtype=np.float32),  # a query x gallery block
            "mld_scale": 0.5,
        },
    )


def test_subset_lists_only_members_renumbered_with_their_distances() -> None:
    p = positions()
    sub = precomputed_split(p, *complete_lists(p)).subset(MEMBERS)
    nn, dist = sub.extras["neighbours"], sub.extras["neighbour_distances"]
    n = len(MEMBERS)
    assert nn.shape == dist.shape == (n, n - 1)  # complete lists: nothing lost
    assert nn.min() >= 0 and nn.max() < n
    for i in range(n):
        assert sorted(nn[i].tolist()) == [j for j in range(n) if j != i]
        truth = np.abs(p[MEMBERS[i]] - p[MEMBERS[nn[i]]])
        np.testing.assert_allclose(dist[i], truth, rtol=1e-6)
        assert np.all(np.diff(dist[i]) >= 0)  # still sorted by label distance
    np.testing.assert_array_equal(sub.labels[:, 0], np.arange(n))  # labels index the subset
    assert "distances" not in sub.extras  # the full split's block would not fit the fold
    assert sub.extras["mld_scale"] == 0.5 and sub.extras["label_distance"] == "precomputed"


def test_samplers_and_loss_distances_stay_inside_the_fold() -> None:
    p = positions()
    sub = precomputed_split(p, *complete_lists(p)).subset(MEMBERS)
    n = len(MEMBERS)
    nn = split_neighbours(sub, 2)
    assert nn.max() < n
    sampler = DenseTripletSampler(nn, batch_size=n, k=2, seed=0)
    distance = label_distance_for(sub)
    for batch in sampler:
        assert all(0 <= i < n for i in batch)
        got = distance.from_anchor(torch.as_tensor(sub.labels[batch], dtype=torch.float64))
        truth = np.abs(p[MEMBERS[batch]] - p[MEMBERS[batch[0]]])
        np.testing.assert_allclose(got.numpy(), truth, rtol=1e-6)


def test_truncated_lists_keep_each_members_nearest_members_in_order() -> None:
    """Lists of the M nearest items only: a row keeps the members it lists, in order, cut to
    the shortest row so that every row has the same width."""
    p = positions(20, seed=1)
    full, full_d = complete_lists(p)
    lists, dists = full[:, :8], full_d[:, :8]
    members = np.array([3, 17, 8, 0, 12, 5, 19, 10])
    nn, dist = restrict_neighbours(lists, dists, members)
    position = {int(m): i for i, m in enumerate(members)}
    kept = [[position[int(j)] for j in lists[m] if int(j) in position] for m in members]
    width = min(len(k) for k in kept)
    assert width < 8  # the case is not trivial: some listed items are outside the fold
    assert nn.shape == dist.shape == (len(members), width)
    assert nn.tolist() == [k[:width] for k in kept]
    np.testing.assert_allclose(dist, np.abs(p[members][:, None] - p[members[nn]]), rtol=1e-6)


def test_a_validation_fold_of_the_mpii_bundle_indexes_only_itself(tmp_path: Path) -> None:
    """The loader's own split, carved as a search carves it."""
    from dmlbench.data.files import load_protocol_data

    root = tmp_path / "mpii"
    truth = test_mpii.make_bundle(root)
    train = load_protocol_data(test_mpii.protocol(root), cache=tmp_path / "cache").train
    [(tr_idx, va_idx)] = validation_folds(train, 1, 0.25, seed=0)
    for idx in (tr_idx, va_idx):
        sub = train.subset(idx)
        nn = sub.extras["neighbours"]
        assert nn.shape == (len(idx), len(idx) - 1) and nn.max() < len(idx)
        full = np.full((test_mpii.N_TRAIN,) * 2, np.inf)
        np.put_along_axis(full, truth["lists"], truth["dists"], axis=1)
        expected = np.take_along_axis(full[idx], idx[nn], axis=1)
        np.testing.assert_allclose(sub.extras["neighbour_distances"], expected, rtol=1e-6)


def test_a_subset_without_lists_is_left_alone() -> None:
    split = Split(
        ArrayImages(np.zeros((4, 1, 2, 2), dtype=np.uint8)),
        np.arange(8, dtype=np.float32).reshape(4, 2),
        label_kind="continuous",
        extras={"label_distance": "euclidean"},
    )
    sub = split.subset(np.array([3, 1]))
    np.testing.assert_array_equal(sub.labels, split.labels[[3, 1]])  # labels are not renumbered
    assert sub.extras == {"label_distance": "euclidean"}


@pytest.mark.parametrize("members", [np.array([], dtype=np.int64), np.array([4])])
def test_degenerate_folds_give_empty_rows(members: np.ndarray) -> None:
    p = positions()
    nn, dist = restrict_neighbours(*complete_lists(p), members)
    assert nn.shape == dist.shape == (len(members), 0)
