"""PNP on the query's positives only (Li et al., AAAI 2022; pytorch-metric-learning's form).

The catalogue entry ``pnp`` (methods/catalogue_ranking.py, whose ``docs`` say where the library
departs from the paper) builds this module in place of pytorch-metric-learning's ``PNPLoss``;
name, defaults, search space and value are unchanged. With s the cosine similarities and
σ_τ(x) = 1 / (1 + exp(clamp(−x/τ, −50, 50))) the library's sigmoid, for a query q with a
positive pair and each i of P(q) ∪ {q} (the library counts the query among its positives)::

    R⁻(q, i) = Σ_{j: y_j ≠ y_q} σ_τ(s_qj − s_qi),

transformed by the variant (O: R⁻; Ds: log(1 + R⁻); Dq: (1 + R⁻)^−α; Iu: (1 + R⁻) log(1 + R⁻);
Ib: (b R⁻ − log(1 + b R⁻)) / b²), averaged over i, then over the queries (Dq: 1 − that mean).

Why not the library's loss: it computes σ_τ(s_qj − s_qi) for every (q, i, j), a B × B × B
tensor (5.8 M entries at 180, with two B³ copies from ``repeat``), and keeps the rows of q's
positives afterwards. Only the B·K rows (q, i ∈ P(q) ∪ {q}) are computed here: (B·K) × B.

Measured (one torch thread, 180 × 512, 4 images per class, forward + backward, medians; AMD
EPYC, 2 cores shared, load average 2.8): the library's loss 232 ms per step, this module
7.5 ms; reports/perf/losses.md has the quiet run's figure. Equal to the library's value and
gradient and to a per-query loop in tests/methods/test_library_losses.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams
from dmlbench.methods.tuplet_margin import zero_loss

VARIANTS = ("Ds", "Dq", "Iu", "Ib", "O")


class PNP(nn.Module):
    """PNP-O and its variants, over the (query, positive) rows only."""

    def __init__(self, b: float, alpha: float, anneal: float, variant: str) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant={variant} but must be one of {VARIANTS}")
        self.b, self.alpha, self.anneal, self.variant = float(b), float(alpha), anneal, variant

    def transform(self, rank: torch.Tensor) -> torch.Tensor:
        """The variant's function of R⁻ (the library's expressions)."""
        if self.variant == "Ds":
            return torch.log(1 + rank)
        if self.variant == "Dq":
            return 1 / (1 + rank) ** (self.alpha)
        if self.variant == "Iu":
            return (1 + rank) * torch.log(1 + rank)
        if self.variant == "Ib":
            b = self.b
            return 1 / b**2 * (b * rank - torch.log(1 + b * rank))
        return rank

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = len(labels)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        eye = torch.eye(n, dtype=torch.bool, device=labels.device)
        has_pos = (same & ~eye).any(dim=1)
        if not bool(has_pos.any()):
            return zero_loss(embeddings)
        rows = same & has_pos.unsqueeze(1)  # (q, i): i ∈ P(q) ∪ {q}, q with a positive pair
        q, i = rows.nonzero(as_tuple=True)
        z = F.normalize(embeddings, p=2, dim=1)
        s = z @ z.t()
        exponent = torch.clamp(-(s[q] - s[q, i].unsqueeze(1)) / self.anneal, min=-50, max=50)
        rank = ((1.0 / (1.0 + torch.exp(exponent))) * (~same[q]).to(s.dtype)).sum(dim=1)
        per_query = torch.zeros(n, dtype=s.dtype, device=s.device).index_add(
            0, q, self.transform(rank)
        )
        count = rows.sum(dim=1).to(s.dtype)
        loss = (per_query[has_pos] / count[has_pos]).sum() / has_pos.sum()
        return 1 - loss if self.variant == "Dq" else loss


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: b, α, the annealing temperature and the variant."""
    return PNP(float(h["b"]), float(h["alpha"]), h["anneal"], str(h["variant"]))
