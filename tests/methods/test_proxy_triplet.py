"""proxy-triplet against a per-triplet loop from Fehervari et al. 2019 §2.9 (Movshovitz-Attias et al.)."""

from __future__ import annotations

import math

import pytest
import torch
from pytorch_metric_learning import distances, losses, reducers

from dmlbench.errors import DmlbenchError
from dmlbench.methods import create_method
from dmlbench.methods.proxy_triplet import ProxyTripletLoss

C, DIM, MARGIN = 6, 8, 1.0


def reference(emb: torch.Tensor, labels: torch.Tensor, proxies: torch.Tensor) -> torch.Tensor:
    total, count = emb.sum() * 0.0, 0
    for i in range(len(labels)):
        x = emb[i] / emb[i].norm()
        y = int(labels[i])
        d_pos = ((x - proxies[y] / proxies[y].norm()) ** 2).sum()
        for z in range(C):
            if z == y:
                continue
            d_neg = ((x - proxies[z] / proxies[z].norm()) ** 2).sum()
            total = total + torch.clamp(d_pos - d_neg + MARGIN, min=0.0)
            count += 1
    return total / count


def loss_fn() -> ProxyTripletLoss:
    method = create_method("proxy-triplet", None, num_classes=C, embedding_size=DIM)
    loss = method.build_loss().double()
    assert isinstance(loss, ProxyTripletLoss)
    return loss


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    torch.manual_seed(seed)
    loss = loss_fn()
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(12, DIM, generator=g, dtype=torch.float64) * 3.0
    labels = torch.randint(0, C, (12,), generator=g)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    p2 = loss.proxies.detach().clone().requires_grad_(True)
    ours, ref = loss(e1, labels), reference(e2, labels, p2)
    ours.backward()
    ref.backward()
    assert float(ref.detach()) > 0.0  # some triplets are active, so the gradient is tested
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9, abs_tol=1e-12)
    torch.testing.assert_close(e1.grad, e2.grad)
    torch.testing.assert_close(loss.proxies.grad, p2.grad)


def test_matches_pytorch_metric_learning_triplets_against_proxies() -> None:
    torch.manual_seed(0)
    ours = loss_fn()
    pml = losses.TripletMarginLoss(
        margin=MARGIN, distance=distances.LpDistance(power=2), reducer=reducers.MeanReducer()
    )
    emb = torch.randn(10, DIM, dtype=torch.float64)
    labels = torch.randint(0, C, (10,))
    proxies = ours.proxies.detach()
    expected = pml(emb, labels, ref_emb=proxies, ref_labels=torch.arange(C))
    torch.testing.assert_close(ours(emb, labels).detach(), expected)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(6), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    loss = loss_fn()
    emb = torch.randn(len(labels), DIM, dtype=torch.float64, requires_grad=True)
    value = loss(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(
        value.detach(), reference(emb.detach(), labels, loss.proxies.detach())
    )


def test_a_single_training_class_is_a_clear_error() -> None:
    with pytest.raises(DmlbenchError, match="at least 2"):
        create_method("proxy-triplet", None, num_classes=1, embedding_size=DIM).build_loss()
