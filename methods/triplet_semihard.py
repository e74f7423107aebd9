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
        # d_an[a, p, n] = d(a, n), broadcast against d_ap[a, p].
        d_ap = d[:, :, None]
        d_an = d[:, None, :]
        neg3 = neg[:, None, :]
        farther = neg3 & (d_an > d_ap)
        inf = torch.tensor(float("inf"), device=d.device, dtype=d.dtype)
        outside = torch.where(farther, d_an, inf).amin(dim=2)
        inside = torch.where(neg3, d_an, -inf).amax(dim=2)
        chosen = torch.where(farther.any(dim=2), outside, inside)
        valid = pos & neg.any(dim=1, keepdim=True)
        if not valid.any():
            return zero_loss(embeddings)
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
