"""ntxent (methods/ntxent.py): the O(B²) module against pytorch-metric-learning's ``NTXentLoss``
and against a per-pair loop from Chen et al.'s eq. 1, every same-class pair a positive (value and
gradient)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.ntxent import NTXent
from tests.methods._batches import LABELS, batch, value_and_grad
from tests.methods.test_catalogue import ntxent as loop_reference

TEMPERATURE = 0.07  # the entry's default
NO_PAIR = {"one-class", "all-singletons"}  # no negative, or no positive pair: the loss is 0


def registered() -> torch.nn.Module:
    return create_method("ntxent", None, num_classes=10, embedding_size=8).build_loss()


def test_the_entry_builds_this_module_with_its_defaults() -> None:
    loss = registered()
    assert isinstance(loss, NTXent)
    assert loss.temperature == TEMPERATURE


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.NTXentLoss(TEMPERATURE), x, y)
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
    if labels in NO_PAIR:
        assert float(ours) == 0.0 and not ours_grad.any()
        return
    ref, ref_grad = value_and_grad(lambda v, t: loop_reference(v, t, TEMPERATURE), x, y)
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-7, atol=1e-10)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 4 images per class (the |P| × |N| matrix the library builds: 540 × 31,680)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(45).repeat_interleave(4)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(registered(), x, y)
    lib, lib_grad = value_and_grad(losses.NTXentLoss(TEMPERATURE), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)


def test_keeps_the_librarys_cap_of_a_hopeless_pair() -> None:
    """A positive pair far behind its negatives (τ = 0.01): the library's ``+ tiny`` caps the
    loss at −log(tiny) = 87.3 in float32; so does the module."""
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.01], [0.9, 0.1]])
    y = torch.tensor([0, 0, 1, 2])
    ours, ours_grad = value_and_grad(NTXent(0.01), x, y)
    lib, lib_grad = value_and_grad(losses.NTXentLoss(0.01), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-5)
