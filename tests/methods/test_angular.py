"""angular (pytorch-metric-learning AngularLoss) against a per-pair loop of Fehervari et al. 2019 eq. 4–5."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

ALPHA = 45.0


def reference(emb: torch.Tensor, labels: torch.Tensor, alpha: float = ALPHA) -> torch.Tensor:
    x = F.normalize(emb, dim=1)  # the unit sphere the formula is derived on
    t2 = math.tan(math.radians(alpha)) ** 2
    n = len(labels)
    terms = []
    for a in range(n):
        for p in range(n):
            if p == a or labels[p] != labels[a]:
                continue
            negs = [k for k in range(n) if labels[k] != labels[a]]
            if not negs:
                continue
            f = [4 * t2 * (x[a] + x[p]) @ x[k] - 2 * (1 + t2) * x[a] @ x[p] for k in negs]  # eq. 5
            terms.append(torch.log(1 + tensor_sum(torch.exp(v) for v in f)))  # eq. 4
    if not terms:
        return emb.sum() * 0.0
    return tensor_sum(terms) / len(terms)


def loss_fn(alpha: float = ALPHA) -> torch.nn.Module:
    return create_method("angular", {"alpha": alpha}, num_classes=10, embedding_size=8).build_loss()


def npair_labels(n_classes: int, g: torch.Generator, per_class: int = 2) -> torch.Tensor:
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    return labels[torch.randperm(len(labels), generator=g)]


def check(emb: torch.Tensor, labels: torch.Tensor, alpha: float = ALPHA) -> None:
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn(alpha)(e1, labels), reference(e2, labels, alpha)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9, abs_tol=1e-12)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize(("seed", "alpha"), [(0, 45.0), (1, 36.0), (2, 50.0), (3, 45.0)])
def test_matches_reference_on_npair_batches(seed: int, alpha: float) -> None:
    g = torch.Generator().manual_seed(seed)
    check(torch.randn(20, 8, generator=g, dtype=torch.float64), npair_labels(10, g), alpha)


def test_more_than_two_per_class_uses_every_pair() -> None:
    g = torch.Generator().manual_seed(11)
    check(torch.randn(18, 8, generator=g, dtype=torch.float64), npair_labels(6, g, per_class=3))


def test_is_eq5_on_unit_vectors_and_scale_invariant() -> None:
    # On the unit sphere no normalisation happens: eq. 5 on the raw inputs, written as matrices.
    g = torch.Generator().manual_seed(4)
    labels = npair_labels(5, g)
    x = F.normalize(torch.randn(10, 8, generator=g, dtype=torch.float64), dim=1)
    t2 = math.tan(math.radians(ALPHA)) ** 2
    losses = []
    for a in range(10):
        p = next(j for j in range(10) if j != a and labels[j] == labels[a])
        f = 4 * t2 * (x[a] + x[p]) @ x.t() - 2 * (1 + t2) * x[a] @ x[p]
        losses.append(torch.log1p(torch.exp(f[labels != labels[a]]).sum()))
    expected = torch.stack(losses).mean().item()
    assert math.isclose(loss_fn()(x, labels).item(), expected, rel_tol=1e-9)
    assert math.isclose(loss_fn()(7.5 * x, labels).item(), expected, rel_tol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_equals_pytorch_metric_learning_on_unit_vectors(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = F.normalize(torch.randn(16, 8, generator=g, dtype=torch.float64), dim=1)
    labels = npair_labels(8, g)
    pml = losses.AngularLoss(alpha=ALPHA)(x, labels)
    assert math.isclose(loss_fn()(x, labels).item(), pml.item(), rel_tol=1e-12)


def test_larger_alpha_is_a_stricter_constraint() -> None:
    g = torch.Generator().manual_seed(8)
    emb, labels = torch.randn(16, 8, generator=g, dtype=torch.float64), npair_labels(8, g)
    assert loss_fn(30.0)(emb, labels).item() < loss_fn(50.0)(emb, labels).item()


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


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(8, 8, requires_grad=True)
    loss = loss_fn()(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(loss) and torch.isfinite(emb.grad).all()
    # x_a = x_p = x_n: f = 8 tan²α − 2 (1 + tan²α) = 4 at 45°, six negatives per pair.
    assert math.isclose(loss.item(), math.log(1 + 6 * math.exp(4.0)), rel_tol=1e-6)
