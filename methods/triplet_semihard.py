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

Cost: only the P = B·(K − 1) anchor-positive pairs of a P×K batch need a negative, so the
search runs over a (P, B) slice of the B × B distance matrix (one row per pair, masked
min / max): O(P·B) = O(K·B²) time and memory, instead of the (B, B, B) comparison over every
(a, p, n) that a direct transcription costs. The choice is made without autograd and only
the chosen d(a, n*) enter the graph (at exactly tied negative distances the first negative
gets the gradient, as in the loop reference of the tests; the value is the same).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, pairwise_sq_distances, zero_loss


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
        a, p = torch.nonzero(valid, as_tuple=True)  # row-major: the order of d[valid]
        d_ap = d[a, p]
        with torch.no_grad():  # the choice is discrete; only d(a, n*) enters the graph
            n = semihard_negatives(d[a], neg[a], d_ap)
        return torch.relu(d_ap - d[a, n] + self.margin).mean()


def semihard_negatives(
    d_an: torch.Tensor, neg_an: torch.Tensor, d_ap: torch.Tensor
) -> torch.Tensor:
    """Index n* of each pair's negative, from the anchors' distance rows ``d_an`` (P, B), their
    negative masks and the pairs' d(a, p) (P,): the closest negative farther than the
    positive, else the farthest negative; the first such index on ties."""
    inf = torch.tensor(float("inf"), dtype=d_an.dtype, device=d_an.device)
    farther = neg_an & (d_an > d_ap[:, None])
    semihard = torch.where(farther, d_an, inf).argmin(dim=1)
    farthest = torch.where(neg_an, d_an, -inf).argmax(dim=1)
    return torch.where(farther.any(dim=1), semihard, farthest)


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
