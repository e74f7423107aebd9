"""Catalogue, ranking losses: smooth or histogram surrogates of average precision.

No learnable parameters, so no learning-rate multiplier.

``smooth-ap`` is written here from Brown et al. (ECCV 2020, §3, the smoothed AP of eq. 11 with
the sigmoid of eq. 6), not taken from the library: pytorch-metric-learning's ``SmoothAPLoss``
reshapes the batch as ``(B // classes, classes, d)`` where the authors' code reshapes it as
``(classes, B // classes, d)``, so its "positives" are consecutive samples of mixed classes
whenever a batch's number of classes differs from its samples per class (P×K = 16×4 on
glyphs-mini: 0.336 instead of 0.409 on a 4×3 test batch). Each query is ranked against the
other samples of the batch; the authors' code also keeps the query in its own ranking (its
self-similarity counts once in every rank), which the paper's retrieval set does not.
``pml:SmoothAPLoss`` is refused with this reason.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods import pnp
from dmlbench.methods._base import HParams
from dmlbench.methods._catalogue import SPC, CatalogueEntry, Choice, Float, register_entry


class SmoothAP(nn.Module):
    """1 − mean over queries of the smoothed AP (Brown et al., ECCV 2020, eq. 11).

    For query q and positive i: ``R_P(i) = 1 + Σ_{j∈P, j≠i} σ((s_qj − s_qi)/τ)`` and
    ``R(i) = 1 + Σ_{j≠q, j≠i} σ((s_qj − s_qi)/τ)`` over cosine similarities; AP_q is the mean
    of ``R_P(i) / R(i)`` over q's positives. Queries without a positive are skipped. Memory is
    B³ (B = 120: 1.7 M entries).
    """

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        z = F.normalize(embeddings, dim=1)
        s = z @ z.t()
        n = len(labels)
        eye = torch.eye(n, dtype=torch.bool, device=z.device)
        pos = (labels[:, None] == labels[None, :]) & ~eye  # [q, j]
        # g[q, i, j] = σ((s_qj − s_qi) / τ), counted for j ∉ {q, i}
        g = torch.sigmoid((s[:, None, :] - s[:, :, None]) / self.temperature)
        keep = ~eye[:, None, :] & ~eye[None, :, :]  # j ≠ q and j ≠ i
        rank_all = 1 + (g * keep).sum(-1)
        rank_pos = 1 + (g * (keep & pos[:, None, :])).sum(-1)
        ratio = torch.where(pos, rank_pos / rank_all, torch.zeros_like(rank_all))
        count = pos.sum(1)
        has = count > 0
        if not bool(has.any()):
            return embeddings.sum() * 0.0
        ap = ratio.sum(1)[has] / count[has]
        return 1 - ap.mean()


def _smooth_ap(loss: nn.Module, h: HParams) -> nn.Module:
    return SmoothAP(float(h["temperature"]))


ENTRIES = [
    CatalogueEntry(
        name="fast-ap",
        pml="FastAPLoss",
        paper="Cakir et al., Deep Metric Learning to Rank (FastAP), CVPR 2019",
        defaults={"num_bins": 10},
        defaults_source="PML default (10 histogram bins); no learnable parameters",
        space={"num_bins": Choice((5, 10, 20, 40)), "samples_per_class": SPC},
        docs=(
            "FastAP (Cakir et al., CVPR 2019; pytorch-metric-learning FastAPLoss): 1 − the mean "
            "over queries of Σ_l h_l⁺ H_l⁺ / H_l / N⁺ on squared distances of normalised "
            "embeddings, soft-binned into num_bins + 1 triangular bins over [0, 4]. Matches a "
            "loop from the paper (tests/methods/test_catalogue.py::fast_ap)."
        ),
    ),
    CatalogueEntry(
        name="smooth-ap",
        pml="SmoothAPLoss",
        paper="Brown et al., Smooth-AP: Smoothing the Path Towards Large-Scale Image "
        "Retrieval, ECCV 2020",
        defaults={"temperature": 0.01},
        defaults_source="authors' official code (src/main.py: sigmoid temperature 0.01, 4 "
        "samples per class; also PML's default τ); the loss is written from the paper (PML's "
        "groups the batch wrongly); no learnable parameters",
        space={"temperature": Float(0.001, 0.1), "samples_per_class": SPC},
        build=_smooth_ap,
    ),
    CatalogueEntry(
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
        build=pnp.build,
        docs=(
            "PNP (Li et al., AAAI 2022; pytorch-metric-learning PNPLoss), variant O by default: "
            "the mean over a query's positives of R⁻, the sigmoid-smoothed count of negatives "
            "ranked before each. Differs from the paper: the library also counts the query as "
            "one of its own positives (s_qq = 1, R⁻ ≈ 0), so each query's mean has one more, "
            "near-zero term (the paper's P_q excludes the query). Compared with a loop that "
            "reproduces this (tests/methods/test_catalogue.py::pnp, include_query=True)."
        ),
    ),
]

METHODS_BY_NAME = {e.name: register_entry(e) for e in ENTRIES}
