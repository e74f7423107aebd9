"""Triplet loss on binary-quantised continuous labels (Kim et al., CVPR 2019, §4.1): the
paper's ``L(Triplet)+M(Binary)`` baseline.

Continuous labels are quantised by nearest-neighbour search: the ``positive_pool`` (30)
label-nearest neighbours of an anchor are its positives, everything else its negatives. A
minibatch (:class:`dmlbench.data.dense.BinaryNeighbourSampler`, after Kim et al.'s
``Naive_PairDataset``) is [anchor, ``positives_per_batch`` (5) positives drawn from the pool,
negatives drawn from the rest]; the loss reads that layout (row 0 the anchor, rows
1..P the positives, the others negatives) and uses every (a, p, n):

    ℓ(a, p, n) = [ D(f_a, f_p) − D(f_a, f_n) + δ ]₊                                   (eq. 1)

with D the squared Euclidean distance and δ = 0.2, averaged over all P × (B − 1 − P)
triplets, zero-loss ones included (Kim et al.'s ``Naive_TripletLoss.py``). A batch without a
negative gives a zero loss that keeps the graph. The label vectors are not used by the loss:
the quantisation happened in the sampler.

pytorch-metric-learning's ``TripletMarginLoss`` with these triplets, squared L2 distances and
a plain mean is exactly eq. 1, so it does the arithmetic.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dmlbench.data.dense import BinaryNeighbourSampler, split_neighbours
from dmlbench.methods._base import HParams, register_method
from dmlbench.methods._common import zero_loss
from dmlbench.methods.log_ratio import ContinuousMethod
from dmlbench.methods.triplet_dense import pml_triplet_loss


class BinaryTripletLoss(nn.Module):
    def __init__(self, margin: float, positives: int) -> None:
        super().__init__()
        self.margin = margin
        self.positives = positives
        self.triplet = pml_triplet_loss(margin)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = len(embeddings)
        if n <= self.positives + 1:  # no negative in the batch
            return zero_loss(embeddings)
        pos = torch.arange(1, self.positives + 1, device=embeddings.device)
        neg = torch.arange(self.positives + 1, n, device=embeddings.device)
        p, q = torch.meshgrid(pos, neg, indexing="ij")
        anchors = torch.zeros(p.numel(), dtype=torch.long, device=embeddings.device)
        return self.triplet(embeddings, indices_tuple=(anchors, p.reshape(-1), q.reshape(-1)))


@register_method("triplet-binary")
class TripletBinary(ContinuousMethod):
    paper = "Kim et al., Deep Metric Learning Beyond Binary Supervision, CVPR 2019"
    defaults: HParams = {"margin": 0.2, "positive_pool": 30, "positives_per_batch": 5}
    defaults_source = (
        "Kim et al. 2019, §4.1-4.2 (30 nearest neighbours are positives, "
        "margin 0.2); 5 positives per batch from their code (num_pos_max)"
    )

    def build_loss(self) -> nn.Module:
        return BinaryTripletLoss(
            float(self.hparams["margin"]), int(self.hparams["positives_per_batch"])
        )

    def batch_sampler(
        self, split: Any, batch_size: int, samples_per_class: int | None, seed: int
    ) -> Any:
        self.bind(split)
        pool = int(self.hparams["positive_pool"])
        return BinaryNeighbourSampler(
            split_neighbours(split, pool),
            batch_size,
            pool,
            int(self.hparams["positives_per_batch"]),
            seed,
        )

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.01, 1.0, log=True),
            "positive_pool": trial.suggest_int("positive_pool", 10, 100, log=True),
            "positives_per_batch": trial.suggest_int("positives_per_batch", 1, 10),
        }
