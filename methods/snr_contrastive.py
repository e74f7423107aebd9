"""SNR contrastive loss on one B × B matrix (Yuan et al., CVPR 2019, the library's form).

The catalogue entry ``snr-contrastive`` (methods/catalogue_pair.py, whose ``docs`` say where the
library departs from the paper) builds this module in place of pytorch-metric-learning's
``SignalToNoiseRatioContrastiveLoss``; name, defaults, search space and value are unchanged.
On the L2-normalised embeddings h, with var the unbiased variance over the D features::

    d_ij = var(h_j − h_i) / var(h_i),
    L = mean_{(a,p): ℓ > 0} [d_ap − m+]_+ + mean_{(a,n): ℓ > 0} [m− − d_an]_+

(each mean over the non-zero terms, 0 where there is none: the library's ``AvgNonZeroReducer``;
a 0/0 distance of a constant embedding is NaN and never counted, as in the library).

Why not the library's loss: its ``SNRDistance`` builds the B × B × D tensor of pairwise
differences (180 × 180 × 512 = 16.6 M entries at 180 × 512) and its variance; the profile of a
step is that tensor's subtraction, variance and their backward. With c = h − mean(h) the
centred rows, var(h_j − h_i) = (‖c_i‖² + ‖c_j‖² − 2 c_i·c_j) / (D − 1): one B × B matrix product.
The expansion rounds differently: in float32 a distance differs from the library's by about
1e-7 (absolute; d ≈ 2 for unrelated embeddings).

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 2.9): the library's loss 415 ms per step, this module
12.2 ms; reports/perf/losses.md has the quiet run's figure. Equal to the library's value and
gradient and to a per-pair loop in tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import pair_masks, zero_loss


def snr_distances(embeddings: torch.Tensor) -> torch.Tensor:
    """d_ij = var(h_j − h_i) / var(h_i) on the normalised rows h (row i the anchor)."""
    h = F.normalize(embeddings, p=2, dim=1)
    c = h - h.mean(dim=1, keepdim=True)
    sq = (c * c).sum(dim=1)
    diff_var = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2 * (c @ c.t())) / (h.shape[1] - 1)
    return diff_var / torch.var(h, dim=1).unsqueeze(1)


def nonzero_mean(losses: torch.Tensor) -> torch.Tensor | None:
    """Mean of the terms > 0 (``None`` when none is: the library's zero)."""
    kept = losses[losses > 0]
    return kept.mean() if len(kept) else None


class SNRContrastive(nn.Module):
    """Contrastive loss on SNR distances, the positive and negative means added."""

    def __init__(self, pos_margin: float, neg_margin: float) -> None:
        super().__init__()
        self.pos_margin, self.neg_margin = float(pos_margin), float(neg_margin)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = pair_masks(labels)
        if int(positive.sum()) <= 1 and int(negative.sum()) <= 1:  # the library's "no pair"
            return zero_loss(embeddings)
        d = snr_distances(embeddings)
        terms = [
            nonzero_mean(F.relu(d[positive] - self.pos_margin)),
            nonzero_mean(F.relu(self.neg_margin - d[negative])),
        ]
        total = zero_loss(embeddings)
        for term in terms:
            if term is not None:
                total = total + term
        return total


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: its contrastive margins on SNR distances."""
    return SNRContrastive(float(h["pos_margin"]), float(h["neg_margin"]))
