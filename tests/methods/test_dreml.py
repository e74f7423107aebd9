"""dreml against a per-learner, per-sample loop written from Xuan et al. 2018 / Fehervari et al. 2019 §4.1
(Proxy-NCA over each learner's random meta-classes), plus the grouping and the ensemble model."""

from __future__ import annotations

import math

import pytest
import torch

from dmlbench.engine.train import init_model
from dmlbench.errors import DmlbenchError
from dmlbench.methods import create_method
from dmlbench.methods.dreml import Ensemble
from dmlbench.protocol import load_protocol

C, L, D, SCALE = 10, 3, 4, 3.0


def reference(
    emb: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, proxies: torch.Tensor
) -> torch.Tensor:
    total = emb.sum() * 0.0
    for learner in range(L):
        part = emb.sum() * 0.0
        for i in range(len(labels)):
            x = emb[i, learner * D : (learner + 1) * D]
            x = SCALE * x / x.norm()
            meta = int(groups[learner, labels[i]])

            def dist(z: int, x: torch.Tensor = x, learner: int = learner) -> torch.Tensor:
                p = proxies[learner, z]
                return ((x - SCALE * p / p.norm()) ** 2).sum()

            negatives = sum(torch.exp(-dist(z)) for z in range(D) if z != meta)
            part = part - torch.log(torch.exp(-dist(meta)) / negatives)
        total = total + part / len(labels)
    return total / L


def method(**overrides: object):
    return create_method("dreml", {"learners": L, "meta_classes": D, **overrides}, C, 64)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_reference_value_and_gradient(seed: int) -> None:
    torch.manual_seed(seed)
    loss = method().build_loss().double()
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(10, L * D, generator=g, dtype=torch.float64)
    labels = torch.randint(0, C, (10,), generator=g)
    e1, e2 = emb.clone().requires_grad_(True), emb.clone().requires_grad_(True)
    p2 = loss.proxies.detach().clone().requires_grad_(True)
    ours, ref = loss(e1, labels), reference(e2, labels, loss.groups, p2)
    ours.backward()
    ref.backward()
    assert math.isclose(float(ours.detach()), float(ref.detach()), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad)
    torch.testing.assert_close(loss.proxies.grad, p2.grad)


def test_grouping_is_balanced_and_deterministic_given_the_seed() -> None:
    draws = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        draws.append(method(learners=5).build_loss().groups)
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    groups = draws[0]
    assert groups.shape == (5, C)
    for row in groups:
        sizes = torch.bincount(row, minlength=D)
        assert sizes.min() >= C // D and sizes.max() <= -(-C // D)
    assert len({tuple(row.tolist()) for row in groups}) > 1  # learners see different groupings


def test_ensemble_model_concatenates_independent_learners() -> None:
    protocol = load_protocol("glyphs-mini")
    m = method()
    model = init_model(protocol, m, in_channels=1, seed=0)  # the trainer's hook
    assert isinstance(model, Ensemble) and len(model.learners) == L
    model.eval()
    x = torch.randn(5, 1, 32, 32)
    out = model(x)
    assert out.shape == (5, L * D)
    parts = [learner(x) for learner in model.learners]
    torch.testing.assert_close(out, torch.cat(parts, dim=1))
    torch.testing.assert_close(out.view(5, L, D).norm(dim=2), torch.ones(5, L))  # normalize: true
    heads = [learner.head.weight for learner in model.learners]
    assert not torch.equal(heads[0], heads[1])  # separately initialised


def test_learners_do_not_interact() -> None:
    """Changing learner 1's embedding leaves the gradient on learner 0's chunk unchanged."""
    loss = method().build_loss().double()
    labels = torch.tensor([0, 1, 2, 3, 4, 5])
    emb = torch.randn(6, L * D, dtype=torch.float64)
    moved = emb.clone()
    moved[:, D : 2 * D] += torch.randn(6, D, dtype=torch.float64)
    grads: list[torch.Tensor] = []
    for e in (emb, moved):
        e = e.clone().requires_grad_(True)
        loss(e, labels).backward()
        assert e.grad is not None
        grads.append(e.grad)
    torch.testing.assert_close(grads[0][:, :D], grads[1][:, :D])
    assert not torch.allclose(grads[0][:, D : 2 * D], grads[1][:, D : 2 * D])


@pytest.mark.parametrize("meta_classes", [1, C + 1])
def test_bad_meta_class_counts_are_clear_errors(meta_classes: int) -> None:
    with pytest.raises(DmlbenchError, match="meta_classes"):
        method(meta_classes=meta_classes).build_loss()


def test_embedding_of_the_wrong_width_is_a_clear_error() -> None:
    with pytest.raises(DmlbenchError, match="L·D"):
        method().build_loss()(torch.randn(4, 64), torch.tensor([0, 1, 2, 3]))


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    loss = method().build_loss().double()
    emb = torch.randn(len(labels), L * D, dtype=torch.float64, requires_grad=True)
    value = loss(emb, labels)
    value.backward()
    assert emb.grad is not None
    assert torch.isfinite(value) and torch.isfinite(emb.grad).all()
    torch.testing.assert_close(
        value.detach(), reference(emb.detach(), labels, loss.groups, loss.proxies.detach())
    )
