"""histogram (methods/histogram.py): the module with its pairs from one B × B mask against
pytorch-metric-learning's ``HistogramLoss`` and against a per-pair loop of Ustinova &
Lempitsky's loss with the library's pairs from triplets (tests/methods/test_catalogue.py's
``histogram_loss``; value and gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.histogram import Histogram
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import histogram_loss as loop_reference

#: the entry's defaults
H = {"n_bins": 100}


def registered() -> torch.nn.Module:
    return create_method("histogram", None, num_classes=10, embedding_size=8).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, Histogram)
    assert loss.delta == losses.HistogramLoss(**H).delta


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.HistogramLoss(**H), x, y)
    tol: dict[str, Any] = (
        {"rtol": 1e-9, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    )
    torch.testing.assert_close(ours, lib, **tol)
    torch.testing.assert_close(ours_grad, lib_grad, **tol)


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_loop_reference(labels: str, seed: int) -> None:
    x, y = batch(labels, seed, torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    ref, ref_grad = value_and_grad(
        lambda v, t: loop_reference(v, t, H["n_bins"], pairs_from_triplets=True), x, y
    )
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-8)  # float32 nodes (library)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-5, atol=1e-6)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 5 images per class (the library lists 93,600 triplets)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(36).repeat_interleave(5)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.HistogramLoss(**H), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)


def test_zero_embeddings_match_the_library() -> None:
    """Every cosine 0: all pairs in one bin, as the library."""
    y = LABELS["some-singletons"]
    x = torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.HistogramLoss(**H), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad)


def test_a_similarity_of_one_is_counted_in_the_last_bin() -> None:
    """Two equal embeddings: the library indexes one node past the end and raises; the module
    puts the pair on the node t = 1 (so an all-equal batch, every pair at 1, scores 1: each
    negative pair sits where Φ⁺ = 1)."""
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out of bounds"):
        losses.HistogramLoss(**H)(x, y)
    ours, grad = value_and_grad(registered(), x, y)
    assert float(ours) == pytest.approx(1.0, rel=1e-4)  # the library's float32 nodes
    assert torch.isfinite(grad).all()
