"""Tuplet margin + intra-pair variance (Yu & Tao, ICCV 2019, eq. 5 + w × eq. 7) on one matrix.

The catalogue entry ``intra-pair-variance`` (methods/catalogue_pair.py) builds this module in
place of the sum of pytorch-metric-learning's ``TupletMarginLoss`` and
``IntraPairVarianceLoss``; name, defaults, search space and value are unchanged. With s_ij the
cosine similarities of the L2-normalised embeddings, μ+ and μ− the means of s over the
ordered positive and negative pairs of the batch::

    L = L_tuplet + w (E_P[((1 − ε+) μ+ − s_ap)_+²] + E_N[(s_an − (1 + ε−) μ−)_+²])

(L_tuplet as in :mod:`dmlbench.methods.tuplet_margin`; the variance term of a kind of pair
without a pair of that kind is 0, as in the library).

Why not the library's losses: the time is the tuplet term's |P| × |N| matrix (see
:mod:`dmlbench.methods.tuplet_margin`); the variance term was already O(B²). Both terms here
share one B × B cosine matrix. Measured (one torch thread, 180 × 512, 4 images per class,
forward + backward, medians; AMD EPYC, 2 cores shared, load average 1.8–3.1): the library's
sum 1,189 ms per step, this module 7.6 ms (most of it the cosine matrix's three matrix
products); reports/perf/losses.md has the quiet run's figure. Equal to the library's value and
gradient and to a per-pair loop from eq. 5 and 7 in tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import cosine_matrix, pair_masks, tuplet_margin, zero_loss


def intra_pair_variance(
    sim: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor,
    pos_eps: float,
    neg_eps: float,
) -> torch.Tensor:
    """Eq. 7: squared hinge of each pair's similarity beyond (1 ∓ ε) × its kind's batch mean."""
    total = sim.new_zeros(())
    if bool(positive.any()):
        pos = sim[positive]
        total = total + (F.relu((1 - pos_eps) * pos.mean() - pos) ** 2).mean()
    if bool(negative.any()):
        neg = sim[negative]
        total = total + (F.relu(neg - (1 + neg_eps) * neg.mean()) ** 2).mean()
    return total


class TupletPlusVariance(nn.Module):
    """``L_tuplet + w × L_ipv`` (Yu & Tao, ICCV 2019, the sum of both terms)."""

    def __init__(
        self, pos_eps: float, neg_eps: float, margin_degrees: float, scale: float, weight: float
    ) -> None:
        super().__init__()
        self.pos_eps, self.neg_eps = float(pos_eps), float(neg_eps)
        self.margin, self.scale = math.radians(margin_degrees), float(scale)
        self.weight = float(weight)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        n_pos, n_neg = int(positive.sum()), int(negative.sum())
        if n_pos <= 1 and n_neg <= 1:  # the library's "no pair" case
            return zero_loss(embeddings)
        sim = cosine_matrix(embeddings)
        variance = intra_pair_variance(sim, positive, negative, self.pos_eps, self.neg_eps)
        tuplet = (
            tuplet_margin(sim, positive, negative, self.margin, self.scale)
            if n_pos and n_neg
            else zero_loss(embeddings)
        )
        return tuplet + self.weight * variance


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: ε± of the variance term, β (degrees), s and w."""
    return TupletPlusVariance(
        float(h["pos_eps"]),
        float(h["neg_eps"]),
        float(h["tuplet_margin"]),
        float(h["tuplet_scale"]),
        float(h["ipv_weight"]),
    )
