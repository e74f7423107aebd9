"""prototypical against a per-query loop written from Fehervari et al. 2019 eq. 13 (Snell et al. 2017)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dmlbench.data.samplers import ClassBalancedBatchSampler
from dmlbench.errors import DmlbenchError
from dmlbench.methods import create_method
from tests.methods._batches import tensor_sum


def reference(emb: torch.Tensor, labels: torch.Tensor, n_support: int) -> torch.Tensor:
    n = len(labels)
    classes = sorted({int(v) for v in labels})
    members = {c: [i for i in range(n) if int(labels[i]) == c] for c in classes}
    support = {c: members[c][:n_support] for c in classes}  # first images of each class
    queries = [i for c in classes for i in members[c][n_support:]]
    if not queries:
        return emb.sum() * 0.0
    protos = {c: sum(emb[i] for i in support[c]) / len(support[c]) for c in classes}
    total = emb.sum() * 0.0
    for q in queries:
        neg_d = {c: -((emb[q] - protos[c]) ** 2).sum() for c in classes}  # squared Euclidean
        log_z = torch.log(tensor_sum(torch.exp(v) for v in neg_d.values()))
        total = total - (neg_d[int(labels[q])] - log_z)  # eq. 13
    return total / len(queries)


def loss_fn(n_support: int = 5, samples_per_class: int = 10) -> torch.nn.Module:
    hp = {"n_support": n_support, "samples_per_class": samples_per_class}
    return create_method("prototypical", hp, num_classes=10, embedding_size=8).build_loss()


def check(emb: torch.Tensor, labels: torch.Tensor, n_support: int) -> None:
    e1 = emb.clone().requires_grad_(True)
    e2 = emb.clone().requires_grad_(True)
    ours = loss_fn(n_support, max(n_support + 1, 10))(e1, labels)
    ref = reference(e2, labels, n_support)
    ours.backward()
    ref.backward()
    assert ref.item() > 0
    assert math.isclose(ours.item(), ref.item(), rel_tol=1e-9)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize(("seed", "n_support"), [(0, 5), (1, 5), (2, 2), (3, 1)])
def test_matches_reference_on_pk_batches(seed: int, n_support: int) -> None:
    # P×K batch as the sampler yields it (classes contiguous), then shuffled: the split is by
    # position within each class, wherever the class's images sit in the batch.
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(4).repeat_interleave(10)
    if seed % 2:
        labels = labels[torch.randperm(40, generator=g)]
    check(torch.randn(40, 8, generator=g, dtype=torch.float64), labels, n_support)


def test_uneven_classes() -> None:
    # Classes with 2, 3, 6 and 7 images and n_support = 3: the first two only give prototypes.
    g = torch.Generator().manual_seed(5)
    labels = torch.tensor([0] * 2 + [1] * 3 + [2] * 6 + [3] * 7)
    labels = labels[torch.randperm(len(labels), generator=g)]
    check(torch.randn(len(labels), 8, generator=g, dtype=torch.float64), labels, 3)


def test_closer_prototypes_give_lower_loss() -> None:
    g = torch.Generator().manual_seed(2)
    labels = torch.arange(3).repeat_interleave(4)
    centres = 3.0 * torch.randn(3, 8, generator=g, dtype=torch.float64)
    noise = torch.randn(12, 8, generator=g, dtype=torch.float64)
    tight = loss_fn(2, 4)(centres[labels] + 0.1 * noise, labels).item()
    loose = loss_fn(2, 4)(centres[labels] + 6.0 * noise, labels).item()
    assert tight < 1e-3 < loose


def test_n_support_must_leave_queries() -> None:
    with pytest.raises(DmlbenchError, match="n_support"):
        create_method("prototypical", {"n_support": 4, "samples_per_class": 4}, 10, 8)
    method = create_method("prototypical", None, num_classes=10, embedding_size=8)
    split = type("S", (), {"labels": np.repeat(np.arange(20), 12)})()
    with pytest.raises(DmlbenchError, match="n_support"):
        method.batch_sampler(split, 60, 5, seed=0)  # a protocol forcing 5 images per class
    assert isinstance(method.batch_sampler(split, 60, None, seed=0), ClassBalancedBatchSampler)


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(8, dtype=torch.long), torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 3, 4, 5])],
    ids=["one-class", "all-singletons", "some-singletons"],
)
def test_degenerate_batches_match_the_reference(labels: torch.Tensor) -> None:
    emb = torch.randn(8, 8, requires_grad=True)
    loss = loss_fn(1, 2)(emb, labels)
    loss.backward()
    assert torch.isfinite(loss)
    assert emb.grad is not None
    assert torch.isfinite(emb.grad).all()
    torch.testing.assert_close(loss, reference(emb.detach(), labels, 1).to(loss.dtype))


def test_all_equal_embeddings_are_finite() -> None:
    emb = torch.ones(8, 8, requires_grad=True)
    loss = loss_fn(1, 2)(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    loss.backward()
    assert emb.grad is not None
    assert torch.isfinite(loss) and torch.isfinite(emb.grad).all()
    assert math.isclose(loss.item(), math.log(4), rel_tol=1e-6)  # uniform over 4 prototypes


def test_a_protocol_with_two_images_per_class_gets_one_shot_and_says_so() -> None:
    """emoji-mini samples 2 images per class: the paper's half of them is 1 shot, not 5."""
    from dmlbench.methods import method_for
    from dmlbench.protocol import load_protocol

    two = load_protocol("emoji-mini")
    assert two.batch.samples_per_class == 2
    method = method_for(two, "prototypical", None, num_classes=10)
    assert method.hparams["n_support"] == 1  # the record takes method.hparams
    split = type("S", (), {"labels": np.repeat(np.arange(40), 3)})()
    assert isinstance(method.batch_sampler(split, 60, 2, seed=0), ClassBalancedBatchSampler)
    chosen = method_for(two, "prototypical", {"n_support": 1}, num_classes=10)
    assert chosen.hparams["n_support"] == 1
    assert chosen.hparams["samples_per_class"] == 2  # the protocol's, not the paper's 10
    with pytest.raises(DmlbenchError, match="n_support=3"):  # a given value is never changed
        method_for(two, "prototypical", {"n_support": 3}, num_classes=10)
    own = load_protocol("glyphs-mini")  # the method chooses its batch: the paper's 5 of 10
    assert own.batch.samples_per_class is None
    assert method_for(own, "prototypical", None, num_classes=10).hparams["n_support"] == 5


def test_the_search_offers_fewer_shots_than_the_protocols_images_per_class() -> None:
    import optuna

    from dmlbench.protocol import load_protocol
    from dmlbench.search.study import open_study
    from dmlbench.search.worker import ExactBatchTrial

    two = load_protocol("emoji-mini")
    study = open_study(two, "prototypical", optuna.storages.InMemoryStorage(), "s")
    shots = set()
    for _ in range(12):  # the first is the enqueued default, restated for 2 per class
        trial = study.ask()
        shots.add(_space(ExactBatchTrial(trial, 60, 2))["n_support"])
        study.tell(trial, 0.0)
    assert shots == {1}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(30):
        trial = study.ask()
        shots.add(_space(ExactBatchTrial(trial, 60))["n_support"])
        study.tell(trial, 0.0)
    assert shots == {1, 2, 3, 5}  # a protocol that lets the method choose: the paper's range


def _space(trial: object) -> dict[str, object]:
    from dmlbench.methods import METHODS

    return METHODS.get("prototypical").search_space(trial)
