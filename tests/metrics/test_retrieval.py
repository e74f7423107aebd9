"""The metric engine against pytorch-metric-learning and against slow loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

from dmlbench.metrics.retrieval import embedding_metrics, knn, l2_normalize
from dmlbench.protocol import MetricsSpec

SPEC = MetricsSpec(recall_at=[1, 2, 4, 8], nmi=False)


def clustered(seed: int, n_classes: int = 12, per_class: int = 9, d: int = 16, noise: float = 0.6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d))
    labels = np.repeat(np.arange(n_classes), per_class)
    x = centres[labels] + noise * rng.normal(size=(len(labels), d))
    return x.astype(np.float32), labels


def random_case(seed: int, n: int = 150, d: int = 8, classes: int = 20):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, classes, n)


def pml(x: np.ndarray, labels: np.ndarray, include: tuple[str, ...], **kw) -> dict[str, float]:
    calc = AccuracyCalculator(include=include, device=torch.device("cpu"), **kw)
    t = torch.from_numpy(l2_normalize(x))
    return calc.get_accuracy(t, torch.from_numpy(labels))


def slow_metrics(x: np.ndarray, labels: np.ndarray, ks: list[int]) -> dict[str, float]:
    """Loop over queries with a full sort: Recall@K, R-Precision, MAP@R by definition."""
    x = l2_normalize(x)
    names = [*(f"recall@{k}" for k in ks), "r_precision", "map@r"]
    out: dict[str, list[float]] = {name: [] for name in names}
    for q in range(len(x)):
        others = [i for i in range(len(x)) if i != q]
        d = [float(np.sum((x[q] - x[i]) ** 2)) for i in others]
        ranked = [others[i] for i in np.argsort(d, kind="stable")]
        rel = [labels[i] == labels[q] for i in ranked]
        r = sum(rel)
        if r == 0:
            continue
        for k in ks:
            out[f"recall@{k}"].append(float(any(rel[:k])))
        out["r_precision"].append(sum(rel[:r]) / r)
        ap = sum(sum(rel[: i + 1]) / (i + 1) for i in range(r) if rel[i]) / r
        out["map@r"].append(ap)
    return {k: float(np.mean(v)) for k, v in out.items()}


@pytest.mark.parametrize(
    "case", [*(("random", s) for s in range(3)), *(("clustered", s) for s in range(3))]
)
def test_equals_pytorch_metric_learning(case: tuple[str, int]) -> None:
    kind, seed = case
    x, labels = random_case(seed) if kind == "random" else clustered(seed)
    ours = embedding_metrics(x, labels, SPEC)
    theirs = pml(x, labels, ("precision_at_1", "r_precision", "mean_average_precision_at_r"))
    assert ours["recall@1"] == pytest.approx(theirs["precision_at_1"], abs=1e-4)
    assert ours["r_precision"] == pytest.approx(theirs["r_precision"], abs=1e-4)
    assert ours["map@r"] == pytest.approx(theirs["mean_average_precision_at_r"], abs=1e-4)


@pytest.mark.parametrize("case", [("random", 0), ("clustered", 1), ("clustered", 2)])
def test_nmi_equals_pytorch_metric_learning(case: tuple[str, int]) -> None:
    # Both use faiss k-means; given the same k-means settings (iterations, seed) the whole
    # pipeline (normalisation, k = number of classes, NMI) must agree exactly.
    from pytorch_metric_learning.utils.inference import FaissKMeans

    kind, seed = case
    x, labels = random_case(seed) if kind == "random" else clustered(seed)
    ours = embedding_metrics(x, labels, MetricsSpec(recall_at=[1], nmi=True), seed=seed)["nmi"]
    kmeans = FaissKMeans(
        niter=50, seed=seed, min_points_per_centroid=1, max_points_per_centroid=1_000_000
    )
    theirs = pml(x, labels, ("NMI",), kmeans_func=kmeans)["NMI"]
    assert ours == pytest.approx(theirs, abs=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_equals_slow_definition(seed: int) -> None:
    x, labels = random_case(seed, n=80, classes=10)
    ours = embedding_metrics(x, labels, SPEC)
    slow = slow_metrics(x, labels, SPEC.recall_at)
    for key, value in slow.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_lone_queries_are_left_out() -> None:
    x, labels = clustered(0, n_classes=4, per_class=3)
    labels = np.append(labels, 99)  # a class with one image, far from everything
    x = np.vstack([x, np.full((1, x.shape[1]), 100.0, dtype=np.float32)])
    spec = SPEC.model_copy(update={"normalize": False})
    out = embedding_metrics(x, labels, spec)
    assert out["lone_queries"] == 1 and out["queries"] == len(labels) - 1
    assert out == {
        **embedding_metrics(x[:-1], labels[:-1], spec),
        "lone_queries": 1.0,
        "queries": 12.0,
    }


def test_self_is_excluded_even_with_duplicate_embeddings() -> None:
    x = np.zeros((6, 4), dtype=np.float32)  # all identical: ties everywhere
    x[:, 0] = 1.0
    idx = knn(x, x, 5, self_index=np.arange(6))
    for q in range(6):
        assert q not in idx[q] and len(set(idx[q])) == 5


def test_query_gallery_mode() -> None:
    x, labels = clustered(1, noise=0.01)
    queries, gallery = (
        np.arange(0, len(x), 3),
        np.setdiff1d(np.arange(len(x)), np.arange(0, len(x), 3)),
    )
    out = embedding_metrics(x, labels, SPEC, queries=queries, gallery=gallery)
    assert out["recall@1"] == 1.0 and out["map@r"] == pytest.approx(1.0)
    assert out["queries"] == len(queries)


def test_metrics_are_in_range_and_perfect_when_separated() -> None:
    x, labels = clustered(2, noise=0.001)
    out = embedding_metrics(x, labels, MetricsSpec(recall_at=[1, 4], nmi=True))
    assert out["recall@1"] == out["map@r"] == out["r_precision"] == 1.0
    assert out["nmi"] > 0.8  # k-means from a random start may still merge two clusters
    y, ylab = random_case(3)
    for key, value in embedding_metrics(y, ylab, MetricsSpec(recall_at=[1, 4], nmi=True)).items():
        if key not in {"queries", "lone_queries"}:
            assert 0.0 <= value <= 1.0, key


def _stable_reference_knn(q: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """Float64 distances, ties by gallery index (a stable argsort)."""
    d = ((q.astype(np.float64)[:, None, :] - g.astype(np.float64)[None]) ** 2).sum(axis=2)
    return np.argsort(d, axis=1, kind="stable")[:, :k]


@pytest.mark.parametrize("levels", [2, 3, 5])
def test_ties_are_broken_by_gallery_index_on_quantised_embeddings(levels: int) -> None:
    """Heavily quantised embeddings have many exact ties; the order must not be faiss's."""
    from dmlbench.metrics.retrieval import knn

    rng = np.random.default_rng(levels)
    g = (rng.integers(0, levels, size=(400, 8)) / levels).astype(np.float32)
    q = g[rng.choice(400, 60, replace=False)] + 0.0
    q[::3] = (rng.integers(0, levels, size=(20, 8)) / levels).astype(np.float32)
    for k in (1, 5, 20):
        np.testing.assert_array_equal(knn(q, g, k), _stable_reference_knn(q, g, k))


def test_recall_on_quantised_embeddings_equals_the_stable_reference() -> None:
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, size=(300, 6))).astype(np.float32)  # binary: massive ties
    labels = rng.integers(0, 10, size=300)
    spec = MetricsSpec(recall_at=[1, 2], nmi=False, normalize=False)
    got = embedding_metrics(x, labels, spec)
    d = ((x[:, None].astype(np.float64) - x[None]) ** 2).sum(axis=2)
    np.fill_diagonal(d, np.inf)
    nn = np.argsort(d, axis=1, kind="stable")[:, :2]
    hits = labels[nn] == labels[:, None]
    assert got["recall@1"] == pytest.approx(hits[:, :1].any(axis=1).mean())
    assert got["recall@2"] == pytest.approx(hits.any(axis=1).mean())


def test_queries_without_a_gallery_never_retrieve_themselves() -> None:
    """embedding_metrics(..., queries=q): the gallery is every item but the query itself."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    labels = np.arange(40) % 20  # two items per class
    spec = MetricsSpec(recall_at=[1], nmi=False)
    some = embedding_metrics(x, labels, spec, queries=np.arange(10))
    full_hits = []
    for i in range(10):
        d = ((x - x[i]) ** 2).sum(axis=1)
        d[i] = np.inf
        full_hits.append(labels[int(np.argmin(d))] == labels[i])
    assert some["recall@1"] == pytest.approx(np.mean(full_hits))
    assert some["recall@1"] < 1.0  # it was 1.0 when each query retrieved itself
