"""The torch k-NN search (a run on a GPU with a faiss without GPU support) gives the evaluation
exactly what faiss gives it: forced on the CPU here, in blocks smaller than the data, on exact
ties, duplicated vectors and quantised embeddings."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import faiss
import numpy as np
import pytest
import torch

from dmlbench.metrics import knn as knn_module
from dmlbench.metrics.knn import TorchFlatL2, flat_l2_search, knn, torch_search
from dmlbench.metrics.retrieval import embedding_metrics, l2_normalize
from dmlbench.protocol import MetricsSpec

SPEC = MetricsSpec(recall_at=[1, 2, 4, 100], mrr=True, class_recall_at=[1, 8], class_map_at_r=True)


def case(seed: int, kind: str, n: int = 150, d: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    if kind == "quantised":  # distinct rows at exactly one distance
        x = np.round(x)
    elif kind == "duplicates":  # half the rows copies of a few
        x[: n // 2] = x[rng.integers(n // 2, n // 2 + 6, size=n // 2)]
    elif kind == "identical":
        x[:] = x[0]
    labels = rng.integers(0, 9, size=n)
    return l2_normalize(x.astype(np.float32)), labels


KINDS = ["random", "quantised", "duplicates", "identical"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_neighbour_lists_equal_faiss_index_for_index(kind: str, block_rows: int | None) -> None:
    x, _ = case(1, kind)
    for k in (1, 5, 40):
        with_self = knn(x, x, k, self_index=np.arange(len(x)))
        plain = knn(x[:30], x, k)
        with torch_search("cpu", block_rows):
            assert np.array_equal(knn(x, x, k, self_index=np.arange(len(x))), with_self)
            assert np.array_equal(knn(x[:30], x, k), plain)


@pytest.mark.parametrize("kind", KINDS)
def test_same_class_pattern_and_every_metric_equal(kind: str) -> None:
    x, labels = case(2, kind)
    q, g = np.arange(0, 150, 3), np.setdiff1d(np.arange(150), np.arange(0, 150, 3))
    pair = (labels[q], labels)
    faiss_nn = knn(x[q], x, 30, q, pair)
    faiss_all = embedding_metrics(x, labels, SPEC)
    faiss_qg = embedding_metrics(x, labels, SPEC, queries=q, gallery=g)
    with torch_search("cpu", block_rows=16):
        torch_nn = knn(x[q], x, 30, q, pair)
        assert embedding_metrics(x, labels, SPEC) == faiss_all
        assert embedding_metrics(x, labels, SPEC, queries=q, gallery=g) == faiss_qg
    same = labels[q][:, None]
    assert np.array_equal(labels[torch_nn] == same, labels[faiss_nn] == same)


def test_candidates_come_in_faiss_order_ties_by_lower_index() -> None:
    """The raw search: faiss ranks copies of one vector by id; so does the torch search."""
    x, _ = case(3, "duplicates", n=60)
    index = faiss.IndexFlatL2(x.shape[1])
    index.add(x)
    _, theirs = index.search(x, 60)
    _, ours = TorchFlatL2(x, "cpu", block_rows=9).search(x, 60)
    dup = x[:30]  # rows that are copies: their distances to each copy tie exactly
    assert np.array_equal(ours[:30, :5], theirs[:30, :5]), dup.shape
    for row in ours:  # within each run of equal distances, ascending index
        d = ((x[row] - x[row[0]]) ** 2).sum(axis=1)
        assert all(np.all(np.diff(row[d == v]) > 0) for v in np.unique(d))


def test_a_cuda_run_without_gpu_faiss_searches_in_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(knn_module, "_LOGGED", set())

    def fake_torch(gallery: np.ndarray, device: torch.device, rows: int | None = None) -> str:
        made.append(device)
        return "torch"

    monkeypatch.setattr(knn_module, "TorchFlatL2", fake_torch)
    monkeypatch.setattr(knn_module, "_faiss_has_gpu", lambda: False)
    x = np.eye(3, dtype=np.float32)
    assert flat_l2_search(x) == "torch" and made == [torch.device("cuda", 1)]
    monkeypatch.setattr(knn_module, "_faiss_has_gpu", lambda: True)  # faiss's own GPU index
    monkeypatch.setattr(knn_module, "faiss_flat_l2", lambda d: SimpleNamespace(add=lambda g: 0))
    assert flat_l2_search(x) != "torch"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # a CPU run: faiss
    monkeypatch.setattr(knn_module, "_faiss_has_gpu", lambda: False)
    assert flat_l2_search(x) != "torch" and len(made) == 1
