"""Lifted structured embedding (Oh Song et al., CVPR 2016; seed 002 eq. 2).

For every positive pair (i, j) of the batch, with Euclidean (non-squared) distances d and
margin M::

    J_ij = log( Σ_{k: y_k ≠ y_i} exp(M − d_ik) + Σ_{l: y_l ≠ y_j} exp(M − d_jl) ) + d_ij
    L    = 1 / (2|P|) · Σ_{(i,j) ∈ P} [J_ij]₊²

with P the unordered positive pairs: the negatives of *both* ends of a pair enter one smooth
log-sum-exp, the hinge is squared, and the mean carries the paper's factor 1/2.

pytorch-metric-learning's ``LiftedStructureLoss`` is exactly this (checked against the slow
reference and the formula in tests/methods/test_lifted.py): it visits each pair in both orders
(J_ij = J_ji), halves each term and takes the mean over ordered pairs, which is 1/(2|P|) Σ over
unordered pairs. One setting differs from its defaults: its distance is told *not* to
L2-normalise (it does by default), so that the loss is the paper's on whatever embeddings it
gets; under a protocol with ``normalize: true`` the embeddings reaching it are unit vectors
anyway. Distances are ``torch.cdist``, whose gradient at a zero distance is 0 (finite for
all-equal embeddings).

Degenerate batches: no positive pair (all singletons) or no negative pair (one class) give a
zero loss that keeps the graph. Oh Song et al. also add hard neighbours of random positive
pairs to the batch; that sampling is not part of the loss, and the P×K sampler is used instead
(Fehervari et al. train on plain random batches). The "generalized" form (seed 003 eq. 9,
Hermans et al.) is a different loss and is not what this method registers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from pytorch_metric_learning import distances, losses
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method


class LiftedStructure(nn.Module):
    def __init__(self, margin: float) -> None:
        super().__init__()
        dist = distances.LpDistance(normalize_embeddings=False, p=2, power=1)
        self.loss = losses.LiftedStructureLoss(neg_margin=margin, pos_margin=0.0, distance=dist)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(embeddings, labels)


@register_method("lifted")
class Lifted(Method):
    paper = (
        "Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding, CVPR 2016"
    )
    defaults: ClassVar[HParams] = {"margin": 1.0}
    defaults_source = "seed 002 eq. 2; M = 1.0 as in Fehervari et al.'s code (LiftedStructLoss)"
    samples_per_class = 4

    def build_loss(self) -> nn.Module:
        return LiftedStructure(float(self.hparams["margin"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.2, 2.0),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 8]),
        }
