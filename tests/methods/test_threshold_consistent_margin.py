"""threshold-consistent-margin (methods/threshold_consistent_margin.py): the B × B module
against pytorch-metric-learning's ``ThresholdConsistentMarginLoss`` and against a per-pair loop
from Zhang et al.'s eq. 4 (value and gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.threshold_consistent_margin import ThresholdConsistentMargin
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import threshold_consistent_margin as loop_reference

#: the entry's defaults
H = {"lambda_plus": 1.0, "lambda_minus": 1.0, "margin_plus": 0.9, "margin_minus": 0.5}


def registered() -> torch.nn.Module:
    return create_method(
        "threshold-consistent-margin", None, num_classes=10, embedding_size=8
    ).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, ThresholdConsistentMargin)
    assert (loss.lambda_plus, loss.lambda_minus) == (H["lambda_plus"], H["lambda_minus"])
    assert (loss.margin_plus, loss.margin_minus) == (H["margin_plus"], H["margin_minus"])


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.ThresholdConsistentMarginLoss(**H), x, y)
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
    ref, ref_grad = value_and_grad(lambda v, t: loop_reference(v, t, H), x, y)
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-7, atol=1e-10)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 5 images per class (the library gathers 32,220 pairs of 512-d rows)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(36).repeat_interleave(5)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.ThresholdConsistentMarginLoss(**H), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("embeddings", ["all-equal", "zero"])
def test_degenerate_embeddings_match_the_library(embeddings: str) -> None:
    """Every cosine 1 (all equal), or 0 with the norm floored at 1e-8 (zero): same value and
    gradient as the library's pairwise ``F.cosine_similarity``."""
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8) if embeddings == "all-equal" else torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.ThresholdConsistentMarginLoss(**H), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-7)
