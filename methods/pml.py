"""``pml:<LossName>[+<MinerName>]``: any pytorch-metric-learning loss, built on demand.

A researcher asking "how does loss X compare under the same budget?" should not have to write a
plugin class for each of the ~35 losses pytorch-metric-learning ships. This module registers a
resolver on the method registry: ``pml:CircleLoss`` or ``pml:TripletMarginLoss+
MultiSimilarityMiner`` becomes a :class:`~dmlbench.methods.Method` subclass the first time the
name is asked for, so it works wherever a method name works (``run --method``, protocol files,
search, records, reports) while ``list()`` and ``--method all`` keep meaning the curated set.

How a loss is adapted (as in Musgrave et al., A Metric Learning Reality Check, ECCV 2020, which
compares the library's losses under one training setup):

- Constructor arguments the protocol determines (``num_classes``, ``embedding_size``,
  ``descriptors_dim``) are filled in by inspecting the signature; every other argument keeps
  the library's documented default and is exposed as a hyper-parameter (scalars only), so
  ``--hparam pml:CircleLoss.m=0.25`` works. A miner's arguments are prefixed ``miner_``.
- A loss with learnable parameters (proxies, class weights) gets ``proxy_lr_mult`` (the
  name every method uses): its parameters learn at ``lr × proxy_lr_mult``. The library states
  no multiplier; the default is 100, the catalogue's (Proxy-Anchor's and SoftTriple's authors'
  code), because at the DML protocols' backbone rate (Adam, 1e-5) a 1× rate leaves proxies
  near their initialisation.
- The search space scales each positive float default by ×/÷ 2 (log-uniform), the learning-rate
  multiplier over [1, 1000] and the samples per class over {2, 4, 8}.
- Losses that cannot map (embeddings, labels) to a scalar are refused in one line naming why;
  anything else is probed once on a small batch, so an incompatibility surfaces at the command
  line, not hours into a search.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import torch
from pytorch_metric_learning import losses, miners
from torch import nn

from dmlbench.errors import DmlbenchError, RegistryError, did_you_mean
from dmlbench.methods._base import LR_MULT_KEY, METHODS, HParams, Method
from dmlbench.methods._library import (
    CITATIONS,
    PROTOCOL_ARGS,
    PMLLoss,
    init_params,
    protocol_kwargs,
)

PREFIX = "pml:"
MINER_PREFIX = "miner_"
#: Classes of the ``losses`` namespace that cannot be used here, and why.
REFUSED_LOSSES = {
    "BaseMetricLossFunction": "an abstract base class, not a loss",
    "GenericPairLoss": "an abstract base class, not a loss",
    "BaseLossWrapper": "an abstract wrapper, not a loss",
    "EmbeddingRegularizerMixin": "a regulariser mixin, not a loss",
    "WeightRegularizerMixin": "a regulariser mixin, not a loss",
    "MultipleLosses": "a combinator of several losses; register a method that combines them",
    "SelfSupervisedLoss": "self-supervised: needs two augmented views (embeddings, ref_emb) "
    "of the same images instead of class labels",
    "VICRegLoss": "self-supervised: needs a second augmented view (ref_emb) per image and "
    "takes no labels",
    "CrossBatchMemory": "a cross-batch wrapper: it keeps a memory queue of past embeddings "
    "around another loss and needs that loss as an argument",
    "DynamicSoftMarginLoss": "its running histogram keeps the previous batch's graph, so the "
    "second training step fails (library bug); use the catalogue's 'dynamic-soft-margin'",
    "InstanceLoss": "with class labels it uses the class index as a batch column, so a sample's "
    "target is whichever sample sits at that position (library bug: the loss depends on batch "
    "order); the paper's instance loss is a softmax classifier, see 'proxy-softmax'",
    "SmoothAPLoss": "it groups the batch by samples per class instead of by class, so its "
    "positives are wrong unless a batch has as many classes as samples per class (library "
    "bug); use the catalogue's 'smooth-ap'",
    "ManifoldLoss": "takes no class labels (it assigns samples to proxies at random or from an "
    "indices tuple); use the catalogue's 'manifold', which assigns each class its proxy",
}
#: Papers of library losses outside the catalogue (the catalogue's entries cite the others).
REFUSED_MINERS = {
    "BaseMiner": "an abstract base class, not a miner",
    "EmbeddingsAlreadyPackagedAsTriplets": "needs batches packaged as (anchor, positive, "
    "negative) triplets, not class-balanced batches",
}


def _classes(module: Any, base: type) -> dict[str, type]:
    return {
        n: c
        for n, c in vars(module).items()
        if inspect.isclass(c) and issubclass(c, base) and not n.startswith("_")
    }


def loss_classes() -> dict[str, type]:
    """Every class of ``pytorch_metric_learning.losses`` (usable or not)."""
    return _classes(losses, nn.Module)


def miner_classes() -> dict[str, type]:
    return _classes(miners, nn.Module)


def _lookup(kind: str, name: str, table: dict[str, type], refused: dict[str, str]) -> type:
    if name not in table:
        hint = did_you_mean(name, sorted(set(table) - set(refused)))
        raise RegistryError(f"unknown pytorch-metric-learning {kind} '{name}'{hint}")
    if name in refused:
        raise DmlbenchError(f"pml {kind} {name} cannot be used here: {refused[name]}")
    return table[name]


def _scalar_defaults(cls: type, what: str) -> HParams:
    """Keyword defaults that are scalars; a required argument the protocol cannot fill is an
    error (the library documents no value for it)."""
    defaults: HParams = {}
    missing = []
    for p in init_params(cls):
        if p.name in PROTOCOL_ARGS:
            continue
        if p.default is p.empty:
            missing.append(p.name)
        elif isinstance(p.default, (bool, int, float, str)):
            defaults[p.name] = p.default
    if missing:
        raise DmlbenchError(
            f"pml {what} {cls.__name__} cannot be used here: the library documents no default "
            f"for {', '.join(missing)}; register a method that sets them"
        )
    return defaults


class PMLMethod(Method):
    """Base of the ``pml:`` methods; :func:`resolve` fills in the class attributes."""

    loss_cls: type = nn.Module
    miner_cls: type | None = None
    loss_keys: tuple[str, ...] = ()
    miner_keys: tuple[str, ...] = ()

    def build_loss(self) -> nn.Module:
        h = self.hparams
        kwargs = {k: h[k] for k in self.loss_keys}
        loss = self.loss_cls(
            **protocol_kwargs(self.loss_cls, self.num_classes, self.embedding_size), **kwargs
        )
        miner = None
        if self.miner_cls is not None:
            miner = self.miner_cls(**{k: h[MINER_PREFIX + k] for k in self.miner_keys})
        return PMLLoss(loss, miner)

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        out: HParams = {}
        for key, value in cls.defaults.items():
            if key == LR_MULT_KEY:
                out[key] = trial.suggest_float(key, 1.0, 1000.0, log=True)
            elif isinstance(value, float) and value > 0:
                out[key] = trial.suggest_float(key, value / 2, value * 2, log=True)
        out["samples_per_class"] = trial.suggest_categorical("samples_per_class", [2, 4, 8])
        return out


def _probe(method: Method, name: str) -> None:
    """Run the loss once on a small batch (4 classes × 4) without touching the global RNG."""
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # library deprecation noise, not the user's concern
        torch.manual_seed(0)
        try:
            loss_fn = method.build_loss()
            labels = torch.arange(4).repeat_interleave(4) % max(method.num_classes, 1)
            emb = nn.functional.normalize(torch.randn(16, method.embedding_size), dim=1)
            emb.requires_grad_(True)
            value = loss_fn(emb, labels)
            ok = isinstance(value, torch.Tensor) and value.numel() == 1
        except (ValueError, TypeError, AssertionError, RuntimeError, IndexError) as err:
            why = " ".join(str(err).split()) or type(err).__name__
            raise DmlbenchError(f"{name} cannot be used here: {why}") from None
    if not ok:
        raise DmlbenchError(f"{name} cannot be used here: it does not return a scalar")


def resolve(name: str) -> type[Method]:
    """Build the method class of ``pml:<Loss>[+<Miner>]`` (raises one-line errors)."""

    spec = name[len(PREFIX) :]
    loss_name, plus, miner_name = spec.partition("+")
    if not loss_name or (plus and not miner_name):
        raise DmlbenchError(f"method '{name}': expected pml:<LossName> or pml:<Loss>+<Miner>")
    loss_cls = _lookup("loss", loss_name, loss_classes(), REFUSED_LOSSES)
    defaults = _scalar_defaults(loss_cls, "loss")
    miner_cls = None
    miner_defaults: HParams = {}
    if miner_name:
        miner_cls = _lookup("miner", miner_name, miner_classes(), REFUSED_MINERS)
        miner_defaults = _scalar_defaults(miner_cls, "miner")
    try:
        with torch.random.fork_rng(devices=[]):
            sample = loss_cls(**protocol_kwargs(loss_cls, 4, 4))
    except (ValueError, TypeError, AssertionError) as err:
        raise DmlbenchError(f"{name} cannot be used here: {err}") from None
    learnable = any(p.requires_grad for p in sample.parameters())
    all_defaults: HParams = {**defaults, **{MINER_PREFIX + k: v for k, v in miner_defaults.items()}}
    if learnable:
        all_defaults[LR_MULT_KEY] = 100.0
    cited = CITATIONS.get(loss_name)
    attrs: dict[str, Any] = {
        "name": name,
        "paper": f"{cited or loss_name}, via pytorch-metric-learning {loss_name}"
        + (f" + {miner_name}" if miner_name else ""),
        "defaults": all_defaults,
        "defaults_source": "pytorch-metric-learning defaults (its documentation); "
        + (
            f"{LR_MULT_KEY} 100: the library states no learning-rate multiplier; 100 as "
            "Proxy-Anchor's and SoftTriple's authors' code train proxies"
            if learnable
            else "no learnable loss parameters"
        ),
        "lr_mult_key": LR_MULT_KEY if learnable else None,
        "loss_cls": loss_cls,
        "miner_cls": miner_cls,
        "loss_keys": tuple(defaults),
        "miner_keys": tuple(miner_defaults),
        "__doc__": f"pytorch-metric-learning's {spec} with its documented defaults.",
    }
    cls = type(f"PML_{loss_name}_{miner_name}", (PMLMethod,), attrs)
    _probe(cls(None, num_classes=8, embedding_size=16), name)
    return cls


METHODS.add_resolver(PREFIX, resolve)


def list_pml(pattern: str = "pml:*") -> list[tuple[str, str | None]]:
    """``(name, None)`` for each library loss that resolves, ``(name, why)`` for the others."""
    from dmlbench.errors import name_matches

    out: list[tuple[str, str | None]] = []
    for loss_name in sorted(loss_classes()):
        name = PREFIX + loss_name
        if not name_matches(name, pattern):
            continue
        try:
            METHODS.get(name)
        except DmlbenchError as err:
            out.append((name, str(err).split(": ", 1)[-1]))
        else:
            out.append((name, None))
    return out
