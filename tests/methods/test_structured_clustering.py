"""structured-clustering against loops written from Fehervari et al. 2019 eq. 10-12 (Oh Song et
al., CVPR 2017), its greedy inference against exhaustive search on tiny batches, and its
all-candidates NMI (moved counts) against the NMI of each candidate partition written out."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score

from dmlbench.methods import create_method
from dmlbench.methods._common import pairwise_distances
from dmlbench.methods.structured_clustering import greedy_augmented_medoids
from tests.methods._batches import tensor_sum


def _sum_xlogx(keys: torch.Tensor, stride: int, xlogx: torch.Tensor) -> torch.Tensor:
    """Per row of ``keys`` (J, B): Σ over distinct values v of N_v log N_v (N_v = count of v)."""
    rows = torch.arange(len(keys), device=keys.device)[:, None]
    values, counts = torch.unique(keys + rows * stride, return_counts=True)
    out = torch.zeros(len(keys), dtype=torch.float64, device=keys.device)
    return out.index_add_(0, values // stride, xlogx[counts])


def nmi_many(
    assign: torch.Tensor, num_clusters: int, y: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """NMI = 2 I / (H(A) + H(Y)) of each row of ``assign`` (J, B) against the labels ``y`` (B,):
    the straightforward form the module's incremental update is checked against (a test helper).

    From counts only: n·I = Σ N_kc log N_kc − Σ a_k log a_k − Σ b_c log b_c + n log n and
    n·H(A) = n log n − Σ a_k log a_k, so each row costs O(B) (no K × C table).
    """
    n = len(y)
    xlogx = torch.arange(n + 1, dtype=torch.float64, device=y.device)
    xlogx = xlogx * xlogx.clamp_min(1.0).log()  # a table: counts are integers in 0..n
    joint = _sum_xlogx(assign * num_classes + y[None, :], num_clusters * num_classes, xlogx)
    s_a = _sum_xlogx(assign, num_clusters, xlogx)
    s_y = _sum_xlogx(y[None, :], num_classes, xlogx)
    nlogn = float(xlogx[n])
    denominator = 2.0 * nlogn - s_a - s_y
    nmi = 2.0 * (joint - s_a - s_y + nlogn) / denominator.clamp_min(1e-12)
    return torch.where(denominator > 1e-9, nmi, 1.0).clamp(0.0, 1.0)


GAMMA = 1.0


def dist(emb: torch.Tensor, i: int, j: int) -> torch.Tensor:
    return emb[i].sum() * 0.0 if i == j else torch.sqrt(((emb[i] - emb[j]) ** 2).sum())


def facility(emb: torch.Tensor, s: list[int]) -> torch.Tensor:
    """F(X, S) = −Σ_i min_{j∈S} ‖x_i − x_j‖."""
    n = len(emb)
    return -tensor_sum(torch.stack([dist(emb, i, j) for j in s]).min() for i in range(n))


def assignment(emb: torch.Tensor, s: list[int]) -> list[int]:
    """g(S) (eq. 12): nearest medoid, first on ties, a medoid in its own cluster."""
    out = []
    for i in range(len(emb)):
        if i in s:
            out.append(s.index(i))
        else:
            out.append(min(range(len(s)), key=lambda k: (float(dist(emb, i, s[k])), k)))
    return out


def augmented(emb: torch.Tensor, labels: list[int], s: list[int], gamma: float) -> float:
    nmi = normalized_mutual_info_score(labels, assignment(emb, s))
    return float(facility(emb, s)) + gamma * (1.0 - nmi)


def greedy_reference(emb: torch.Tensor, labels: list[int], gamma: float) -> list[int]:
    s: list[int] = []
    with torch.no_grad():
        for _ in range(len(set(labels))):
            rest = [j for j in range(len(emb)) if j not in s]
            scores = [augmented(emb, labels, [*s, j], gamma) for j in rest]
            s.append(rest[max(range(len(rest)), key=lambda t: (scores[t], -t))])
    return s


def reference(emb: torch.Tensor, labels: torch.Tensor, gamma: float = GAMMA) -> torch.Tensor:
    y = labels.tolist()
    s = greedy_reference(emb, y, gamma)
    nmi = normalized_mutual_info_score(y, assignment(emb.detach(), s))
    oracle = emb.sum() * 0.0
    for k in set(y):  # eq. 10
        members = [i for i in range(len(y)) if y[i] == k]
        scores = [-tensor_sum(dist(emb, i, j) for i in members) for j in members]
        oracle = oracle + torch.stack(scores).max()
    return torch.relu(facility(emb, s) + gamma * (1.0 - nmi) - oracle)


def loss_fn(gamma: float = GAMMA) -> torch.nn.Module:
    return create_method("structured-clustering", {"gamma": gamma}, 10, 8).build_loss()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(12, 4, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (12,), generator=g) * 3 + 1  # arbitrary label values
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    ours, ref = loss_fn()(e1, labels), reference(e2, labels)
    ours.backward()
    ref.backward()
    assert float(ref.detach()) > 0.0  # the hinge is active: gradients are compared
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad)


@pytest.mark.parametrize("gamma", [0.0, 1.0, 5.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_greedy_step_is_the_best_single_addition(seed: int, gamma: float) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(9, 3, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3, 3])
    d = torch.cdist(emb, emb).fill_diagonal_(0.0)
    chosen, assign, nmi = greedy_augmented_medoids(d, labels, 4, gamma)
    assert chosen == greedy_reference(emb, labels.tolist(), gamma)
    assert assign.tolist() == assignment(emb, chosen)
    assert math.isclose(nmi, normalized_mutual_info_score(labels.tolist(), assign.tolist()))


@pytest.mark.parametrize("seed", range(6))
def test_greedy_facility_location_is_within_the_submodular_bound_of_exhaustive(seed: int) -> None:
    """γ = 0: f(S) = n·max D + F(X, S) is monotone submodular, so greedy ≥ (1 − 1/e)·OPT."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(8, 2, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    d = torch.cdist(emb, emb).fill_diagonal_(0.0)
    chosen, _, _ = greedy_augmented_medoids(d, labels, 4, 0.0)
    best = max(float(facility(emb, list(s))) for s in itertools.combinations(range(8), 4))
    offset = 8 * float(d.max())
    assert offset + float(facility(emb, chosen)) >= (1 - 1 / math.e) * (offset + best) - 1e-12


def test_separated_classes_get_one_medoid_each_and_zero_loss() -> None:
    """Greedy is not exact (its class-0 medoid may differ from the exhaustive optimum's), but
    on well separated classes it finds one medoid per class, NMI = 1, and no violation."""
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    emb = centres[labels] + 0.1 * torch.randn(9, 2, generator=g, dtype=torch.float64)
    d = torch.cdist(emb, emb).fill_diagonal_(0.0)
    chosen, _, nmi = greedy_augmented_medoids(d, labels, 3, GAMMA)
    subsets = itertools.combinations(range(9), 3)
    best = max(subsets, key=lambda s: augmented(emb, labels.tolist(), list(s), GAMMA))
    assert sorted(labels[chosen].tolist()) == sorted(labels[list(best)].tolist()) == [0, 1, 2]
    assert nmi == 1.0
    assert float(loss_fn()(emb, labels)) == 0.0


def test_nmi_many_matches_scikit_learn() -> None:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (15,), generator=g)
    assign = torch.stack(
        [torch.randint(0, 5, (15,), generator=g) for _ in range(5)]
        + [torch.zeros(15, dtype=torch.long), torch.arange(15) % 5]
    )
    ours = nmi_many(assign, 5, y, 4)
    for row, value in zip(assign, ours, strict=True):
        assert math.isclose(float(value), normalized_mutual_info_score(y, row), abs_tol=1e-12)
    single = nmi_many(torch.zeros(1, 6, dtype=torch.long), 1, torch.zeros(6, dtype=torch.long), 1)
    assert float(single) == 1.0  # scikit-learn's convention for two one-cluster partitions


def greedy_by_explicit_partitions(
    d: torch.Tensor, y: torch.Tensor, num_classes: int, gamma: float
) -> tuple[list[int], torch.Tensor, float]:
    """The greedy inference with every candidate's partition written out as a (B, B) table and
    scored by :func:`nmi_many` (the straightforward form of the vectorised one)."""
    n = len(y)
    cur_min, cur_assign = torch.full((n,), math.inf, dtype=d.dtype), torch.zeros(n).long()
    chosen: list[int] = []
    nmi = torch.ones(n, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.bool)
    for k in range(num_classes):
        new_min = torch.minimum(cur_min[:, None], d)
        assign = torch.where((d < cur_min[:, None]) | eye, k, cur_assign[:, None])
        nmi = nmi_many(assign.t(), k + 1, y, num_classes)
        score = -new_min.sum(dim=0).double() + gamma * (1.0 - nmi)
        score[chosen] = -math.inf
        j = int(score.argmax())
        chosen.append(j)
        cur_min, cur_assign = new_min[:, j], assign[:, j]
    return chosen, cur_assign, float(nmi[chosen[-1]])


@pytest.mark.parametrize("gamma", [0.0, 1.0, 20.0])
@pytest.mark.parametrize(("n", "dim", "per_class"), [(60, 16, 5), (48, 4, 3), (40, 64, 8)])
def test_vectorised_greedy_equals_the_explicit_partitions(
    n: int, dim: int, per_class: int, gamma: float
) -> None:
    g = torch.Generator().manual_seed(n + dim)
    emb = torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=1)
    y = torch.randperm(n, generator=g) // per_class
    d = pairwise_distances(emb)
    chosen, assign, nmi = greedy_augmented_medoids(d, y, int(y.max()) + 1, gamma)
    expected = greedy_by_explicit_partitions(d, y, int(y.max()) + 1, gamma)
    assert chosen == expected[0]
    assert assign.tolist() == expected[1].tolist()
    assert math.isclose(nmi, expected[2], rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    value = loss_fn()(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(value.detach(), reference(emb.detach(), labels))
    if len(set(labels.tolist())) in (1, 8):
        assert float(value.detach()) == 0.0


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(8, 4, requires_grad=True)
    value = loss_fn()(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    value.backward()
    assert torch.isfinite(value) and 0.0 <= float(value.detach()) <= GAMMA
    assert emb.grad is not None
    assert torch.isfinite(emb.grad).all()


def test_batch_of_64_with_16_classes_runs() -> None:
    # A protocol-sized batch (speed belongs to benchmark scripts, not to timed assertions).
    emb = torch.nn.functional.normalize(torch.randn(64, 64), dim=1).requires_grad_(True)
    labels = torch.arange(64) // 4
    value = loss_fn()(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
