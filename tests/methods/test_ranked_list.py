"""ranked-list against a per-query loop written from Fehervari et al. 2019 eq. 6–9 (Wang et al. 2019)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import distances, losses

from dmlbench.methods import create_method

ALPHA, MARGIN, TEMP, LAM = 1.2, 0.4, 10.0, 1.0


def reference(
    emb: torch.Tensor,
    labels: torch.Tensor,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    temp: float = TEMP,
    lam: float = LAM,
) -> torch.Tensor:
    n = len(labels)
    total = emb.sum() * 0.0
    for i in range(n):
        d = {j: torch.sqrt(((emb[i] - emb[j]) ** 2).sum()) for j in range(n) if j != i}
        pos = [j for j in range(n) if j != i and labels[j] == labels[i]]
        neg = [j for j in range(n) if labels[j] != labels[i]]
        p_star = [j for j in pos if d[j].item() > alpha - margin]
        n_star = [j for j in neg if d[j].item() < alpha]
        if p_star:  # eq. 6 with L_m of eq. 9 (y_ij = 1)
            total = total + sum(d[j] - (alpha - margin) for j in p_star) / len(p_star)
        if n_star:  # eq. 7: weights exp(T_n (α − d_ij)) are constants (no gradient)
            w = {j: math.exp(temp * (alpha - d[j].item())) for j in n_star}
            z = sum(w.values())
            total = total + lam * sum(w[j] / z * (alpha - d[j]) for j in n_star)  # eq. 8
    return total / n


def loss_fn(**hp: float) -> torch.nn.Module:
    return create_method("ranked-list", hp, num_classes=10, embedding_size=8).build_loss()


def sphere(n: int, g: torch.Generator, dim: int = 8) -> torch.Tensor:
    return F.normalize(torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = sphere(24, g) if seed < 2 else 0.6 * torch.randn(24, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 5, (24,), generator=g)
    hp = {} if seed % 2 == 0 else {"alpha": 1.0, "margin": 0.3, "temperature": 3.0, "lam": 2.0}
    ref_hp = {"alpha": ALPHA, "margin": MARGIN, "temp": TEMP, "lam": LAM}
    if hp:
        ref_hp = {"alpha": 1.0, "margin": 0.3, "temp": 3.0, "lam": 2.0}
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn(**hp)(e1, labels), reference(e2, labels, **ref_hp)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9, abs_tol=1e-12)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_is_twice_pytorch_metric_learning_at_half_imbalance(seed: int) -> None:
    # PML weighs (1 − imbalance) L_P + imbalance L_N and smooths the weight sums by 1e-5 per
    # column: at imbalance 0.5 its value is half of L_P + L_N up to that smoothing.
    g = torch.Generator().manual_seed(seed)
    emb, labels = sphere(24, g), torch.randint(0, 5, (24,), generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PML warns about T_n > 5
        pml = losses.RankedListLoss(
            margin=MARGIN,
            Tn=TEMP,
            imbalance=0.5,
            alpha=ALPHA,
            Tp=0,
            distance=distances.LpDistance(normalize_embeddings=False),
        )(emb, labels)
    assert math.isclose(loss_fn()(emb, labels).item(), 2 * pml.item(), rel_tol=1e-3)


def test_trivial_pairs_contribute_nothing() -> None:
    # Positives inside α − m and negatives beyond α: every term is trivial, the loss is 0.
    emb = torch.zeros(4, 2, dtype=torch.float64)
    emb[1, 0], emb[2, 1], emb[3] = 0.1, 1.5, torch.tensor([0.1, 1.5])
    labels = torch.tensor([0, 0, 1, 1])
    assert loss_fn()(emb, labels).item() == 0.0
    # Move one negative inside α: only the negative term appears.
    emb[2, 1] = 1.0
    loss = loss_fn()(emb, labels).item()
    assert loss > 0 and math.isclose(loss, reference(emb, labels).item(), rel_tol=1e-9)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = F.normalize(torch.randn(8, 8), dim=1).requires_grad_(True)
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
    # d = 0: positives are trivial, every negative is at α from the boundary: L_N = α per query.
    assert math.isclose(loss.item(), LAM * ALPHA, rel_tol=1e-6)
