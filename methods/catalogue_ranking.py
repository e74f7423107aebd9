"""Catalogue, ranking losses: smooth or histogram surrogates of average precision.

No learnable parameters, so no learning-rate multiplier. Smooth-AP needs every class of the
batch to hold the same number of images, in contiguous groups (pytorch-metric-learning reshapes
the batch into ``(classes, samples, d)``): the P×K sampler gives equal counts, and the wrapper
below sorts the batch by label so the grouping holds whatever the sampler's order.
"""

from __future__ import annotations

import torch
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods._catalogue import SPC, Choice, Entry, Float, register_entry


class GroupedByLabel(nn.Module):
    """Sort the batch by label (stable) before the loss; the loss value is order-free."""

    def __init__(self, loss: nn.Module) -> None:
        super().__init__()
        self.loss = loss

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        order = torch.argsort(labels, stable=True)
        out: torch.Tensor = self.loss(embeddings[order], labels[order])
        return out


def _grouped(loss: nn.Module, h: HParams) -> nn.Module:
    return GroupedByLabel(loss)


ENTRIES = [
    Entry(
        name="fast-ap",
        pml="FastAPLoss",
        paper="Cakir et al., Deep Metric Learning to Rank (FastAP), CVPR 2019",
        defaults={"num_bins": 10},
        defaults_source="PML default (10 histogram bins); no learnable parameters",
        space={"num_bins": Choice((5, 10, 20, 40)), "samples_per_class": SPC},
    ),
    Entry(
        name="smooth-ap",
        pml="SmoothAPLoss",
        paper="Brown et al., Smooth-AP: Smoothing the Path Towards Large-Scale Image "
        "Retrieval, ECCV 2020",
        defaults={"temperature": 0.01},
        defaults_source="authors' official code (src/main.py: sigmoid temperature 0.01, 4 "
        "samples per class; also PML's default τ); no learnable parameters",
        space={"temperature": Float(0.001, 0.1), "samples_per_class": SPC},
        build=_grouped,
    ),
    Entry(
        name="pnp",
        pml="PNPLoss",
        paper="Li et al., Rethinking the Optimization of Average Precision: Only Penalizing "
        "Negative Instances before Positive Ones is Enough (PNP), AAAI 2022",
        defaults={"b": 2.0, "alpha": 1.0, "anneal": 0.01, "variant": "O"},
        defaults_source="PML default (b = 2, α = 1, anneal 0.01, variant O); no learnable "
        "parameters",
        space={
            "anneal": Float(0.001, 0.1),
            "variant": Choice(("Ds", "Dq", "Iu", "Ib", "O")),
            "samples_per_class": SPC,
        },
    ),
]

METHODS_BY_NAME = {e.name: register_entry(e) for e in ENTRIES}
