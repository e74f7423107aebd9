"""multi-similarity against a per-anchor loop written from Wang et al.'s unified-view preprint eq. 15-17."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

ALPHA, BETA, BASE, EPS = 2.0, 50.0, 0.5, 0.1


def reference(emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    x = F.normalize(emb, dim=1)
    s = x @ x.t()
    n = len(labels)
    total = emb.sum() * 0.0
    for a in range(n):
        pos = [j for j in range(n) if j != a and labels[j] == labels[a]]
        neg = [j for j in range(n) if labels[j] != labels[a]]
        if not pos or not neg:
            continue
        min_pos = min(float(s[a, j].detach()) for j in pos)
        max_neg = max(float(s[a, j].detach()) for j in neg)
        kept_neg = [j for j in neg if float(s[a, j].detach()) > min_pos - EPS]  # eq. 15
        kept_pos = [j for j in pos if float(s[a, j].detach()) < max_neg + EPS]  # eq. 16
        if not kept_pos or not kept_neg:
            continue
        pos_sum = tensor_sum(torch.exp(-ALPHA * (s[a, j] - BASE)) for j in kept_pos)
        neg_sum = tensor_sum(torch.exp(BETA * (s[a, j] - BASE)) for j in kept_neg)
        total = total + torch.log(1 + pos_sum) / ALPHA + torch.log(1 + neg_sum) / BETA  # eq. 17
    return total / n


def loss_fn() -> torch.nn.Module:
    return create_method("multi-similarity", None, num_classes=10, embedding_size=8).build_loss()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(24, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (24,), generator=g)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours), float(ref), rel_tol=1e-6, abs_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = torch.randn(8, 8, requires_grad=True)
    loss = loss_fn()(emb, labels)
    loss.backward()
    assert torch.isfinite(loss)
    assert emb.grad is not None
    assert torch.isfinite(emb.grad).all()
    torch.testing.assert_close(loss, reference(emb.detach(), labels).to(loss.dtype))
