"""Threshold-consistent margin loss on one B × B cosine matrix (Zhang et al., ICLR 2024, eq. 4).

The catalogue entry ``threshold-consistent-margin`` (methods/catalogue_pair.py) builds this
module in place of pytorch-metric-learning's ``ThresholdConsistentMarginLoss``; name, defaults,
search space and value are unchanged. With s the cosine similarities of the ordered pairs::

    L = λ+ · mean_{(a,p): s_ap ≤ m+} (m+ − s_ap) + λ− · mean_{(a,n): s_an ≥ m−} (s_an − m−),

a mean over no pair counting 0 (the library's convention).

Why not the library's loss: it gathers both embeddings of every ordered pair, two
B(B − 1) × D copies (32,220 × 512 at 180 × 512), and takes their cosine pair by pair; the
profile of a step is those gathers, divisions and products. The same similarities are one
B × B matrix product of the normalised embeddings (normalised as ``F.cosine_similarity`` does,
the norm floored at 1e-8).

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 2.7): the library's loss 292 ms per step, this module 6.3 ms
(most of it the cosine matrix's three matrix products); reports/perf/losses.md has the quiet
run's figure. Equal to the library's value and gradient and to a per-pair loop from eq. 4 in
tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import torch
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import pair_masks, zero_loss

EPS = 1e-8  # F.cosine_similarity's floor on each norm


def kept_mean(values: torch.Tensor, kept: torch.Tensor) -> torch.Tensor | None:
    """Mean of ``values`` where ``kept`` (``None`` when nothing is kept: the library's 0)."""
    count = kept.sum()
    if not bool(count):
        return None
    return (values * kept).sum() / count


class ThresholdConsistentMargin(nn.Module):
    """Zhang et al.'s TCM regulariser, alone (as the entry registers it)."""

    def __init__(
        self, lambda_plus: float, lambda_minus: float, margin_plus: float, margin_minus: float
    ) -> None:
        super().__init__()
        self.lambda_plus, self.lambda_minus = float(lambda_plus), float(lambda_minus)
        self.margin_plus, self.margin_minus = float(margin_plus), float(margin_minus)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        z = embeddings / embeddings.norm(dim=1, keepdim=True).clamp_min(EPS)
        sim = z @ z.t()
        pos_sim, neg_sim = sim[positive], sim[negative]
        pos = kept_mean(self.margin_plus - pos_sim, pos_sim <= self.margin_plus)
        neg = kept_mean(neg_sim - self.margin_minus, neg_sim >= self.margin_minus)
        if pos is None and neg is None:  # the library's zero: a zero gradient everywhere
            return zero_loss(embeddings)
        total = zero_loss(embeddings)
        if pos is not None:
            total = total + self.lambda_plus * pos
        if neg is not None:
            total = total + self.lambda_minus * neg
        return total


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: λ± and m± of the entry."""
    return ThresholdConsistentMargin(
        float(h["lambda_plus"]),
        float(h["lambda_minus"]),
        float(h["margin_plus"]),
        float(h["margin_minus"]),
    )
