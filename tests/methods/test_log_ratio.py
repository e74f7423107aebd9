"""log-ratio against a per-triplet loop written from Kim et al. 2019 eq. 5 and eq. 10."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dmlbench.data.base import ArrayImages, Split
from dmlbench.data.dense import AnchorDistances, PoseDistance
from dmlbench.methods import create_method
from dmlbench.methods.log_ratio import EPS_EMBEDDING, EPS_LABEL, LogRatioLoss
from dmlbench.methods.triplet_dense import DenseTripletLoss


def reference(
    emb: torch.Tensor,
    dy: list[float],
    squared: bool = False,
    eps_f: float = EPS_EMBEDDING,
    eps_y: float = EPS_LABEL,
) -> torch.Tensor:
    """Eq. 5 over the triplets of eq. 10; anchor = row 0; ``dy`` label distances from it."""
    n = len(emb)
    total, count = emb.sum() * 0.0, 0

    def df(i: int) -> torch.Tensor:
        sq = ((emb[0] - emb[i]) ** 2).sum() + eps_f
        return sq if squared else torch.sqrt(sq)

    def dl(i: int) -> float:
        return (dy[i] ** 2 if squared else dy[i]) + eps_y

    for i in range(1, n):
        for j in range(1, n):
            if dy[i] < dy[j]:  # eq. 10
                total = total + (torch.log(df(i) / df(j)) - math.log(dl(i) / dl(j))) ** 2
                count += 1
    return total / count if count else total


def euclid(labels: torch.Tensor) -> list[float]:
    return [float(torch.linalg.norm(labels[i] - labels[0])) for i in range(len(labels))]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(20, 8, generator=g, dtype=torch.float64)
    labels = torch.randn(20, 4, generator=g, dtype=torch.float64)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    ours, ref = LogRatioLoss()(e1, labels), reference(e2, euclid(labels))
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_pose_distance_when_bound() -> None:
    g = torch.Generator().manual_seed(5)
    emb = torch.randn(12, 6, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.rand(12, 28, generator=g, dtype=torch.float64)
    bound = AnchorDistances()
    bound.bind(PoseDistance(2))
    dy = PoseDistance(2).rowwise(labels[:1].numpy(), labels.numpy()).tolist()
    ours = LogRatioLoss(bound)(emb, labels)
    ref = reference(emb, dy)
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    assert not math.isclose(
        float(ours.detach()), float(LogRatioLoss()(emb, labels).detach()), rel_tol=1e-3
    )


def test_paper_squared_form_is_four_times_ours() -> None:
    """Eq. 5 as printed (squared distances on both sides) = 4 × our unsquared form, up to ε."""
    g = torch.Generator().manual_seed(7)
    emb = torch.randn(16, 8, generator=g, dtype=torch.float64)
    labels = torch.randn(16, 3, generator=g, dtype=torch.float64)
    ours = LogRatioLoss(eps_embedding=1e-12, eps_label=1e-12)(emb, labels)
    paper = reference(emb, euclid(labels), squared=True, eps_f=1e-12, eps_y=1e-12)
    assert float(paper.detach()) == pytest.approx(4 * float(ours.detach()), rel=1e-6)


def test_gradient_is_nonzero_when_the_rank_constraint_holds() -> None:
    """Eq. 6-9: the triplet is correctly ordered in the embedding, yet the ratio is wrong."""
    emb = torch.tensor(
        [[0.0, 0.0], [0.1, 0.0], [0.0, 1.0]], dtype=torch.float64, requires_grad=True
    )
    labels = torch.tensor([[0.0], [0.5], [1.0]], dtype=torch.float64)  # label ratio 1/2
    # D(f_a, f_i) = 0.1 < D(f_a, f_j) = 1: rank constraint satisfied, embedding ratio 1/10.
    loss = LogRatioLoss()(emb, labels)
    loss.backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 1e-3
    # The dense triplet loss (eq. 11) sees a satisfied triplet: zero loss, zero gradient.
    emb2 = emb.detach().clone().requires_grad_(True)
    tri = DenseTripletLoss(0.03)(emb2, labels)
    tri.backward()
    assert (
        float(tri.detach()) == 0.0 and emb2.grad is not None and float(emb2.grad.abs().sum()) == 0.0
    )
    # The gradient pushes i away from the anchor (towards the label ratio).
    assert emb.grad[1, 0] < 0


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(6, 2), torch.ones(6, 2), torch.zeros(2, 2), torch.tensor([[0.0], [1.0], [1.0]])],
    ids=["all-equal", "all-equal-ones", "anchor-and-one", "tie"],
)
def test_batches_without_triplets_give_zero(labels: torch.Tensor) -> None:
    emb = torch.randn(len(labels), 4, requires_grad=True)
    loss = LogRatioLoss()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert float(loss.detach()) == 0.0 and torch.isfinite(emb.grad).all()


def test_coincident_embeddings_and_labels_are_finite() -> None:
    emb = torch.ones(8, 4, requires_grad=True)
    labels = torch.tensor([[0.0], [0.0], [1.0], [2.0], [3.0], [0.0], [5.0], [6.0]])
    loss = LogRatioLoss()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(loss) and float(loss.detach()) > 0 and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(loss, reference(emb.detach(), euclid(labels)).float())


def test_method_binds_the_split_label_distance() -> None:
    rng = np.random.default_rng(0)
    labels = rng.uniform(size=(40, 28)).astype(np.float32)
    split = Split(
        ArrayImages(np.zeros((40, 1, 4, 4), dtype=np.uint8)),
        labels,
        label_kind="continuous",
        extras={"label_distance": "pose", "joint_dims": 2},
    )
    method = create_method("log-ratio", None, num_classes=0, embedding_size=8)
    loss_fn = method.build_loss()
    batch = next(iter(method.batch_sampler(split, 12, None, seed=0)))
    y = torch.as_tensor(labels[batch], dtype=torch.float64)
    emb = torch.randn(12, 8, dtype=torch.float64)
    dy = PoseDistance(2).rowwise(labels[batch[:1]].astype(np.float64), labels[batch]).tolist()
    assert math.isclose(float(loss_fn(emb, y)), float(reference(emb, dy)), rel_tol=1e-9)
    assert method.label_kind == "continuous" and method.hparams["num_neighbours"] == 5
    with pytest.raises(Exception, match="continuous"):
        method.batch_sampler(Split(split.images, np.zeros(40)), 12, None, 0)
