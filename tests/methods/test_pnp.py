"""pnp (methods/pnp.py): the module over the (query, positive) rows against
pytorch-metric-learning's ``PNPLoss`` (every variant) and against a per-query loop from Li et
al.'s PNP in the library's form (tests/methods/test_catalogue.py's ``pnp``; value and
gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.pnp import PNP
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import pnp as loop_reference

#: the entry's defaults
H = {"b": 2.0, "alpha": 1.0, "anneal": 0.01, "variant": "O"}


def registered() -> torch.nn.Module:
    return create_method("pnp", None, num_classes=10, embedding_size=8).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, PNP)
    assert (loss.b, loss.alpha, loss.anneal, loss.variant) == tuple(H.values())


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.PNPLoss(**H), x, y)
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
    ref, ref_grad = value_and_grad(lambda v, t: loop_reference(v, t, H, include_query=True), x, y)
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-7, atol=1e-10)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 5 images per class (the library's 180 × 180 × 180 sigmoids)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(36).repeat_interleave(5)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.PNPLoss(**H), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("embeddings", ["all-equal", "zero"])
def test_degenerate_embeddings_match_the_library(embeddings: str) -> None:
    """Every cosine 1 (all equal) or 0 (zero): every difference 0, σ = 1/2 for each negative."""
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8) if embeddings == "all-equal" else torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.PNPLoss(**H), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("variant", ["Ds", "Dq", "Iu", "Ib", "O"])
@pytest.mark.parametrize("labels", sorted(LABELS))
def test_every_variant_matches_the_library(variant: str, labels: str) -> None:
    x, y = batch(labels, 0, torch.float64)
    h = {**H, "variant": variant}
    ours, ours_grad = value_and_grad(PNP(**h), x, y)
    lib, lib_grad = value_and_grad(losses.PNPLoss(**h), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)
