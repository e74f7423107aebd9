"""margin: the loss on fixed triplets against a loop from Wu et al. 2017 §5, and the
distance-weighted sampler (§4) against the paper's density, cut-offs and its own draws."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dmlbench.methods import create_method
from dmlbench.methods.margin import distance_weighted_triplets, negative_probabilities

ALPHA, BETA0, NU, DIM = 0.2, 1.2, 0.05, 16


def reference(emb, labels, triplets, beta, per_class, nu):
    """(Σ_t [α + D_ap − β]₊ + [α − D_an + β]₊ + ν β) / #(non-zero hinges)."""
    total, reg, active = emb.sum() * 0.0, emb.sum() * 0.0, 0
    for a, p, n in zip(*(t.tolist() for t in triplets), strict=True):
        b = beta[int(labels[a])] if per_class else beta[0]
        d_ap = torch.sqrt(((emb[a] - emb[p]) ** 2).sum())
        d_an = torch.sqrt(((emb[a] - emb[n]) ** 2).sum())
        pos_term = torch.clamp(ALPHA + (d_ap - b), min=0.0)  # y = +1
        neg_term = torch.clamp(ALPHA - (d_an - b), min=0.0)  # y = −1
        total = total + pos_term + neg_term
        active += int(pos_term > 0) + int(neg_term > 0)
        reg = reg + nu * b
    if per_class:
        return (total + reg) / active
    return total / active + nu * beta[0]  # PML adds a global β's term once, undivided


def q_inverse(d: float, n: int) -> float:
    """1 / q(d) for q(d) ∝ d^{n−2} (1 − d²/4)^{(n−3)/2} (Wu et al. §4)."""
    return 1.0 / (d ** (n - 2) * (1.0 - d * d / 4.0) ** ((n - 3) / 2.0))


def batch(seed: int, n: int = 20, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    emb = F.normalize(torch.randn(n, DIM, generator=g, dtype=torch.float64), dim=1)
    return emb, torch.arange(n) % classes


@pytest.mark.parametrize("per_class", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_on_the_sampled_triplets_matches_reference(seed: int, per_class: bool) -> None:
    nu = NU
    h = {"beta_per_class": per_class, "nu": nu}
    loss = create_method("margin", h, num_classes=5, embedding_size=DIM).build_loss().double()
    emb, labels = batch(seed)
    with torch.no_grad():
        loss.loss.beta.add_(0.1 * torch.randn(loss.loss.beta.shape, dtype=torch.float64))
    torch.manual_seed(seed)
    triplets = distance_weighted_triplets(emb, labels, 0.5, 1.4)
    torch.manual_seed(seed)  # the loss draws the same triplets
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    beta2 = loss.loss.beta.detach().clone().requires_grad_(True)
    ours = loss(e1, labels)
    ref = reference(e2, labels, triplets, beta2, per_class, nu)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad)
    torch.testing.assert_close(loss.loss.beta.grad, beta2.grad)


def test_every_positive_pair_gets_one_negative_of_another_class() -> None:
    emb, labels = batch(0)
    a, p, n = distance_weighted_triplets(emb, labels, 0.5, 1.4)
    pairs = {(int(i), int(j)) for i, j in zip(a, p, strict=True)}
    expected = {(i, j) for i in range(20) for j in range(20) if i != j and labels[i] == labels[j]}
    assert len(a) == len(expected) and pairs == expected
    assert (labels[n] != labels[a]).all()


def test_sampling_is_deterministic_given_torch_seed() -> None:
    emb, labels = batch(1)
    draws = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        draws.append(distance_weighted_triplets(emb, labels, 0.5, 1.4)[2])
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])


def test_probabilities_follow_the_inverse_density_with_both_cutoffs() -> None:
    labels = torch.tensor([0, 0, 1, 2, 3, 4, 5])
    d_row = [0.0, 0.3, 0.2, 0.4, 0.9, 1.2, 1.5]  # anchor 0 to every sample
    d = torch.zeros(7, 7, dtype=torch.float64)
    d[0] = d[:, 0] = torch.tensor(d_row, dtype=torch.float64)
    probs = negative_probabilities(d, labels, dim=DIM, cutoff=0.5, nonzero_loss_cutoff=1.4)[0]
    assert probs[0] == 0 and probs[1] == 0  # itself and its positive
    assert probs[6] == 0  # beyond the non-zero-loss cut-off
    w = [q_inverse(max(x, 0.5), DIM) for x in d_row[2:6]]  # d < 0.5 is clipped to 0.5
    torch.testing.assert_close(probs[2:6], torch.tensor(w, dtype=torch.float64) / sum(w))
    assert probs[2] == probs[3] and probs[3] > probs[4] > probs[5]


def test_anchor_with_only_far_negatives_falls_back_to_uniform() -> None:
    labels = torch.tensor([0, 0, 1, 2])
    d = torch.full((4, 4), 1.8, dtype=torch.float64).fill_diagonal_(0.0)
    probs = negative_probabilities(d, labels, dim=DIM, cutoff=0.5, nonzero_loss_cutoff=1.4)
    torch.testing.assert_close(probs[0], torch.tensor([0.0, 0.0, 0.5, 0.5], dtype=torch.float64))


def test_high_dimensional_rows_do_not_underflow() -> None:
    """Per-anchor normalisation: at n = 512 a row of far negatives still samples (float32)."""
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    d = torch.full((6, 6), 1.3).fill_diagonal_(0.0)
    d[2, 4] = d[4, 2] = 0.5  # another anchor with a near negative: global max far above row 0's
    probs = negative_probabilities(d, labels, dim=512, cutoff=0.5, nonzero_loss_cutoff=1.4)
    torch.testing.assert_close(probs.sum(dim=1), torch.ones(6))


def test_empirical_frequencies_match_the_probabilities() -> None:
    g = torch.Generator().manual_seed(2)
    emb = F.normalize(torch.randn(24, DIM, generator=g, dtype=torch.float64), dim=1)
    labels = torch.cat([torch.zeros(16, dtype=torch.long), torch.arange(1, 9)])  # 15 draws/anchor
    probs = negative_probabilities(torch.cdist(emb, emb), labels, DIM, 0.5, 1.4)[0]
    torch.manual_seed(0)
    counts = torch.zeros(24, dtype=torch.float64)
    for _ in range(300):
        a, _, n = distance_weighted_triplets(emb, labels, 0.5, 1.4)
        counts += torch.bincount(n[a == 0], minlength=24)
    assert float((counts / counts.sum() - probs).abs().max()) < 0.03


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_are_finite(labels: torch.Tensor) -> None:
    loss = create_method("margin", None, num_classes=8, embedding_size=DIM).build_loss()
    emb = F.normalize(torch.randn(8, DIM), dim=1).requires_grad_(True)
    value = loss(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
    if len(set(labels.tolist())) in (1, 8):  # no triplet at all
        assert float(value.detach()) == 0.0


def test_all_equal_embeddings_are_finite() -> None:
    loss = create_method("margin", None, num_classes=4, embedding_size=DIM).build_loss()
    emb = torch.ones(8, DIM, requires_grad=True)
    value = loss(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    value.backward()
    assert math.isclose(float(value.detach()), ALPHA + BETA0, rel_tol=1e-6)  # only [α + β − 0]₊
    assert emb.grad is not None
    assert torch.isfinite(emb.grad).all()


def test_beta_is_learned_per_class_with_its_lr_multiplier() -> None:
    method = create_method("margin", {"beta_lr_mult": 10.0}, num_classes=4, embedding_size=DIM)
    loss = method.build_loss()
    assert loss.loss.beta.shape == (4,) and torch.allclose(loss.loss.beta, torch.tensor(BETA0))
    groups = method.param_groups(loss, lr=1e-3)
    assert len(groups) == 1 and math.isclose(groups[0]["lr"], 1e-2)
