"""Tuplet margin loss on one B × B similarity matrix (Yu & Tao, ICCV 2019, eq. 5).

The catalogue entry ``tuplet-margin`` (methods/catalogue_pair.py) builds this module in place of
pytorch-metric-learning's ``TupletMarginLoss``; name, defaults, search space and value are
unchanged. Per ordered positive pair (a, p), with s_ij the cosine similarities of the
L2-normalised embeddings, β the margin in radians and s the scale::

    ℓ_ap = log(1 + Σ_{n: y_n ≠ y_a} exp(s (s_an − cos(θ_ap − β)))),   θ_ap = arccos s_ap,

averaged over the positive pairs (0 without a positive or a negative pair, as the library).

Why not the library's loss: it materialises every (positive pair, negative pair) combination,
a |P| × |N| matrix of 540 × 31,680 ≈ 17 M entries at 180 × 512 with 4 images per class, and
masks it down to the pairs sharing an anchor; the profile of one forward + backward step is
that matrix's exp, copies, subtractions and masked fills (1.24 s of 1.24 s). The sum over
negatives depends on the positive only through the factor exp(−s cos(θ_ap − β)), so
ℓ_ap = softplus(LSE_a − s cos(θ_ap − β)) with LSE_a = log Σ_n exp(s s_an) one log-sum-exp per
row of the B × B matrix: O(B²) instead of O(B³).

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 1.8–3.1): the library's loss 1,229 ms per step, this module
6.5 ms, of which the three 180 × 180 × 512 matrix products (the cosine matrix and its backward)
are 5.7 ms in the profile; reports/perf/losses.md has the quiet run's figure. Equal to the library's
value and gradient and to a per-pair loop from eq. 5 in tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams


def cosine_matrix(embeddings: torch.Tensor) -> torch.Tensor:
    """Cosine similarities of the rows, normalised as the library's ``CosineSimilarity`` does."""
    z = F.normalize(embeddings, p=2, dim=1)
    return z @ z.t()


def pair_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive, negative) B × B masks: same label off the diagonal, different label."""
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


def negative_logsumexp(logits: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """log Σ_{n negative of a} exp(logits_an) per row a (a row without negatives is never read)."""
    return torch.logsumexp(logits.masked_fill(~negative, torch.finfo(logits.dtype).min), dim=1)


def tuplet_margin(
    sim: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float, scale: float
) -> torch.Tensor:
    """Mean over positive pairs of eq. 5 (``margin`` in radians); the caller checks that a
    positive and a negative pair exist."""
    anchor_lse = negative_logsumexp(scale * sim, negative)
    rows = positive.nonzero()[:, 0]  # row-major, the library's order of (a, p) pairs
    target = torch.cos(torch.acos(sim[positive]) - margin)
    per_pair = torch.logaddexp(anchor_lse[rows] - scale * target, torch.zeros_like(target))
    return per_pair.mean()


def zero_loss(embeddings: torch.Tensor) -> torch.Tensor:
    """The library's zero: 0 with a (zero) gradient for every embedding."""
    return (embeddings * 0).sum()


class TupletMargin(nn.Module):
    """Yu & Tao's tuplet margin loss (eq. 5) on the batch's B × B cosine matrix."""

    def __init__(self, margin_degrees: float, scale: float) -> None:
        super().__init__()
        self.margin = math.radians(margin_degrees)
        self.scale = float(scale)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        if not bool(positive.any()) or not bool(negative.any()):
            return zero_loss(embeddings)
        sim = cosine_matrix(embeddings)
        return tuplet_margin(sim, positive, negative, self.margin, self.scale)


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: the entry's β (degrees) and s, the library's meaning."""
    return TupletMargin(float(h["margin"]), float(h["scale"]))
