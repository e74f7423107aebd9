"""The adapter between pytorch-metric-learning's losses and dmlbench's, shared by the ``pml:``
resolver (:mod:`dmlbench.methods.pml`) and the catalogue (:mod:`dmlbench.methods._catalogue`).

Both build a library loss from a protocol (its classes and embedding width fill the
constructor arguments the protocol determines), wrap it in the trainer's loss signature, and
cite its paper from one table: the catalogue entries add theirs to :data:`CITATIONS` when
they register, and ``pml:`` names read it.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

#: Constructor arguments the protocol determines, and which attribute of the method fills them.
PROTOCOL_ARGS = {
    "num_classes": "num_classes",
    "embedding_size": "embedding_size",
    "descriptors_dim": "embedding_size",
}

#: library class name -> the paper it implements (catalogue entries add theirs on registration).
CITATIONS = {
    "AngularLoss": "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017",
    "ContrastiveLoss": "Hadsell, Chopra & LeCun, Dimensionality Reduction by Learning an "
    "Invariant Mapping, CVPR 2006",
    "LiftedStructureLoss": "Oh Song et al., Deep Metric Learning via Lifted Structured "
    "Feature Embedding, CVPR 2016",
    "MarginLoss": "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017",
    "MultiSimilarityLoss": "Wang et al., Multi-Similarity Loss with General Pair Weighting "
    "for Deep Metric Learning, CVPR 2019",
    "NPairsLoss": "Sohn, Improved Deep Metric Learning with Multi-class N-pair Loss "
    "Objective, NeurIPS 2016",
    "NormalizedSoftmaxLoss": "Zhai & Wu, Classification is a Strong Baseline for Deep Metric "
    "Learning, BMVC 2019",
    "ProxyNCALoss": "Movshovitz-Attias et al., No Fuss Distance Metric Learning using "
    "Proxies, ICCV 2017",
    "TripletMarginLoss": "Weinberger & Saul, Distance Metric Learning for Large Margin "
    "Nearest Neighbor Classification, JMLR 2009",
}


def init_params(cls: type) -> list[inspect.Parameter]:
    """Constructor parameters, following ``*args`` to the base class (``CosFaceLoss`` passes
    ``num_classes, embedding_size`` through ``*args`` to ``LargeMarginSoftmaxLoss``)."""
    own = list(inspect.signature(cls).parameters.values())
    out = [p for p in own if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in own):
        base = next(b for b in cls.__mro__[1:] if "__init__" in vars(b))
        names = {p.name for p in out}
        out += [p for p in init_params(base) if p.name not in names and p.default is p.empty]
    return out


def protocol_kwargs(cls: type, num_classes: int, embedding_size: int) -> dict[str, int]:
    """The constructor arguments a protocol determines, by parameter name."""
    values = {"num_classes": num_classes, "embedding_size": embedding_size}
    params = {p.name: p for p in init_params(cls)}
    return {
        n: values[attr]
        for n, attr in PROTOCOL_ARGS.items()
        if n in params and params[n].default is inspect.Parameter.empty
    }


class PMLLoss(nn.Module):
    """``loss(embeddings, labels, miner(embeddings, labels))``: the trainer's loss signature.

    The miner (if any) is a submodule too, so the loss's parameters (proxies) reach the
    optimizer through :meth:`Method.param_groups` and nothing else does.
    """

    def __init__(self, loss: nn.Module, miner: nn.Module | None = None) -> None:
        super().__init__()
        self.loss = loss
        self.miner = miner

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        tuples = self.miner(embeddings, labels) if self.miner is not None else None
        out: torch.Tensor = self.loss(embeddings, labels, tuples)
        return out
