"""proxy-nca against a per-sample loop written from Fehervari et al. 2019 eq. 14 (Movshovitz-Attias et al.)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses

from dmlbench.errors import DmlbenchError
from dmlbench.methods import create_method
from dmlbench.methods.proxy_nca import ProxyNCALoss

C, DIM, SCALE = 7, 8, 3.0


def reference(emb: torch.Tensor, labels: torch.Tensor, proxies: torch.Tensor) -> torch.Tensor:
    total = emb.sum() * 0.0
    for i in range(len(labels)):
        x = SCALE * emb[i] / emb[i].norm()
        y = int(labels[i])

        def dist(z: int, x: torch.Tensor = x) -> torch.Tensor:
            return ((x - SCALE * proxies[z] / proxies[z].norm()) ** 2).sum()

        denominator = sum(torch.exp(-dist(z)) for z in range(C) if z != y)  # negatives only
        total = total - torch.log(torch.exp(-dist(y)) / denominator)
    return total / len(labels)


def loss_fn() -> ProxyNCALoss:
    loss = create_method("proxy-nca", None, num_classes=C, embedding_size=DIM).build_loss().double()
    assert isinstance(loss, ProxyNCALoss)
    return loss


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    torch.manual_seed(seed)
    loss = loss_fn()
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(12, DIM, generator=g, dtype=torch.float64) * 2.0  # not unit norm
    labels = torch.randint(0, C, (12,), generator=g)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    p2 = loss.proxies.detach().clone().requires_grad_(True)
    ours, ref = loss(e1, labels), reference(e2, labels, p2)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9, abs_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad)
    torch.testing.assert_close(loss.proxies.grad, p2.grad)


def test_pytorch_metric_learning_is_the_softplus_of_ours() -> None:
    """PML's ProxyNCALoss keeps the positive in the denominator: per sample, softplus(ours)."""
    torch.manual_seed(0)
    ours = loss_fn()
    pml = losses.ProxyNCALoss(C, DIM, softmax_scale=SCALE**2).double()
    with torch.no_grad():
        pml.proxies.copy_(ours.proxies)
    emb = torch.randn(10, DIM, dtype=torch.float64)
    labels = torch.randint(0, C, (10,))
    expected = F.softplus(ours.per_sample(emb, labels)).mean()
    torch.testing.assert_close(pml(emb, labels), expected)
    with torch.no_grad():
        assert float(ours(emb, labels)) < float(pml(emb, labels))


def test_loss_can_go_below_zero_when_the_positive_proxy_is_closest() -> None:
    loss = loss_fn()
    labels = torch.arange(C)
    emb = loss.proxies.detach().clone()  # every sample sits on its own proxy
    with torch.no_grad():
        assert float(loss(emb, labels)) < 0.0


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(7), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    loss = loss_fn()
    emb = torch.randn(len(labels), DIM, dtype=torch.float64, requires_grad=True)
    value = loss(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(value, reference(emb.detach(), labels, loss.proxies.detach()))


def test_a_single_training_class_is_a_clear_error() -> None:
    with pytest.raises(DmlbenchError, match="at least 2"):
        create_method("proxy-nca", None, num_classes=1, embedding_size=DIM).build_loss()


def test_proxies_get_the_lr_multiplier() -> None:
    method = create_method("proxy-nca", {"proxy_lr_mult": 100.0}, num_classes=C, embedding_size=DIM)
    groups = method.param_groups(method.build_loss(), lr=1e-3)
    assert len(groups) == 1 and math.isclose(groups[0]["lr"], 0.1)
