"""The fast engine (2026-11: float64 re-ranking only inside runs of near-tied candidates) gives
every metric and every k-NN list of the engine before it, bit for bit (``engine_before``: a
frozen copy), on inputs built to have ties: quantised and duplicated embeddings, tight
clusters, query → gallery splits, unnormalised embeddings, Recall@K beyond the first list."""

from __future__ import annotations

import numpy as np
import pytest

from dmlbench.metrics.retrieval import embedding_metrics, knn, l2_normalize
from dmlbench.protocol import MetricsSpec
from tests.metrics import engine_before


def case(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings (n, d) float32 and class labels with many near or exact ties."""
    rng = np.random.default_rng(seed)
    if kind == "clustered":  # CUB-like: tight classes, ~1e-5 gaps among a query's candidates
        labels = rng.integers(0, 12, 700)
        centres = rng.normal(size=(12, 48))
        x = centres[labels] + 0.8 * rng.normal(size=(700, 48))
    elif kind == "quantised":  # exact ties in float32 and float64
        labels = rng.integers(0, 8, 300)
        x = rng.integers(-2, 3, size=(300, 6)).astype(np.float64)
    elif kind == "duplicates":  # whole rows repeated, across and within classes
        labels = rng.integers(0, 10, 320)
        base = rng.normal(size=(40, 12))
        x = base[rng.integers(0, 40, 320)]
    elif kind == "random":
        labels = rng.integers(0, 25, 400)
        x = rng.normal(size=(400, 8))
    else:
        raise ValueError(kind)
    return x.astype(np.float32), labels


KINDS = ["clustered", "quantised", "duplicates", "random"]
SPECS = [
    MetricsSpec(recall_at=[1, 2, 4, 8, 16, 32], nmi=False),
    MetricsSpec(recall_at=[1, 10, 100, 250], nmi=False),  # K > the first list: second search
    MetricsSpec(recall_at=[1], nmi=False, map_at_r=False, r_precision=False),
    MetricsSpec(recall_at=[3, 60], nmi=False, normalize=False),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_metric_equals_the_engine_before(kind: str, seed: int) -> None:
    x, labels = case(kind, seed)
    for spec in SPECS:
        assert embedding_metrics(x, labels, spec) == engine_before.evaluate(x, labels, spec)


@pytest.mark.parametrize("kind", KINDS)
def test_query_gallery_split_equals_the_engine_before(kind: str) -> None:
    x, labels = case(kind, 3)
    rng = np.random.default_rng(3)
    queries = rng.choice(len(x), len(x) // 3, replace=False)
    gallery = np.setdiff1d(np.arange(len(x)), queries)
    for spec in SPECS:
        new = embedding_metrics(x, labels, spec, queries=queries, gallery=gallery)
        assert new == engine_before.evaluate(x, labels, spec, queries=queries, gallery=gallery)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [1, 5, 40, 150])
def test_knn_lists_equal_the_engine_before(kind: str, k: int) -> None:
    x, _ = case(kind, 4)
    x = l2_normalize(x)
    own = np.arange(len(x))
    np.testing.assert_array_equal(knn(x, x, k, own), engine_before.knn(x, x, k, own))
    q = x[:50]
    np.testing.assert_array_equal(knn(q, x, k), engine_before.knn(q, x, k))


def test_nmi_is_unchanged() -> None:
    x, labels = case("clustered", 5)
    spec = MetricsSpec(recall_at=[1])
    assert (
        embedding_metrics(x, labels, spec)["nmi"] == engine_before.evaluate(x, labels, spec)["nmi"]
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [1, 5, 40, 150])
def test_knn_with_labels_keeps_the_same_class_pattern(kind: str, k: int) -> None:
    """With labels, only the order between same-class and other candidates is exact."""
    x, labels = case(kind, 6)
    x = l2_normalize(x)
    own = np.arange(len(x))
    new = labels[knn(x, x, k, own, (labels, labels))]
    np.testing.assert_array_equal(
        new == labels[:, None], labels[engine_before.knn(x, x, k, own)] == labels[:, None]
    )
