"""intra-pair-variance (methods/intra_pair_variance.py): the O(B²) module against the sum of
pytorch-metric-learning's ``TupletMarginLoss`` and w × ``IntraPairVarianceLoss`` and against a
per-pair loop from Yu & Tao's eq. 5 and 7 (value and gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.intra_pair_variance import TupletPlusVariance
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import intra_pair_variance as loop_reference

#: the entry's defaults
H = {
    "pos_eps": 0.01,
    "neg_eps": 0.01,
    "tuplet_margin": 5.73,
    "tuplet_scale": 64.0,
    "ipv_weight": 0.5,
}


def library(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    tuplet = losses.TupletMarginLoss(H["tuplet_margin"], H["tuplet_scale"])
    variance = losses.IntraPairVarianceLoss(pos_eps=H["pos_eps"], neg_eps=H["neg_eps"])
    out: torch.Tensor = tuplet(x, y) + H["ipv_weight"] * variance(x, y)
    return out


#: no positive pair or no negative pair: no tuplet term, the variance term of the other kind
DEGENERATE = {"one-class", "all-singletons"}


def variance_only(x: torch.Tensor, y: torch.Tensor, h: dict[str, float]) -> torch.Tensor:
    """Eq. 7 from a loop over the pairs of the kind the batch has (the other kind's term 0)."""
    z = F.normalize(x, dim=1)
    n = len(y)
    same = [z[a] @ z[b] for a in range(n) for b in range(n) if a != b and y[a] == y[b]]
    diff = [z[a] @ z[b] for a in range(n) for b in range(n) if y[a] != y[b]]
    total = x.sum() * 0.0
    if same:
        mean = torch.stack(same).mean()
        total = (
            total
            + torch.stack([torch.relu((1 - h["pos_eps"]) * mean - c) ** 2 for c in same]).mean()
        )
    if diff:
        mean = torch.stack(diff).mean()
        total = (
            total
            + torch.stack([torch.relu(c - (1 + h["neg_eps"]) * mean) ** 2 for c in diff]).mean()
        )
    return h["ipv_weight"] * total


def registered() -> torch.nn.Module:
    return create_method("intra-pair-variance", None, num_classes=10, embedding_size=8).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, TupletPlusVariance)
    assert loss.margin == pytest.approx(losses.TupletMarginLoss(H["tuplet_margin"]).margin)
    assert (loss.pos_eps, loss.neg_eps) == (H["pos_eps"], H["neg_eps"])
    assert (loss.scale, loss.weight) == (H["tuplet_scale"], H["ipv_weight"])


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(library, x, y)
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
    reference = variance_only if labels in DEGENERATE else loop_reference
    ref, ref_grad = value_and_grad(lambda v, t: reference(v, t, H), x, y)
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-7, atol=1e-10)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 4 images per class (the |P| × |N| matrix the library builds: 540 × 31,680)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(45).repeat_interleave(4)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(library, x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)
