"""manifold (methods/manifold.py): the module against pytorch-metric-learning's ``ManifoldLoss``
with each sample assigned to its class's proxy, and against the loop that iterates the random
walk (tests/methods/test_catalogue.py's ``manifold``): value and gradient w.r.t. the embeddings
and the proxies."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pytorch_metric_learning import losses

from dmlbench.methods import METHODS, create_method
from dmlbench.methods.manifold import ClassProxyManifold
from tests.methods._batches import LABELS, batch
from tests.methods.test_catalogue import manifold as loop_reference

C = 8  # classes = proxies
Grads = tuple[torch.Tensor, ...]


def registered(dtype: torch.dtype, seed: int) -> ClassProxyManifold:
    torch.manual_seed(seed)
    loss = create_method("manifold", None, num_classes=C, embedding_size=8).build_loss()
    assert isinstance(loss, ClassProxyManifold)
    return loss.to(dtype)


def value_and_grads(fn, x: torch.Tensor, proxies: torch.Tensor) -> tuple[torch.Tensor, Grads]:
    leaf = x.clone().requires_grad_(True)
    value = fn(leaf)
    return value.detach(), torch.autograd.grad(value, [leaf, proxies])


def test_the_entry_wraps_the_librarys_loss_with_its_defaults() -> None:
    lib = registered(torch.float32, 0).loss
    assert isinstance(lib, losses.ManifoldLoss)
    h = METHODS.get("manifold").defaults
    assert (lib.lambdaC, lib.alpha, lib.margin) == (h["lambdaC"], h["alpha"], h["margin"])
    assert tuple(lib.proxies.shape) == (C, 8)


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(labels: str, seed: int, dtype: torch.dtype) -> None:
    loss = registered(dtype, seed)
    x, y = batch(labels, seed, dtype)
    ours, ours_grads = value_and_grads(lambda v: loss(v, y), x, loss.loss.proxies)
    lib, lib_grads = value_and_grads(lambda v: loss.loss(v, None, y), x, loss.loss.proxies)
    tol: dict[str, Any] = (
        {"rtol": 1e-9, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-6}
    )
    torch.testing.assert_close(ours, lib, **tol)
    for a, b in zip(ours_grads, lib_grads, strict=True):
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0])  # the loop iterates the walk 400 times: slow
def test_matches_the_loop_reference(labels: str, seed: int) -> None:
    loss = registered(torch.float64, seed)
    h = METHODS.get("manifold").defaults
    x, y = batch(labels, seed, torch.float64)
    proxies = loss.loss.proxies
    ours, ours_grads = value_and_grads(lambda v: loss(v, y), x, proxies)
    ref, ref_grads = value_and_grads(lambda v: loop_reference(v, y, proxies, h), x, proxies)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-8)
    for a, b in zip(ours_grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


def test_matches_the_library_at_the_perf_shape() -> None:
    """180 × 512, 4 images per class, 100 proxies (the library's 100 × 180 × 280 cosines)."""
    torch.manual_seed(0)
    loss = create_method("manifold", None, num_classes=100, embedding_size=512).build_loss()
    loss = loss.double()
    g = torch.Generator().manual_seed(0)
    y = torch.randperm(100, generator=g)[:45].repeat_interleave(4)
    x = torch.randn(180, 512, generator=g, dtype=torch.float64)
    proxies = loss.loss.proxies
    ours, ours_grads = value_and_grads(lambda v: loss(v, y), x, proxies)
    lib, lib_grads = value_and_grads(lambda v: loss.loss(v, None, y), x, proxies)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    for a, b in zip(ours_grads, lib_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-12)
