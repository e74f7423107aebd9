"""Manifold loss with class proxies, the context term as one matrix product (Aziere & Todorovic,
CVPR 2019; pytorch-metric-learning's ``ManifoldLoss``, one proxy per class).

The catalogue entry ``manifold`` (methods/catalogue_proxy.py, whose ``docs`` describe the
adaptation: one proxy per training class, each sample assigned to its class's proxy) builds this
module around the library's ``ManifoldLoss``, whose proxies it trains (the parameter is the
library's, ``loss.proxies``); name, defaults, search space and value are unchanged. The steps
are the library's: S = exp(clamp(cos, 0)/0.5) over the B samples and C proxies without the
diagonal, S̄ = D^{-1/2} S D^{-1/2}, F = (1 − α)(I − αS̄)^{-1}; the intrinsic loss on F's
sample-to-proxy block, the context loss on the cosines between F's sample rows and proxy rows,
each log(1 + Σ e^x) over the proxies that violate the margin, averaged over the samples.

Why not the library's computation: it takes the context cosines with
``F.cosine_similarity(F_e, F_p.unsqueeze(1), dim=-1)``, which broadcasts to a C × B × (B + C)
tensor (100 × 180 × 280 = 5 M entries at 180 × 512 with 100 classes) and its backward, and it
scales S by D^{-1/2} with two (B + C)² matrix products of a diagonal matrix. Here the cosines
are one B × (B + C) by (B + C) × C product of the normalised rows (norms floored at 1e-8, as
``F.cosine_similarity`` does) and the scaling is elementwise (the same products, bit for bit).
The (B + C) × (B + C) inverse stays: it is the formula.

Measured (one torch thread, 180 × 512, 4 images per class, 100 classes, forward + backward,
medians; AMD EPYC, 2 cores shared, load average 3.6): the library's loss 447 ms per step, this
module 37 ms; reports/perf/losses.md has the quiet run's figure. What remains is the formula's:
the (B + C)² Gram matrix of 512-d rows, the (B + C) × (B + C) inverse and their backward (about
eight (B + C)-sized matrix products per step; docs/performance.md, "Losses above 20 ms").
Equal to the library's value and gradient (embeddings and proxies) in
tests/methods/test_manifold.py and to the loop that iterates the random walk in
tests/methods/test_catalogue.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams

EPS = 1e-8  # F.cosine_similarity's floor on each norm


def margin_softplus(scores: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
    """mean_i log(1 + Σ_{k ≠ y_i, x_ik > 0} e^{x_ik}), x_ik = scores_ik − scores_iy + margin
    (the library's in-place masking, kept as is)."""
    rows = torch.arange(len(labels), device=scores.device)
    excess = scores - scores[rows, labels].view(-1, 1) + margin
    excess[rows, labels] = -np.inf
    excess[excess < 0] = -np.inf
    return torch.log(1 + torch.sum(torch.exp(excess), dim=1)).mean()


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp_min(EPS)


class ClassProxyManifold(nn.Module):
    """``ManifoldLoss`` with each sample assigned to its class's proxy (library parameters)."""

    def __init__(self, loss: nn.Module) -> None:
        super().__init__()
        self.loss = loss

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        lib: Any = self.loss  # the library's ManifoldLoss: proxies, alpha, lambdaC, margin
        n = len(embeddings)
        x = torch.cat([embeddings, lib.proxies], dim=0)
        z = F.normalize(x, p=2, dim=1)
        s = torch.exp((z @ z.t()).clamp(0, np.inf) / 0.5)
        eye = torch.eye(len(x), device=s.device, dtype=s.dtype)
        s = s - s * eye
        d = torch.pow(torch.sum(s, dim=1), -1 / 2)
        s_bar = d.unsqueeze(1) * s * d.unsqueeze(0)
        inverse = torch.inverse(eye.float() - lib.alpha * s_bar.float()).to(s.dtype)
        f = (1 - lib.alpha) * inverse
        f_p, f_e = f[n:, :], f[:n, :]
        total = embeddings.new_zeros(())
        if lib.lambdaC != np.inf:
            total = total + margin_softplus(f[:n, n:], labels, lib.margin)
        context = unit_rows(f_e) @ unit_rows(f_p).t()
        out: torch.Tensor = total + lib.lambdaC * margin_softplus(context, labels, lib.margin)
        return out


def build(library_loss: nn.Module, h: HParams) -> nn.Module:
    """The catalogue entry's ``build``: the library's loss (its proxies, α, λ_C, margin)."""
    return ClassProxyManifold(library_loss)
