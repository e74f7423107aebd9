"""Batches and value-and-gradient of the catalogue-loss tests that compare a module of our own
with pytorch-metric-learning and a loop reference (tests/methods/test_<loss>.py), and the typed
sum those loop references write their Σ with."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

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
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.clone().requires_grad_(True)
    value = fn(leaf, y)
    (grad,) = torch.autograd.grad(value, leaf, allow_unused=True, materialize_grads=True)
    return value.detach(), grad


def batch(labels: str, seed: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = LABELS[labels]
    return torch.randn(len(y), 8, generator=g, dtype=dtype), y


def tensor_sum(terms: Iterable[torch.Tensor]) -> torch.Tensor:
    """Python's ``sum`` of tensors (the same additions in the same order), typed as the tensor it
    is for one term or more; typeshed's ``sum`` also admits the ``0`` of an empty iterable."""
    return cast(torch.Tensor, sum(terms))
