"""triplet-binary against a loop written from Kim et al. 2019 eq. 1 with Kim et al.'s 30-NN positives."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dmlbench.data.base import ArrayImages, Split
from dmlbench.methods import create_method

MARGIN, P = 0.2, 5


def reference(emb: torch.Tensor, positives: int = P, margin: float = MARGIN) -> torch.Tensor:
    """Eq. 1, squared Euclidean D: anchor row 0, rows 1..P positives, the rest negatives."""
    total, count = emb.sum() * 0.0, 0
    for p in range(1, positives + 1):
        for n in range(positives + 1, len(emb)):
            d_ap = ((emb[0] - emb[p]) ** 2).sum()
            d_an = ((emb[0] - emb[n]) ** 2).sum()
            total = total + torch.clamp(d_ap - d_an + margin, min=0.0)
            count += 1
    return total / count if count else total


def method():
    return create_method("triplet-binary", None, num_classes=0, embedding_size=8)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(24, 8, generator=g, dtype=torch.float64), dim=1)
    labels = torch.randn(24, 3, generator=g, dtype=torch.float64)  # unused: layout decides
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    ours, ref = method().build_loss()(e1, labels), reference(e2)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


def test_sampler_and_loss_agree_on_the_layout() -> None:
    """The sampler puts 5 of the 30 label-nearest first: exactly the rows the loss calls positive."""
    rng = np.random.default_rng(0)
    labels = rng.normal(size=(200, 4)).astype(np.float32)
    split = Split(
        ArrayImages(np.zeros((200, 1, 4, 4), dtype=np.uint8)),
        labels,
        label_kind="continuous",
        extras={"label_distance": "euclidean"},
    )
    m = method()
    batch = next(iter(m.batch_sampler(split, 40, None, seed=0)))
    d = np.linalg.norm(labels - labels[batch[0]], axis=1)
    thirtieth = np.sort(d)[30]  # index 0 is the anchor itself
    assert (d[batch[1 : P + 1]] <= thirtieth).all()
    assert (d[batch[P + 1 :]] > thirtieth).all()
    # embeddings equal to labels: positives are near, so most triplets are satisfied
    emb = torch.as_tensor(labels[batch], dtype=torch.float64)
    loss = m.build_loss()(emb, emb)
    assert float(loss) == pytest.approx(float(reference(emb)))


@pytest.mark.parametrize("n", [1, 2, 6])
def test_batches_without_negatives_give_zero(n: int) -> None:
    emb = torch.randn(n, 4, requires_grad=True)
    loss = method().build_loss()(emb, torch.zeros(n, 2))
    loss.backward()
    assert emb.grad is not None
    assert float(loss.detach()) == 0.0 and torch.isfinite(emb.grad).all()


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(12, 4, requires_grad=True)
    loss = method().build_loss()(emb, torch.zeros(12, 2))
    loss.backward()
    assert emb.grad is not None
    assert float(loss.detach()) == pytest.approx(MARGIN) and torch.isfinite(emb.grad).all()
