"""NT-Xent with every same-class pair a positive (Chen et al., ICML 2020, eq. 1) on one matrix.

The catalogue entry ``ntxent`` (methods/catalogue_pair.py) builds this module in place of
pytorch-metric-learning's ``NTXentLoss``; name, defaults, search space and value are unchanged.
Per ordered positive pair (a, p), with s_ij the cosine similarities of the L2-normalised
embeddings and τ the temperature::

    ℓ_ap = −log(e^{s_ap/τ} / (e^{s_ap/τ} + Σ_{n: y_n ≠ y_a} e^{s_an/τ}) + tiny),

averaged over the positive pairs (0 without a positive or a negative pair). ``tiny`` is the
library's: the smallest normal number of the dtype, which caps ℓ at −log(tiny) (87.3 in
float32); it is kept, as log(e^x + tiny), so that the value stays the library's.

Why not the library's loss: it builds the |P| × |N| matrix of every (positive pair, negative
pair) combination, 540 × 31,680 ≈ 17 M entries at 180 × 512 with 4 images per class, and masks
it to the pairs sharing an anchor (the profile of a step is that matrix's exp, products, copies
and masked fills). The sum over a's negatives does not depend on p: one log-sum-exp per row of
the B × B matrix, O(B²) instead of O(B³).

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 1.8–3.1): the library's loss 768 ms per step, this module
6.3 ms (most of it the cosine matrix's three matrix products); reports/perf/losses.md has the
quiet run's figure. Equal to the library's value and gradient and to a per-pair loop from eq. 1 in
tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import cosine_matrix, negative_logsumexp, pair_masks, zero_loss


class NTXent(nn.Module):
    """Supervised NT-Xent: each positive pair against its anchor's negatives."""

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = float(temperature)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        if not bool(positive.any()) or not bool(negative.any()):
            return zero_loss(embeddings)
        logits = cosine_matrix(embeddings) / self.temperature
        anchor_lse = negative_logsumexp(logits, negative)
        rows = positive.nonzero()[:, 0]  # row-major, the library's order of (a, p) pairs
        pos = logits[positive]
        log_ratio = pos - torch.logaddexp(pos, anchor_lse[rows])
        log_tiny = torch.full_like(pos, math.log(torch.finfo(pos.dtype).tiny))
        return -torch.logaddexp(log_ratio, log_tiny).mean()


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: the entry's τ."""
    return NTXent(float(h["temperature"]))
