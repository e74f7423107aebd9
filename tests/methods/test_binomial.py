"""binomial against a per-anchor loop written from Wang et al.'s unified-view preprint eq. 12."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dmlbench.methods import create_method

ALPHA, BETA, GAMMA = 2.0, 50.0, 0.5


def reference(
    emb: torch.Tensor,
    labels: torch.Tensor,
    alpha: float = ALPHA,
    beta: float = BETA,
    gamma: float = GAMMA,
) -> torch.Tensor:
    x = F.normalize(emb, dim=1)
    n = len(labels)
    total = emb.sum() * 0.0
    for i in range(n):  # eq. 12 sums over the anchors
        pos = [k for k in range(n) if k != i and labels[k] == labels[i]]
        neg = [k for k in range(n) if labels[k] != labels[i]]
        if pos:
            total = total + sum(
                torch.log(1 + torch.exp(alpha * (gamma - x[i] @ x[k]))) for k in pos
            ) / len(pos)
        if neg:
            total = total + sum(
                torch.log(1 + torch.exp(beta * (x[i] @ x[k] - gamma))) for k in neg
            ) / len(neg)
    return total


def loss_fn(**hp: float) -> torch.nn.Module:
    return create_method("binomial", hp, num_classes=10, embedding_size=8).build_loss()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(24, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (24,), generator=g)
    hp = {} if seed < 2 else {"alpha": 5.0, "beta": 10.0, "gamma": 0.2}
    ref_hp = {"alpha": ALPHA, "beta": BETA, "gamma": GAMMA} if seed < 2 else hp
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn(**hp)(e1, labels), reference(e2, labels, **ref_hp)
    ours.backward()
    ref.backward()
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_sums_over_anchors_and_averages_within_each() -> None:
    # Two classes on a circle, one image of class 1 and three of class 0: the sum runs over
    # the four anchors; the singleton has no positive term.
    angles = torch.tensor([0.0, 0.3, -0.3, 2.0], dtype=torch.float64)
    emb = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    labels = torch.tensor([0, 0, 0, 1])
    s = emb @ emb.t()

    def sp(v: torch.Tensor) -> float:
        return math.log1p(math.exp(v.item()))

    expected = 0.0
    for i in range(3):
        others = [k for k in range(3) if k != i]
        expected += sum(sp(ALPHA * (GAMMA - s[i, k])) for k in others) / 2 + sp(
            BETA * (s[i, 3] - GAMMA)
        )
    expected += sum(sp(BETA * (s[3, k] - GAMMA)) for k in range(3)) / 3
    assert math.isclose(loss_fn()(emb, labels).item(), expected, rel_tol=1e-9)


def test_is_scale_invariant() -> None:
    g = torch.Generator().manual_seed(9)
    emb, labels = torch.randn(12, 8, generator=g, dtype=torch.float64), torch.arange(12) // 3
    assert math.isclose(
        loss_fn()(emb, labels).item(), loss_fn()(4.0 * emb, labels).item(), rel_tol=1e-12
    )


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
    # s = 1 everywhere: per anchor log(1 + e^{α(γ−1)}) + log(1 + e^{β(1−γ)}), summed over 8.
    per_anchor = math.log1p(math.exp(ALPHA * (GAMMA - 1))) + math.log1p(
        math.exp(BETA * (1 - GAMMA))
    )
    assert math.isclose(loss.item(), 8 * per_anchor, rel_tol=1e-6)
