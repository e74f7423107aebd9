"""lifted (B × B log-sum-exp form) against a loop over Fehervari et al. 2019 eq. 2 (the smooth
lifted structure of Oh Song et al., CVPR 2016, eq. 4) and against pytorch-metric-learning's
``LiftedStructureLoss``, the implementation this method wrapped before."""

from __future__ import annotations

import math

import pytest
import torch

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

MARGIN = 1.0


def reference(emb: torch.Tensor, labels: torch.Tensor, margin: float = MARGIN) -> torch.Tensor:
    """1/(2|P|) Σ_{(i,j) ∈ P} [log(Σ_k e^{M−d_ik} + Σ_l e^{M−d_jl}) + d_ij]₊², P unordered."""
    n = len(labels)
    total = emb.sum() * 0.0
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if labels[i] == labels[j]]
    if not pairs or all(labels[k] == labels[0] for k in range(n)):
        return total

    def d(a: int, b: int) -> torch.Tensor:
        return torch.sqrt(((emb[a] - emb[b]) ** 2).sum())

    for i, j in pairs:
        neg_i = [torch.exp(margin - d(i, k)) for k in range(n) if labels[k] != labels[i]]
        neg_j = [torch.exp(margin - d(j, k)) for k in range(n) if labels[k] != labels[j]]
        big_j = torch.log(tensor_sum(neg_i) + tensor_sum(neg_j)) + d(i, j)
        total = total + torch.relu(big_j) ** 2
    return total / (2 * len(pairs))


def pml_loss(margin: float = MARGIN) -> torch.nn.Module:
    from pytorch_metric_learning import distances, losses

    dist = distances.LpDistance(normalize_embeddings=False, p=2, power=1)
    return losses.LiftedStructureLoss(neg_margin=margin, pos_margin=0.0, distance=dist)


def loss_fn(margin: float = MARGIN) -> torch.nn.Module:
    hp = {"margin": margin}
    return create_method("lifted", hp, num_classes=10, embedding_size=8).build_loss()


@pytest.mark.parametrize("scale", [0.3, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_value_and_gradient(seed: int, scale: float) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = scale * torch.randn(20, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (20,), generator=g)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-8, abs_tol=1e-10)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(48, 16, 4), (60, 128, 2), (30, 8, 5)])
def test_matches_pytorch_metric_learning(shape: tuple[int, int, int], dtype: torch.dtype) -> None:
    """The value the committed leaderboard was trained with, to float rounding (1e-6)."""
    n, dim, per_class = shape
    g = torch.Generator().manual_seed(n)
    emb = torch.nn.functional.normalize(torch.randn(n, dim, generator=g, dtype=dtype), dim=1)
    labels = torch.randperm(n, generator=g) // per_class
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, peer = loss_fn()(e1, labels), pml_loss()(e2, labels)
    ours.backward()
    peer.backward()
    assert peer.item() > 0
    assert math.isclose(ours.item(), peer.item(), rel_tol=1e-6)
    assert e2.grad is not None
    scale = float(e2.grad.abs().max())
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-6, atol=1e-6 * scale)


def test_hinge_is_zero_for_separated_classes() -> None:
    # Two tight clusters 10 apart: log(Σ e^{1−10}) + d_ij < 0 for every pair, so the loss is 0.
    emb = torch.zeros(6, 4, dtype=torch.float64)
    emb[3:, 0] = 10.0
    emb += 1e-3 * torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=emb.dtype)
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    assert float(loss_fn()(emb, labels)) == 0.0
    assert float(reference(emb, labels)) == 0.0


def test_margin_moves_the_loss() -> None:
    g = torch.Generator().manual_seed(5)
    emb = torch.randn(12, 8, generator=g, dtype=torch.float64)
    labels = torch.arange(12) // 3
    small, large = float(loss_fn(0.5)(emb, labels)), float(loss_fn(2.0)(emb, labels))
    assert small < large
    assert math.isclose(large, float(reference(emb, labels, 2.0)), rel_tol=1e-8)


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
    # d = 0 everywhere: J = log(2·6·e^M) = M + log 12 for every positive pair.
    assert math.isclose(loss.item(), (MARGIN + math.log(12)) ** 2 / 2, rel_tol=1e-5)
