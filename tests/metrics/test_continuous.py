"""Continuous-label metrics: a hand-worked example, perfect vs reversed rankings, and equality
with an independent numpy implementation of Kim et al. 2019 eq. 12 on random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmlbench.data.base import ArrayImages, Split
from dmlbench.metrics.continuous import (
    distances_from_lists,
    evaluate_continuous,
    evaluate_continuous_per_query,
)
from dmlbench.protocol import MetricsSpec


def spec(ks: list[int], normalize: bool = True) -> MetricsSpec:
    return MetricsSpec(
        recall_at=[],
        nmi=False,
        map_at_r=False,
        r_precision=False,
        ndcg_at=ks,
        label_distance_at=ks,
        normalize=normalize,
    )


def split(
    labels: np.ndarray,
    queries: np.ndarray | None = None,
    gallery: np.ndarray | None = None,
    **extras: object,
) -> Split:
    images = ArrayImages(np.zeros((len(labels), 1, 2, 2), dtype=np.uint8))
    return Split(
        images,
        np.asarray(labels, dtype=np.float32),
        label_kind="continuous",
        queries=queries,
        gallery=gallery,
        extras={"label_distance": "euclidean", **extras},
    )


def unit(deg: float) -> list[float]:
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


def test_hand_worked_example() -> None:
    # Items: q1 (label 0), q2 (label 3); database A (0), B (1), C (3).
    labels = np.array([[0.0], [3.0], [0.0], [1.0], [3.0]])
    emb = np.array([unit(0), unit(90), unit(30), unit(10), unit(88)])
    # q1 (at 0°) retrieves B (10°), A (30°), C (88°): label distances 1, 0, 3.
    # q2 (at 90°) retrieves C (88°), A (30°), B (10°): label distances 0, 3, 2.
    s = split(labels, queries=np.array([0, 1]), gallery=np.array([2, 3, 4]))
    out = evaluate_continuous(emb, s, spec([1, 2, 3]))
    l3 = math.log2(3)
    q1 = [
        1 / 2 / 1.0,
        (1 / 2 + 1 / l3) / (1 + 1 / 2 / l3),
        (1 / 2 + 1 / l3 + 1 / 4 / 2) / (1 + 1 / 2 / l3 + 1 / 4 / 2),
    ]
    q2 = [
        1.0,
        (1 + 1 / 4 / l3) / (1 + 1 / 3 / l3),
        (1 + 1 / 4 / l3 + 1 / 3 / 2) / (1 + 1 / 3 / l3 + 1 / 4 / 2),
    ]
    for k in (1, 2, 3):
        assert out[f"ndcg@{k}"] == pytest.approx((q1[k - 1] + q2[k - 1]) / 2, rel=1e-9)
    assert out["mld@1"] == pytest.approx((1 + 0) / 2)
    assert out["mld@2"] == pytest.approx(((1 + 0) / 2 + (0 + 3) / 2) / 2)
    assert out["mld@3"] == pytest.approx(((1 + 0 + 3) / 3 + (0 + 3 + 2) / 3) / 2)
    assert out["queries"] == 2
    # each query's own values (the records' query_values): their means are the metrics
    same, per = evaluate_continuous_per_query(emb, s, spec([1, 2, 3]))
    assert same == out
    np.testing.assert_allclose(per["ndcg@3"], [q1[2], q2[2]], rtol=1e-12)
    np.testing.assert_allclose(per["mld@2"], [(1 + 0) / 2, (0 + 3) / 2])
    for key, values in per.items():
        assert values.mean() == pytest.approx(out[key], rel=1e-12)


def test_perfect_ranking_scores_one_and_reversed_scores_lower() -> None:
    rng = np.random.default_rng(0)
    labels = rng.normal(size=(60, 3))
    s = split(labels)  # every item queries all the others
    perfect = evaluate_continuous(labels, s, spec([1, 5, 10], normalize=False))
    for k in (1, 5, 10):
        assert perfect[f"ndcg@{k}"] == pytest.approx(1.0, abs=1e-12)
    # One query at the origin; embedding distance = 10 − label distance reverses the order.
    d = np.linspace(0.1, 5.0, 20)
    lab = np.concatenate([[[0.0]], d[:, None]])
    emb = np.concatenate([[[0.0]], (10 - d)[:, None]])
    s1 = split(lab, queries=np.array([0]), gallery=np.arange(1, 21))
    good = evaluate_continuous(lab, s1, spec([5, 10], normalize=False))
    bad = evaluate_continuous(emb, s1, spec([5, 10], normalize=False))
    for k in (5, 10):
        assert good[f"ndcg@{k}"] == pytest.approx(1.0)
        assert bad[f"ndcg@{k}"] < good[f"ndcg@{k}"] - 0.05
        assert bad[f"mld@{k}"] > good[f"mld@{k}"]


def numpy_eq12(
    emb: tuple[np.ndarray, np.ndarray], label_d: np.ndarray, ks: list[int], normalize: bool
) -> dict[str, float]:
    """Independent eq. 12: full distance matrices, full sorts, a loop over queries and ranks.

    ``label_d`` is the (Q, G) label distance matrix; ``emb`` = (query emb, gallery emb).
    """
    q, g = emb
    if normalize:
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
    emb_d = np.linalg.norm(q[:, None, :] - g[None, :, :], axis=2)
    out = {}
    for k in ks:
        ndcg, mld = [], []
        for row in range(len(q)):
            ranked = np.argsort(emb_d[row], kind="stable")[:k]
            ideal = np.sort(label_d[row])[:k]
            dcg = sum(
                2 ** (-math.log2(label_d[row, r] + 1)) / math.log2(i + 2)
                for i, r in enumerate(ranked)
            )
            z = sum(2 ** (-math.log2(v + 1)) / math.log2(i + 2) for i, v in enumerate(ideal))
            ndcg.append(dcg / z)
            mld.append(label_d[row, ranked].mean())
        out[f"ndcg@{k}"], out[f"mld@{k}"] = float(np.mean(ndcg)), float(np.mean(mld))
    return out


def pose_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    diff = (a[:, None, :] - b[None, :, :]).reshape(len(a), len(b), -1, 2)
    return np.sqrt((diff**2).sum(axis=3)).sum(axis=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_independent_numpy_eq12_query_to_gallery(seed: int, normalize: bool) -> None:
    rng = np.random.default_rng(seed)
    n = 150
    labels = rng.normal(size=(n, 28)) * 0.2  # 14 joints × 2
    emb = labels @ rng.normal(size=(28, 16)) + rng.normal(size=(n, 16)) * 0.5
    queries = np.arange(0, n, 7)
    gallery = np.setdiff1d(np.arange(n), queries)
    ks = [1, 3, 10, 25]
    s = split(labels, queries, gallery, label_distance="pose", joint_dims=2)
    ours = evaluate_continuous(emb, s, spec(ks, normalize))
    ref = numpy_eq12(
        (emb[queries], emb[gallery]), pose_matrix(labels[queries], labels[gallery]), ks, normalize
    )
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, rel=1e-5), key


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_numpy_when_every_item_queries_the_others(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.uniform(size=(80, 3))
    emb = rng.normal(size=(80, 8))
    ours = evaluate_continuous(emb, split(labels), spec([1, 5, 10]))
    full_l = np.linalg.norm(labels[:, None] - labels[None], axis=2)
    # Remove each query from its own gallery.
    res: dict[str, list[float]] = {}
    for q in range(80):
        keep = np.arange(80) != q
        r = numpy_eq12((emb[[q]], emb[keep]), full_l[[q]][:, keep], [1, 5, 10], True)
        for key, v in r.items():
            res.setdefault(key, []).append(v)
    for key, values in res.items():
        assert ours[key] == pytest.approx(np.mean(values), rel=1e-5), key


def test_precomputed_distances_and_mld_scale() -> None:
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(40, 6))
    queries, gallery = np.arange(10), np.arange(10, 40)
    matrix = rng.uniform(0, 5, size=(10, 30)).astype(np.float32)
    index = np.arange(40, dtype=np.float32)[:, None]
    s = split(
        index, queries, gallery, label_distance="precomputed", distances=matrix, mld_scale=0.5
    )
    ours = evaluate_continuous(emb, s, spec([1, 4, 10]))
    ref = numpy_eq12((emb[queries], emb[gallery]), matrix.astype(np.float64), [1, 4, 10], True)
    for k in (1, 4, 10):
        assert ours[f"ndcg@{k}"] == pytest.approx(ref[f"ndcg@{k}"], rel=1e-5)
        assert ours[f"mld@{k}"] == pytest.approx(0.5 * ref[f"mld@{k}"], rel=1e-5)


def test_k_larger_than_the_gallery_is_clipped() -> None:
    labels = np.array([[0.0], [1.0], [2.0]])
    s = split(labels, queries=np.array([0]), gallery=np.array([1, 2]))
    out = evaluate_continuous(labels, s, spec([1, 10], normalize=False))
    assert out["ndcg@10"] == pytest.approx(1.0)
    assert out["mld@10"] == pytest.approx(1.5)


def test_no_metrics_asked_gives_no_metrics() -> None:
    s = split(np.zeros((3, 1)))
    assert evaluate_continuous(np.zeros((3, 2)), s, spec([])) == {}


# --------------------------------------------------------------------------- validation folds


def _points(n: int, seed: int) -> np.ndarray:
    """Distinct points on a line: label distance |p_i - p_j| is known exactly."""
    return np.random.default_rng(seed).permutation(n).astype(np.float64) * 0.3 + 0.2


def _lists_split(p: np.ndarray, keep: int | None = None) -> Split:
    """A ``precomputed`` split carrying only neighbour lists (each item's ``keep`` nearest)."""
    d = np.abs(p[:, None] - p[None, :])
    order = np.argsort(d, axis=1, kind="stable")
    lists = np.array([[j for j in row if j != i] for i, row in enumerate(order)])[:, :keep]
    index = np.arange(len(p), dtype=np.float32)[:, None]
    dists = np.take_along_axis(d, lists, axis=1).astype(np.float32)
    return split(index, label_distance="precomputed", neighbours=lists, neighbour_distances=dists)


def test_distances_from_complete_lists_are_the_label_distances() -> None:
    p = _points(9, seed=0)
    matrix = distances_from_lists(_lists_split(p))
    assert matrix.shape == (9, 9)
    np.testing.assert_allclose(matrix, np.abs(p[:, None] - p[None, :]), rtol=1e-6, atol=1e-7)


def test_pairs_missing_from_the_lists_are_at_infinite_distance() -> None:
    p = _points(9, seed=1)
    s = _lists_split(p, keep=3)
    matrix = distances_from_lists(s)
    listed = np.zeros((9, 9), dtype=bool)
    np.put_along_axis(listed, s.extras["neighbours"], True, axis=1)
    np.fill_diagonal(listed, True)
    assert np.all(np.isinf(matrix[~listed])) and np.all(np.isfinite(matrix[listed]))
    truth = np.abs(p[:, None] - p[None, :])
    np.testing.assert_allclose(matrix[listed], truth[listed], rtol=1e-6, atol=1e-7)


def test_a_fold_of_a_precomputed_split_scores_like_its_label_distances() -> None:
    """Validation on a fold of MPII-like data: the fold's lists give the same nDCG and mean
    label distance as an independent evaluation from the members' own (Euclidean) labels."""
    p = _points(30, seed=2)
    members = np.random.default_rng(3).choice(30, size=12, replace=False)
    fold = _lists_split(p).subset(members)
    emb = np.random.default_rng(4).normal(size=(12, 5))
    ours = evaluate_continuous(emb, fold, spec([1, 3, 5]))
    reference = evaluate_continuous(emb, split(p[members][:, None]), spec([1, 3, 5]))
    assert ours.keys() == reference.keys()
    for key, value in reference.items():
        assert ours[key] == pytest.approx(value, rel=1e-5), key
