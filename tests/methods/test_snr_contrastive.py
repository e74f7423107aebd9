"""snr-contrastive (methods/snr_contrastive.py): the B × B module against pytorch-metric-learning's
``SignalToNoiseRatioContrastiveLoss`` and against a per-pair loop of Yuan et al.'s SNR distance
in the library's form (tests/methods/test_catalogue.py's ``snr_contrastive``; value and
gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.snr_contrastive import SNRContrastive
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import snr_contrastive as loop_reference

#: the entry's defaults
H = {"pos_margin": 0.0, "neg_margin": 1.0}


def registered() -> torch.nn.Module:
    return create_method("snr-contrastive", None, num_classes=10, embedding_size=8).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, SNRContrastive)
    assert (loss.pos_margin, loss.neg_margin) == (H["pos_margin"], H["neg_margin"])


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.SignalToNoiseRatioContrastiveLoss(**H), x, y)
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
        lambda v, t: loop_reference(v, t, H["pos_margin"], H["neg_margin"]), x, y
    )
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-7, atol=1e-10)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 5 images per class (the library's 180 × 180 × 512 differences)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(36).repeat_interleave(5)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.SignalToNoiseRatioContrastiveLoss(**H), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("embeddings", ["all-equal", "zero"])
def test_degenerate_embeddings_match_the_library(embeddings: str) -> None:
    """Constant rows: var(h_i) = 0, every distance 0/0 (NaN, never counted): 0 with a zero
    gradient, as the library."""
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8) if embeddings == "all-equal" else torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.SignalToNoiseRatioContrastiveLoss(**H), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-7)
    assert float(ours) == 0.0 and not ours_grad.any()
