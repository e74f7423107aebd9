"""Triplet loss with semi-hard negative mining (Schroff et al., "FaceNet", CVPR 2015).

For every anchor-positive pair (a, p) in the batch, the negative is the closest one that is
still farther from the anchor than the positive (``d(a,n) > d(a,p)``, "semi-hard"); when no
negative is farther, the farthest negative is used, as in the reference TensorFlow
implementation (``tf.contrib.losses.metric_learning.triplet_semihard_loss``). The loss is
``mean over (a, p) of [d(a,p) − d(a,n) + margin]₊`` with squared Euclidean distances, as in
FaceNet eq. 1.

Why not pytorch-metric-learning: its ``TripletMarginMiner(type_of_triplets="semihard")``
keeps *every* semi-hard triplet and averages over them, which is a different estimator from
FaceNet's one negative per pair.

Cost: the choice of negative is a search in each anchor's sorted negative distances (see
:func:`semihard_negatives`), O(B² log B) time and O(B²) memory; only the distances of the
chosen triplets enter the graph.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, pairwise_sq_distances, zero_loss


def semihard_negatives(d: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Index n(a, p) of the chosen negative for every pair (a, p), shape (B, B).

    Each row's negative distances are sorted once (non-negatives last, as +inf); the
    semi-hard negative of (a, p) is the first sorted entry strictly greater than d(a, p),
    found by binary search, and the farthest negative when there is none. O(B² log B)
    instead of the (B, B, B) comparison a direct transcription of the rule costs.
    """
    sorted_d, order = d.masked_fill(~neg, float("inf")).sort(dim=1)
    count = neg.sum(dim=1, keepdim=True)
    first_farther = torch.searchsorted(sorted_d, d, right=True)
    slot = torch.where(first_farther < count, first_farther, count - 1).clamp_min(0)
    return order.gather(1, slot)


class SemiHardTripletLoss(nn.Module):
    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        d = pairwise_sq_distances(embeddings)
        pos, neg = label_masks(labels)
        valid = pos & neg.any(dim=1, keepdim=True)
        if not valid.any():
            return zero_loss(embeddings)
        chosen = d.gather(1, semihard_negatives(d.detach(), neg))
        losses = torch.relu(d - chosen + self.margin)
        return losses[valid].mean()


@register_method("triplet-semihard")
class TripletSemiHard(Method):
    paper = "Schroff et al., FaceNet, CVPR 2015"
    defaults: HParams = {"margin": 0.2}
    defaults_source = "Schroff et al. 2015, §3 (margin α = 0.2)"
    samples_per_class = 4

    def build_loss(self) -> nn.Module:
        return SemiHardTripletLoss(float(self.hparams["margin"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.01, 1.0, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 8]),
        }
