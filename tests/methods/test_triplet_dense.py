"""triplet-dense against a per-triplet loop written from Kim et al. 2019 eq. 10-11."""

from __future__ import annotations

import math

import pytest
import torch
from pytorch_metric_learning.losses import TripletMarginLoss

from dmlbench.methods import create_method
from dmlbench.methods.log_ratio import dense_triplets
from dmlbench.methods.triplet_dense import DenseTripletLoss, pml_triplet_loss

MARGIN = 0.03


def reference(emb: torch.Tensor, labels: torch.Tensor, margin: float = MARGIN) -> torch.Tensor:
    """Eq. 11 with squared Euclidean D over T(B) of eq. 10 (anchor = row 0), uniform mean."""
    dy = [float(torch.linalg.norm(labels[i] - labels[0])) for i in range(len(labels))]
    total, count = emb.sum() * 0.0, 0
    for i in range(1, len(emb)):
        for j in range(1, len(emb)):
            if dy[i] < dy[j]:
                d_ai = ((emb[0] - emb[i]) ** 2).sum()
                d_aj = ((emb[0] - emb[j]) ** 2).sum()
                total = total + torch.clamp(d_ai - d_aj + margin, min=0.0)
                count += 1
    return total / count if count else total


def loss_fn() -> torch.nn.Module:
    return create_method("triplet-dense", None, num_classes=0, embedding_size=8).build_loss()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_reference_value_and_gradient(seed: int, normalize: bool) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(20, 8, generator=g, dtype=torch.float64)
    if normalize:  # on the unit sphere many triplets are inside the margin, some are not
        emb = torch.nn.functional.normalize(emb, dim=1)
    labels = torch.randn(20, 3, generator=g, dtype=torch.float64)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_pytorch_metric_learning_given_the_triplets(seed: int) -> None:
    """Our one-anchor broadcast equals PML's TripletMarginLoss handed the dense triplets."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(30, 16, generator=g, dtype=torch.float64)
    labels = torch.randn(30, 3, generator=g, dtype=torch.float64)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    i, j = torch.nonzero(
        dense_triplets(torch.linalg.norm(labels - labels[0], dim=1)), as_tuple=True
    )
    peer = pml_triplet_loss(MARGIN)(e2, indices_tuple=(torch.zeros_like(i), i + 1, j + 1))
    ours = loss_fn()(e1, labels)
    ours.backward()
    peer.backward()
    assert math.isclose(float(ours.detach()), float(peer.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_plain_mean_not_pml_default_nonzero_average() -> None:
    """Zero-loss triplets count in the mean (Kim et al.); PML's default reducer would drop them."""
    emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [1.0, 0.0], [0.0, 0.2]], dtype=torch.float64)
    labels = torch.tensor([[0.0], [1.0], [2.0], [3.0]], dtype=torch.float64)
    ours = loss_fn()(emb, labels)
    assert float(ours) == pytest.approx(float(reference(emb, labels)))
    triplets = (torch.zeros(3, dtype=torch.long), torch.tensor([1, 1, 2]), torch.tensor([2, 3, 3]))
    from pytorch_metric_learning.distances import LpDistance

    default = TripletMarginLoss(
        margin=MARGIN, distance=LpDistance(power=2, normalize_embeddings=False)
    )
    assert float(default(emb, indices_tuple=triplets)) > float(ours) + 1e-3


def test_margin_hyperparameter_is_used() -> None:
    emb = torch.randn(10, 4, dtype=torch.float64)
    labels = torch.randn(10, 2, dtype=torch.float64)
    wide = DenseTripletLoss(0.5)(emb, labels)
    assert float(wide) == pytest.approx(float(reference(emb, labels, margin=0.5)))


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(6, 2), torch.zeros(2, 2), torch.tensor([[0.0], [1.0], [1.0]])],
    ids=["all-equal", "anchor-and-one", "tie"],
)
def test_batches_without_triplets_give_zero(labels: torch.Tensor) -> None:
    emb = torch.randn(len(labels), 4, requires_grad=True)
    loss = loss_fn()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert float(loss.detach()) == 0.0 and torch.isfinite(emb.grad).all()


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(8, 4, requires_grad=True)
    labels = torch.arange(8, dtype=torch.float32)[:, None]
    loss = loss_fn()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert float(loss.detach()) == pytest.approx(MARGIN) and torch.isfinite(emb.grad).all()
