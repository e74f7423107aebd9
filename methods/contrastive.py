"""Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006; Wang et al.'s unified-view preprint eq. 5).

Over every pair (i, j), i < j, of the batch with Euclidean distance D::

    L = mean over pairs of  y · D² / 2  +  (1 − y) · [m − D]₊² / 2

with y = 1 for a same-class pair. pytorch-metric-learning's ``ContrastiveLoss`` is not this
formula (its terms are ``[D − m_pos]₊`` and ``[m_neg − D]₊`` unsquared, averaged over the
non-zero terms of each kind), so it is written here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import pairwise_distances, zero_loss


class ContrastiveLoss(nn.Module):
    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = len(labels)
        if n < 2:
            return zero_loss(embeddings)
        d = pairwise_distances(embeddings)
        iu = torch.triu_indices(n, n, offset=1, device=embeddings.device)
        dij = d[iu[0], iu[1]]
        same = (labels[iu[0]] == labels[iu[1]]).to(d.dtype)
        loss = same * dij.pow(2) + (1.0 - same) * torch.relu(self.margin - dij).pow(2)
        return 0.5 * loss.mean()


@register_method("contrastive")
class Contrastive(Method):
    paper = "Hadsell, Chopra & LeCun, CVPR 2006"
    defaults: HParams = {"margin": 1.0}
    defaults_source = "Hadsell et al. 2006 eq. 4 (margin m; 1.0 on the unit sphere)"
    samples_per_class = 4

    def build_loss(self) -> nn.Module:
        return ContrastiveLoss(float(self.hparams["margin"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.2, 2.0),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 8]),
        }
