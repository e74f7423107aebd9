"""Triplet loss with dense triplet mining (Kim et al., CVPR 2019; Kim et al. 2019 eq. 10-11): the
paper's ``L(Triplet)+M(Dense)`` baseline.

The minibatch is the one log-ratio uses (anchor first, its k label-nearest neighbours, random
others), and so are the triplets: every (a, i, j) with D(y_a, y_i) < D(y_a, y_j) (eq. 10).
Each costs

    ℓ(a, i, j) = [ D(f_a, f_i) − D(f_a, f_j) + δ ]₊                                  (eq. 11)

with D the *squared* Euclidean distance (eq. 1, and Kim et al.'s ``Dense_TripletLoss.py``)
and δ = 0.03 (§4.2), averaged uniformly over all triplets, zero-loss ones included (Kim et al.
weight every pair uniformly). Ties in label distance form no triplet; a batch without triplets
gives a zero loss that keeps the graph. The paper L2-normalises the embeddings for this loss;
here the protocol decides (``model.normalize``) for every method alike.

pytorch-metric-learning's ``TripletMarginLoss`` computes exactly eq. 11 once it is handed the
triplets (squared L2 without re-normalisation, ``MeanReducer``; its default reducer averages
over non-zero triplets only), and the tests check ours against it. We do not call it in
training: it builds the whole B×B distance matrix, while every dense triplet shares the one
anchor, so B−1 anchor distances suffice and the loss is one masked broadcast. With the mining
included that is faster than PML's arithmetic alone (``python -m dmlbench.perf.losses``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import MeanReducer
from torch import nn

from dmlbench.data.dense import AnchorDistances
from dmlbench.methods._base import HParams, register_method
from dmlbench.methods._common import zero_loss
from dmlbench.methods.log_ratio import ContinuousMethod, dense_triplets


def pml_triplet_loss(margin: float) -> TripletMarginLoss:
    """Eq. 1 / eq. 11 in pytorch-metric-learning: squared L2, no re-normalisation, plain mean."""
    return TripletMarginLoss(
        margin=margin,
        reducer=MeanReducer(),
        distance=LpDistance(p=2, power=2, normalize_embeddings=False),
    )


class DenseTripletLoss(nn.Module):
    def __init__(
        self, margin: float, anchor_distances: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> None:
        super().__init__()
        self.margin = margin
        self.anchor_distances = anchor_distances or AnchorDistances()

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        mask = dense_triplets(self.anchor_distances(labels))
        if not mask.any():
            return zero_loss(embeddings)
        d = (embeddings[1:] - embeddings[:1]).pow(2).sum(dim=1)  # D(f_a, f_i), eq. 1
        return (d[:, None] - d[None, :] + self.margin).clamp(min=0.0)[mask].mean()


@register_method("triplet-dense")
class TripletDense(ContinuousMethod):
    paper = "Kim et al., Deep Metric Learning Beyond Binary Supervision, CVPR 2019"
    defaults: HParams = {"margin": 0.03, "num_neighbours": 5}
    defaults_source = "Kim et al. 2019, §4.2 (dense triplet margin δ = 0.03, k = 5)"

    def build_loss(self) -> nn.Module:
        return DenseTripletLoss(float(self.hparams["margin"]), self.anchor_distances)

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.005, 0.5, log=True),
            "num_neighbours": trial.suggest_int("num_neighbours", 1, 15),
        }
