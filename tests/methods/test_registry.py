"""Registry-wide checks: every registered method trains without NaN and learns a fixed batch.

Like timm's tests/test_models.py, this runs for every method in the registry, so a new method
is covered the moment it is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pytest
import torch

from dmlbench.data import DataSplits, load_data
from dmlbench.engine.train import init_model, train, training_targets
from dmlbench.methods import METHODS, create_method
from dmlbench.protocol import Protocol, builtin_names, load_protocol

PROTOCOL_FOR_KIND = {"class": "glyphs-mini", "continuous": "poses-mini"}
# Smaller settings where the paper default is a CPU-time problem, not a different formula:
# DREML's 12 networks become 2 (the ensemble code path is the same).
SMOKE_HPARAMS = {"dreml": {"learners": 2}}


@cache
def protocol_and_data(kind: str) -> tuple[Protocol, DataSplits]:
    name = PROTOCOL_FOR_KIND[kind]
    overrides = {"data.params.num_classes": 64} if kind == "class" else {}
    protocol = load_protocol(name).with_overrides(overrides) if overrides else load_protocol(name)
    return protocol, load_data(protocol)


def setup(name: str) -> tuple[Protocol, DataSplits, object]:
    kind = METHODS.get(name).label_kind
    if PROTOCOL_FOR_KIND[kind] not in builtin_names():
        pytest.skip(f"no {PROTOCOL_FOR_KIND[kind]} protocol")
    protocol, data = protocol_and_data(kind)
    method = create_method(
        name, SMOKE_HPARAMS.get(name), data.train.num_classes, protocol.model.embedding_size
    )
    return protocol, data, method


def test_at_least_the_foundation_methods_are_registered() -> None:
    assert {"triplet-semihard", "multi-similarity", "proxy-softmax", "contrastive"} <= set(METHODS)
    for name in METHODS:
        cls = METHODS.get(name)
        assert cls.paper and cls.defaults_source, name


def _own_methods() -> list[str]:
    """Methods with a module of their own; the catalogue's entries have the same two checks in
    tests/methods/test_catalogue.py."""
    from dmlbench.methods._catalogue import CatalogueMethod

    return [m for m in METHODS.list() if not issubclass(METHODS.get(m), CatalogueMethod)]


@pytest.mark.parametrize("name", _own_methods())
def test_two_training_steps_are_finite(name: str) -> None:
    protocol, data, method = setup(name)
    result = train(protocol, method, data.train, seed=0, max_steps=2, progress=False)
    assert result.steps == 2
    assert all(np.isfinite(p["loss"]) for p in result.curve)
    for p in result.model.parameters():
        assert torch.isfinite(p).all()


@pytest.mark.parametrize("name", _own_methods())
def test_loss_decreases_on_a_fixed_batch(name: str) -> None:
    protocol, data, method = setup(name)
    split = data.train
    torch.manual_seed(0)
    model = init_model(protocol, method, int(split.images[0].shape[0]), seed=0)
    loss_fn = method.build_loss()  # type: ignore[attr-defined]
    sampler = method.batch_sampler(split, protocol.batch.size, None, 0)  # type: ignore[attr-defined]
    indices = next(iter(sampler))
    x = torch.stack([split.images[i] for i in indices])
    y = training_targets(split)[indices]
    params = list(model.parameters()) + list(loss_fn.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    losses = []
    model.train()
    for _ in range(30):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all()
    assert np.mean(losses[-3:]) < losses[0], f"{name}: {losses[0]:.4f} -> {losses[-3:]}"


# Batches a sampler avoids but a small or unbalanced data set can give, as the labels of each
# image: for class labels one class (no negative), every image its own class (no positive pair)
# and singletons beside pairs; for continuous labels every label equal (no triplet), a batch of
# two, and a tie. Each under random, all-equal and all-zero embeddings (every distance 0, every
# cosine undefined). Finite loss and gradient for every method; the values where a paper
# defines one are in each method's own test file.
DEGENERATE_LABELS = {
    "class": {
        "one-class": torch.zeros(8, dtype=torch.long),
        "all-singletons": torch.arange(8),
        "some-singletons": torch.tensor([0, 0, 1, 1, 2, 3, 4, 5]),
    },
    "continuous": {
        "all-equal": torch.zeros(6, 2),
        "anchor-and-one": torch.zeros(2, 2),
        "tie": torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]]),
    },
}
DEGENERATE_EMBEDDINGS: dict[str, Callable[[int, int], torch.Tensor]] = {
    "random": lambda n, width: torch.randn(n, width, generator=torch.Generator().manual_seed(n)),
    "all-equal": lambda n, width: torch.ones(n, width),
    "zero": lambda n, width: torch.zeros(n, width),
}
# Hyperparameters a degenerate batch of 8 needs: a prototype of one image leaves a query per
# class of two (the default 5 support images would leave none).
DEGENERATE_HPARAMS = {**SMOKE_HPARAMS, "prototypical": {"n_support": 1}}


def _degenerate_cases() -> list[tuple[str, str, str]]:
    return [
        (name, labels, emb)
        for name in _own_methods()
        for labels in DEGENERATE_LABELS[METHODS.get(name).label_kind]
        for emb in DEGENERATE_EMBEDDINGS
    ]


@cache
def _embedding_width(name: str) -> int:
    """The width of the method's model output (DREML concatenates its learners')."""
    protocol, data, method = setup(name)
    image = data.train.images[0]
    model = init_model(protocol, method, int(image.shape[0]), seed=0)
    with torch.no_grad():
        return int(model.eval()(torch.stack([image, image])).shape[1])


@pytest.mark.parametrize(("name", "labels", "embeddings"), _degenerate_cases())
def test_degenerate_batches_give_a_finite_loss_and_gradient(
    name: str, labels: str, embeddings: str
) -> None:
    kind = METHODS.get(name).label_kind
    protocol, data, _ = setup(name)
    method = create_method(
        name,
        DEGENERATE_HPARAMS.get(name),
        data.train.num_classes,
        protocol.model.embedding_size,
    )
    y = DEGENERATE_LABELS[kind][labels]
    emb = DEGENERATE_EMBEDDINGS[embeddings](len(y), _embedding_width(name)).requires_grad_(True)
    loss = method.build_loss()(emb, y)
    loss.backward()
    assert torch.isfinite(loss), f"{name}: loss {loss.item()}"
    assert emb.grad is not None and torch.isfinite(emb.grad).all(), f"{name}: gradient"


def test_every_shipped_protocol_fills_its_batch_for_its_methods() -> None:
    """Each listed method trains on the protocol's exact batch size (no rounding down)."""
    for name in builtin_names():
        protocol = load_protocol(name)
        assert protocol.methods, f"{name} lists no methods: `dmlbench run --protocol {name}` fails"
        for method in protocol.methods:
            METHODS.get(method).check_batch(protocol.batch.size, protocol.batch.samples_per_class)


def test_check_batch_names_the_method_and_both_numbers() -> None:
    from dmlbench.errors import DmlbenchError

    margin = METHODS.get("margin")
    margin.check_batch(60, None)
    margin.check_batch(64, 4)  # the protocol's samples_per_class wins
    with pytest.raises(DmlbenchError, match=r"margin: batch.size 64 .* samples_per_class 5"):
        margin.check_batch(64, None)
    with pytest.raises(DmlbenchError, match="samples_per_class 7"):
        margin.check_batch(60, None, {"samples_per_class": 7})
    METHODS.get("log-ratio").check_batch(31, None)  # own sampler: exact by construction


def test_an_override_the_protocols_images_per_class_would_ignore_is_refused() -> None:
    from dmlbench.errors import DmlbenchError

    margin = METHODS.get("margin")
    margin.check_batch(60, 2, {"samples_per_class": 2})  # the same value: nothing is ignored
    with pytest.raises(DmlbenchError, match=r"samples_per_class 5 given, .* fixes .* at 2"):
        margin.check_batch(60, 2, {"samples_per_class": 5})


def test_a_record_names_the_images_per_class_its_batches_had() -> None:
    """Under a protocol that fixes them, the method's own default is not what trained."""
    from dmlbench.methods import method_for

    emoji, glyphs = load_protocol("emoji-mini"), load_protocol("glyphs-mini")
    assert emoji.batch.samples_per_class == 2 and glyphs.batch.samples_per_class is None
    binomial = METHODS.get("binomial")
    assert binomial.samples_per_class == 5
    assert method_for(emoji, "binomial", None, 10).hparams["samples_per_class"] == 2
    assert method_for(glyphs, "binomial", None, 10).hparams["samples_per_class"] == 5
    assert binomial.resolved_hparams({"samples_per_class": 4}, None)["samples_per_class"] == 4


def test_a_protocols_fixed_images_per_class_is_no_dimension_of_the_search() -> None:
    import optuna

    from dmlbench.search.study import open_study
    from dmlbench.search.worker import ExactBatchTrial

    emoji = load_protocol("emoji-mini")
    study = open_study(emoji, "binomial", optuna.storages.InMemoryStorage(), "s")
    for _ in range(6):  # the enqueued default, then the sampler's own draws
        trial = study.ask()
        hp = METHODS.get("binomial").search_space(ExactBatchTrial(trial, 60, 2))
        assert hp["samples_per_class"] == 2
        assert "samples_per_class" not in trial.params
        study.tell(trial, 0.0)
    assert len({t.params["alpha"] for t in study.trials}) == 6  # the other dimensions are searched


def test_search_drops_samples_per_class_choices_that_cannot_fill_the_batch() -> None:
    import optuna

    from dmlbench.search.worker import ExactBatchTrial

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(40):
        trial = study.ask()
        hp = METHODS.get("structured-clustering").search_space(ExactBatchTrial(trial, 60))
        seen.add(hp["samples_per_class"])
        study.tell(trial, 0.0)
    assert seen == {2, 4, 5}  # 8 and 16 do not divide 60
