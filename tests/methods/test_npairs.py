"""npairs against a per-anchor loop written from Fehervari et al. 2019 eq. 3 (+ Sohn's L2 regulariser)."""

from __future__ import annotations

import math

import pytest
import torch

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

L2_REG = 0.002


def reference(emb: torch.Tensor, labels: torch.Tensor, l2_reg: float = L2_REG) -> torch.Tensor:
    n = len(labels)
    terms, anchors, positives = [], [], []
    for a in range(n):
        for p in range(n):
            if p == a or labels[p] != labels[a]:
                continue
            s_ap = emb[a] @ emb[p]
            neg = [torch.exp(emb[a] @ emb[k] - s_ap) for k in range(n) if labels[k] != labels[a]]
            terms.append(torch.log(1 + sum(neg, emb.new_zeros(()))))  # eq. 3; no negative: log 1
            anchors.append(a)
            positives.append(p)
    if not terms:
        return emb.sum() * 0.0
    sq = [(emb[i] ** 2).sum() for i in range(n)]
    reg_a = sum(sq[a] for a in anchors) / len(anchors)
    reg_p = sum(sq[p] for p in positives) / len(positives)
    return tensor_sum(terms) / len(terms) + 0.25 * l2_reg * (reg_a + reg_p)


def loss_fn(l2_reg: float = L2_REG) -> torch.nn.Module:
    hp = {"l2_reg": l2_reg}
    return create_method("npairs", hp, num_classes=10, embedding_size=8).build_loss()


def npair_labels(n_classes: int, g: torch.Generator, per_class: int = 2) -> torch.Tensor:
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    return labels[torch.randperm(len(labels), generator=g)]


def check(emb: torch.Tensor, labels: torch.Tensor) -> None:
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9, abs_tol=1e-12)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_on_npair_batches(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    labels = npair_labels(10, g)
    check(torch.randn(20, 8, generator=g, dtype=torch.float64), labels)


def test_npair_batch_is_a_mean_over_the_batch() -> None:
    # N × 2: one term per sample, so the mean over (a, p) pairs is 1/|B| Σ_a of eq. 3.
    g = torch.Generator().manual_seed(7)
    labels, emb = npair_labels(6, g), torch.randn(12, 8, generator=g, dtype=torch.float64)
    per_anchor = []
    for a in range(12):
        p = next(j for j in range(12) if j != a and labels[j] == labels[a])
        logits = [emb[a] @ emb[k] - emb[a] @ emb[p] for k in range(12) if labels[k] != labels[a]]
        per_anchor.append(math.log1p(sum(math.exp(v.item()) for v in logits)))
    expected = sum(per_anchor) / 12 + L2_REG / 2 * (emb**2).sum(dim=1).mean().item()
    assert math.isclose(loss_fn()(emb, labels).item(), expected, rel_tol=1e-9)


def test_more_than_two_per_class_uses_every_pair() -> None:
    g = torch.Generator().manual_seed(11)
    check(torch.randn(18, 8, generator=g, dtype=torch.float64), npair_labels(6, g, per_class=3))


def test_regulariser_is_sohns_l2_penalty() -> None:
    g = torch.Generator().manual_seed(3)
    labels, emb = npair_labels(8, g), 3.0 * torch.randn(16, 8, generator=g, dtype=torch.float64)
    diff = loss_fn(L2_REG)(emb, labels) - loss_fn(0.0)(emb, labels)
    assert math.isclose(diff.item(), L2_REG / 2 * (emb**2).sum(dim=1).mean().item(), rel_tol=1e-9)
    # Behind an L2-normalisation layer the penalty is constant: no gradient reaches the model.
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    unit = torch.nn.functional.normalize
    loss_fn(L2_REG)(unit(e1, dim=1), labels).backward()
    loss_fn(0.0)(unit(e2, dim=1), labels).backward()
    torch.testing.assert_close(e1.grad, e2.grad)


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
    # Every logit is 0: log(1 + 6) per anchor, plus λ/2 · ‖1‖² = λ/2 · 8.
    assert math.isclose(loss.item(), math.log(7) + L2_REG / 2 * 8, rel_tol=1e-6)
