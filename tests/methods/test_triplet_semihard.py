"""triplet-semihard against a per-pair loop written from Schroff et al., CVPR 2015: §3.1 (the
triplet hinge on squared Euclidean distances, eqs. 1-2) with the semi-hard negative of §3.2
(the closest negative farther from the anchor than the positive; the farthest negative when
none is, as TensorFlow's ``triplet_semihard_loss`` does), averaged over anchor-positive pairs.

pytorch-metric-learning has no reference here: its semi-hard miner keeps every semi-hard
triplet (a different average), so it is only the time peer of ``dmlbench.perf.losses``.
"""

from __future__ import annotations

import math

import pytest
import torch

from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum

MARGIN = 0.2


def reference(emb: torch.Tensor, labels: torch.Tensor, margin: float = MARGIN) -> torch.Tensor:
    n = len(labels)

    def d(a: int, b: int) -> torch.Tensor:
        return ((emb[a] - emb[b]) ** 2).sum()

    terms = []
    for a in range(n):
        negatives = [k for k in range(n) if labels[k] != labels[a]]
        if not negatives:
            continue
        for p in range(n):
            if p == a or labels[p] != labels[a]:
                continue
            d_ap = d(a, p)
            dist = {k: float(d(a, k).detach()) for k in negatives}  # the choice is discrete
            farther = [k for k in negatives if dist[k] > float(d_ap.detach())]
            if farther:
                n_star = min(farther, key=dist.__getitem__)
            else:
                n_star = max(negatives, key=dist.__getitem__)
            terms.append(torch.relu(d_ap - d(a, n_star) + margin))  # the §3.1 hinge
    return tensor_sum(terms) / len(terms) if terms else emb.sum() * 0.0


def loss_fn(margin: float = MARGIN) -> torch.nn.Module:
    hp = {"margin": margin}
    return create_method("triplet-semihard", hp, num_classes=10, embedding_size=8).build_loss()


@pytest.mark.parametrize("margin", [MARGIN, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_value_and_gradient(seed: int, margin: float) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(20, 8, generator=g, dtype=torch.float64), dim=1)
    labels = torch.randint(0, 5, (20,), generator=g)
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours, ref = loss_fn(margin)(e1, labels), reference(e2, labels, margin)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_semihard_choice_and_fallback() -> None:
    """On a line, class 0 at 0, 1 and 4, negatives at 0.5, 2 and 3, margin 0.5 (squared
    distances). Pair (0, 1): d_ap = 1, the semi-hard negative is at 2 (d = 4, not the harder
    0.25): 0. (0, 5): d_ap = 16, no negative farther, the farthest (9): 7.5. (1, 0): 4 → 0.
    (1, 5): 9 − 4 + 0.5 = 5.5. (5, 0): 16 − 12.25 + 0.5 = 4.25. (5, 1): 12.25 → 0. The six
    pairs of class 1 all have a semi-hard negative at least 2.25 farther: 0. Mean over 12."""
    x = torch.tensor([[0.0], [1.0], [0.5], [2.0], [3.0], [4.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 1, 0])
    expected = (7.5 + 5.5 + 4.25) / 12
    assert math.isclose(float(loss_fn(0.5)(x, labels)), expected, rel_tol=1e-12)
    assert math.isclose(float(reference(x, labels, 0.5)), expected, rel_tol=1e-12)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = torch.randn(8, 8, dtype=torch.float64, requires_grad=True)
    loss = loss_fn()(emb, labels)
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(loss) and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(loss.detach(), reference(emb.detach(), labels))
    if len(set(labels.tolist())) in (1, 8):
        assert float(loss.detach()) == 0.0


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(8, 8, requires_grad=True)
    loss = loss_fn()(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(loss) and torch.isfinite(emb.grad).all()
    assert math.isclose(loss.item(), MARGIN, rel_tol=1e-6)  # every distance 0: [0 − 0 + α]₊
