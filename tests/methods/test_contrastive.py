"""contrastive against a per-pair loop written from Hadsell, Chopra & LeCun, CVPR 2006, eq. 4
(L = (1 − Y)·½·D² + Y·½·[m − D]₊², their Y = 0 for a similar pair), averaged over the
unordered pairs of the batch.

pytorch-metric-learning has no reference here: its ``ContrastiveLoss`` hinges unsquared
distances and averages over the non-zero terms of each kind, a different formula.
"""

from __future__ import annotations

import math

import pytest
import torch

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

MARGIN = 1.0


def reference(emb: torch.Tensor, labels: torch.Tensor, margin: float = MARGIN) -> torch.Tensor:
    n = len(labels)
    terms = []
    for i in range(n):
        for j in range(i + 1, n):
            d = torch.sqrt(((emb[i] - emb[j]) ** 2).sum())
            if labels[i] == labels[j]:
                terms.append(0.5 * d**2)
            else:
                terms.append(0.5 * torch.relu(margin - d) ** 2)
    return tensor_sum(terms) / len(terms) if terms else emb.sum() * 0.0


def loss_fn(margin: float = MARGIN) -> torch.nn.Module:
    hp = {"margin": margin}
    return create_method("contrastive", hp, num_classes=10, embedding_size=8).build_loss()


@pytest.mark.parametrize("margin", [MARGIN, 1.5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_value_and_gradient(seed: int, margin: float) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(20, 8, generator=g, dtype=torch.float64), dim=1)
    labels = torch.randint(0, 5, (20,), generator=g)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn(margin)(e1, labels), reference(e2, labels, margin)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_three_points_by_hand() -> None:
    """Points 0 and 0.6 of one class and 0.3 of another, on a line, m = 1."""
    x = torch.tensor([[0.0], [0.6], [0.3]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1])
    # Pairs: (0, 1) positive, D = 0.6 → 0.18; (0, 2) negative, D = 0.3 → ½·0.49 = 0.245;
    # (1, 2) negative, D = 0.3 → 0.245. Mean over 3 pairs.
    expected = (0.18 + 0.245 + 0.245) / 3
    assert math.isclose(float(loss_fn()(x, labels)), expected, rel_tol=1e-12)
    assert math.isclose(float(reference(x, labels)), expected, rel_tol=1e-12)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    g = torch.Generator().manual_seed(len(set(labels.tolist())))
    emb = 0.3 * torch.randn(8, 8, generator=g, dtype=torch.float64)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert torch.isfinite(ours) and ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_single_image_and_all_equal_embeddings_are_finite() -> None:
    one = torch.randn(1, 8, requires_grad=True)
    loss = loss_fn()(one, torch.tensor([3]))
    loss.backward()
    assert one.grad is not None
    assert float(loss.detach()) == 0.0 and torch.isfinite(one.grad).all()
    emb = torch.ones(8, 8, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss = loss_fn()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(emb.grad).all()
    # D = 0 everywhere: 24 negative pairs of the 28 cost ½·m² each, positives nothing.
    assert math.isclose(loss.item(), 24 * 0.5 / 28, rel_tol=1e-6)
