"""Histogram loss with the pairs taken from one B × B mask (Ustinova & Lempitsky, NeurIPS 2016;
pytorch-metric-learning's ``HistogramLoss``).

The catalogue entry ``histogram`` (methods/catalogue_pair.py, whose ``docs`` say where the
library departs from the paper) builds this module in place of the library's loss; name,
defaults, search space and value are unchanged. On the cosine similarities s of the
L2-normalised embeddings, with Δ = 2 / n_bins and nodes t_r = −1 + rΔ::

    L = Σ_r h⁻_r Φ⁺_r,   Φ⁺_r = Σ_{q ≤ r} h⁺_q,

h± the linearly interpolated histograms of the similarities of the positive and the negative
pairs, each pair once (i < j). The library takes its pairs from the batch's (anchor, positive,
negative) triplets: a positive pair counts when one of its two samples has a negative, a
negative pair when one of its two samples has a positive (so a negative pair of two samples
without a positive is left out), in the order of (i, j); the same mask, in the same order, here
(the interpolation and its float32 bin index are the library's, so the histograms are the
library's bit for bit). One departure, where the library fails: a similarity of 1 (two equal
embeddings, as in a collapsed batch) falls in the library's bin n_bins, one node past the end,
and raises; it is counted in the last bin here (weight 1 on the node t = 1, the interpolation's
value there).

Why not the library's loss: it lists every triplet (B·(K − 1)·(B − K) = 95,040 at 180 × 512,
4 images per class), sorts and de-duplicates the pairs of two of their columns, and indexes the
similarity matrix with Python lists (``.tolist()``); the profile of a step is that bookkeeping.

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 4.6): the library's loss 203 ms per step, this module 7.2 ms;
reports/perf/losses.md has the quiet run's figure. Equal to the library's value and gradient
and to a per-pair loop in tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import torch
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import cosine_matrix, pair_masks, zero_loss


class Histogram(nn.Module):
    """Σ_r h⁻_r Φ⁺_r over the pairs of the batch's triplets."""

    def __init__(self, n_bins: int) -> None:
        super().__init__()
        self.delta = 2 / n_bins  # the library's Δ (and its float arithmetic below)
        self.last = round(2 / self.delta) - 1  # the last bin's lower node

    def density(self, sims: torch.Tensor) -> torch.Tensor:
        """The library's ``compute_density``: linear interpolation onto the nodes, / count."""
        r_star = torch.floor((sims.float() + 1) / self.delta).to(torch.long)
        r_star = r_star.clamp(max=self.last)  # s = 1: the library indexes past the last node
        above = ((sims + 1 - r_star * self.delta) / self.delta).to(sims.dtype)
        below = (((r_star + 1) * self.delta - 1 - sims) / self.delta).to(sims.dtype)
        density = torch.zeros(round(1 + 2 / self.delta), dtype=sims.dtype, device=sims.device)
        density.scatter_add_(0, r_star + 1, above)
        density.scatter_add_(0, r_star, below)
        return density / sims.size(0)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        has_pos, has_neg = positive.any(dim=1), negative.any(dim=1)
        if not bool((has_pos & has_neg).any()):  # no triplet: the library's zero
            return zero_loss(embeddings)
        upper = torch.ones_like(positive).triu(diagonal=1)
        pos_pairs = positive & upper & (has_neg.unsqueeze(1) | has_neg.unsqueeze(0))
        neg_pairs = negative & upper & (has_pos.unsqueeze(1) | has_pos.unsqueeze(0))
        sim = cosine_matrix(embeddings)
        phi = torch.cumsum(self.density(sim[pos_pairs]), dim=0)
        return torch.sum(self.density(sim[neg_pairs]) * phi)


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: its number of bins."""
    return Histogram(int(h["n_bins"]))
