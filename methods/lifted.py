"""Lifted structured embedding (Oh Song et al., CVPR 2016, eq. 4; Fehervari et al., arXiv 2019,
eq. 2).

For every positive pair (i, j) of the batch, with Euclidean (non-squared) distances d and
margin M::

    J_ij = log( Σ_{k: y_k ≠ y_i} exp(M − d_ik) + Σ_{l: y_l ≠ y_j} exp(M − d_jl) ) + d_ij
    L    = 1 / (2|P|) · Σ_{(i,j) ∈ P} [J_ij]₊²

with P the unordered positive pairs: the negatives of *both* ends of a pair enter one smooth
log-sum-exp, the hinge is squared, and the mean carries the paper's factor 1/2.

Why B × B and not pytorch-metric-learning: its ``LiftedStructureLoss`` computes exactly this
(the tests compare the two), but it builds, for every positive pair, a row over *all* negative
pairs of the batch (|P| × |N|, 10⁷ entries at 180 images), which made one step cost ≈ 0.7 s.
The two sums inside the log only depend on i and on j separately, so with
``s_i = log Σ_{k: y_k ≠ y_i} exp(M − d_ik)`` (one masked log-sum-exp per row),
``J_ij = logaddexp(s_i, s_j) + d_ij`` for all pairs at once: O(B²) time and memory. The mean
over ordered pairs of [J]₊²/2 equals the 1/(2|P|) sum over unordered pairs, as J is symmetric.

Distances are ``torch.cdist`` as pytorch-metric-learning's ``LpDistance`` computes them
(embeddings not re-normalised: the loss is the paper's on whatever it gets; under a protocol
with ``normalize: true`` they are unit vectors anyway), so values equal the wrapper's this
method used before to float rounding; its gradient at a zero distance is 0 (finite for
all-equal embeddings).

Degenerate batches: no positive pair (all singletons) or no negative pair (one class) give a
zero loss that keeps the graph. Oh Song et al. also add hard neighbours of random positive
pairs to the batch; that sampling is not part of the loss, and the P×K sampler is used instead
(Fehervari et al. train on plain random batches). The "generalized" form (Hermans et al.,
arXiv 2017, §2) is a different loss and is not what this method registers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, zero_loss


class LiftedStructure(nn.Module):
    """The smooth lifted structure loss on a B × B distance matrix (see the module docstring)."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pos, neg = label_masks(labels)
        if not pos.any() or not neg.any():
            return zero_loss(embeddings)
        d = torch.cdist(embeddings, embeddings)
        s = (self.margin - d).masked_fill(~neg, float("-inf")).logsumexp(dim=1)
        big_j = torch.logaddexp(s[:, None], s[None, :]) + d
        return torch.relu(big_j[pos]).pow(2).mean() / 2


@register_method("lifted")
class Lifted(Method):
    paper = (
        "Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding, CVPR 2016"
    )
    defaults: ClassVar[HParams] = {"margin": 1.0}
    defaults_source = (
        "Fehervari et al. 2019 eq. 2; M = 1.0 as in Fehervari et al.'s code (LiftedStructLoss)"
    )
    samples_per_class = 4

    def build_loss(self) -> nn.Module:
        return LiftedStructure(float(self.hparams["margin"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.2, 2.0),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 8]),
        }
