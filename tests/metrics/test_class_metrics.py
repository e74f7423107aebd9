"""MRR and the per-class means of Recall@K and MAP@R (#49): equal to pytorch-metric-learning's
AccuracyCalculator (``k`` = every other item, ``avg_of_avgs=True``) and to a slow loop over the definition,
on random embeddings with exact ties (duplicated vectors of different classes) and uneven
classes, where a per-class mean differs from the plain one.

PML is compared on ties between copies of one vector, which faiss's float32 distances also
tie (it ranks them by index, as dmlbench does). On quantised embeddings, where distinct vectors
lie at the same exact distance, PML's order is set by float32 rounding and dmlbench's by the
float64 distance, then index (docs/metrics.md, "Ties"): there only the definition is the
reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

from dmlbench.metrics.retrieval import embedding_metrics, l2_normalize
from dmlbench.protocol import MetricsSpec

SPEC = MetricsSpec(
    recall_at=[1, 2],
    nmi=False,
    mrr=True,
    class_recall_at=[1, 2, 4, 30],
    class_map_at_r=True,
)


def tied_case(
    seed: int, n: int = 120, d: int = 6, quantised: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Uneven classes (sizes 1 to 24); a third of the rows copy another row, mostly of another
    class (exact ties); ``quantised``: values on a grid of 0.5 (ties between distinct rows)."""
    rng = np.random.default_rng(seed)
    labels = np.minimum(rng.geometric(0.15, size=n), 12)  # class 1 large, 12 a tail of ones
    x = rng.normal(size=(n, d))
    if quantised:
        x = np.round(x * 2) / 2
    copies = rng.choice(n, size=n // 3, replace=False)
    x[copies] = x[rng.integers(0, n, size=len(copies))]
    return x.astype(np.float32), labels


def pml(x: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "mean_reciprocal_rank"),
        device=torch.device("cpu"),
        k=len(x) - 1,  # MRR over the whole gallery
        avg_of_avgs=True,
    )
    plain = AccuracyCalculator(  # MRR alone computes no k-NN in PML 2.9 (a TypeError)
        include=("precision_at_1", "mean_reciprocal_rank"), device=torch.device("cpu"), k=len(x) - 1
    )
    t, y = torch.from_numpy(l2_normalize(x)), torch.from_numpy(labels)
    return {**calc.get_accuracy(t, y), "mrr": plain.get_accuracy(t, y)["mean_reciprocal_rank"]}


def slow(x: np.ndarray, labels: np.ndarray, ks: list[int]) -> dict[str, float]:
    """A loop over queries with a full stable sort of float64 distances (ties by index)."""
    x = l2_normalize(x).astype(np.float64)
    per_query: dict[str, list[tuple[int, float]]] = {"mrr": [], "map": []}
    per_query.update({f"r@{k}": [] for k in ks})
    for q in range(len(x)):
        others = [i for i in range(len(x)) if i != q]
        d = [float(np.sum((x[q] - x[i]) ** 2)) for i in others]
        rel = [labels[others[i]] == labels[q] for i in np.argsort(d, kind="stable")]
        r = sum(rel)
        if r == 0:
            continue
        c = int(labels[q])
        per_query["mrr"].append((c, 1.0 / (rel.index(True) + 1)))
        ap = sum(sum(rel[: i + 1]) / (i + 1) for i in range(r) if rel[i]) / r
        per_query["map"].append((c, ap))
        for k in ks:
            per_query[f"r@{k}"].append((c, float(any(rel[:k]))))

    def class_mean(pairs: list[tuple[int, float]]) -> float:
        classes = sorted({c for c, _ in pairs})
        return float(np.mean([np.mean([v for c, v in pairs if c == k]) for k in classes]))

    out = {"mrr": float(np.mean([v for _, v in per_query["mrr"]]))}
    out["class_map@r"] = class_mean(per_query["map"])
    out.update({f"class_recall@{k}": class_mean(per_query[f"r@{k}"]) for k in ks})
    return out


@pytest.mark.parametrize("seed", range(4))
def test_equal_to_pytorch_metric_learning(seed: int) -> None:
    x, labels = tied_case(seed)
    ours = embedding_metrics(x, labels, SPEC)
    theirs = pml(x, labels)
    assert ours["class_recall@1"] == pytest.approx(theirs["precision_at_1"], abs=1e-12)
    assert ours["class_map@r"] == pytest.approx(theirs["mean_average_precision_at_r"], abs=1e-12)
    assert ours["mrr"] == pytest.approx(theirs["mrr"], abs=1e-7)  # PML sums in float32
    # and a per-class mean is not the plain one on uneven classes (the test can tell them apart)
    assert ours["class_recall@1"] != pytest.approx(ours["recall@1"], abs=1e-6)


@pytest.mark.parametrize(("seed", "quantised"), [(0, False), (1, True), (2, True)])
def test_equal_to_the_definition(seed: int, quantised: bool) -> None:
    x, labels = tied_case(seed, n=90, quantised=quantised)
    ours = embedding_metrics(x, labels, SPEC)
    for key, value in slow(x, labels, list(SPEC.class_recall_at)).items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key


def test_off_by_default_and_in_query_gallery_mode() -> None:
    x, labels = tied_case(5)
    assert not {"mrr", "class_map@r"} & set(embedding_metrics(x, labels, MetricsSpec(nmi=False)))
    queries, gallery = np.arange(0, 120, 4), np.setdiff1d(np.arange(120), np.arange(0, 120, 4))
    out = embedding_metrics(x, labels, SPEC, queries=queries, gallery=gallery)
    assert 0 < out["mrr"] <= 1 and 0 < out["class_map@r"] <= 1
