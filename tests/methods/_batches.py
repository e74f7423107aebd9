"""Batches and value-and-gradient of the catalogue-loss tests that compare a module of our own
with pytorch-metric-learning and a loop reference (tests/methods/test_<loss>.py)."""

from __future__ import annotations

import torch

#: label layouts of a batch: P×K, unbalanced, some singletons, one class, all singletons
LABELS = {
    "pk": torch.arange(6).repeat_interleave(4),
    "unbalanced": torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 5, 6, 7]),
    "some-singletons": torch.tensor([0, 0, 1, 1, 2, 3, 4, 5]),
    "one-class": torch.zeros(8, dtype=torch.long),
    "all-singletons": torch.arange(8),
}


def value_and_grad(
    fn: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.clone().requires_grad_(True)
    value = fn(leaf, y)
    (grad,) = torch.autograd.grad(value, leaf, allow_unused=True, materialize_grads=True)
    return value.detach(), grad


def batch(labels: str, seed: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = LABELS[labels]
    return torch.randn(len(y), 8, generator=g, dtype=dtype), y
