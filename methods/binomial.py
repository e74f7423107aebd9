"""Binomial deviance loss (Yi et al., ICPR 2014), as Wang et al. preprint eq. 12 writes it.

With cosine similarities s_ik of the L2-normalised embeddings, P_i the other images of x_i's
class and N_i the images of other classes::

    L = Σ_i [ 1/|P_i| Σ_{k ∈ P_i} log(1 + exp(α (γ − s_ik)))
            + 1/|N_i| Σ_{k ∈ N_i} log(1 + exp(β (s_ik − γ))) ]

α and β are the sensitivities of positive and negative pairs to the soft threshold γ; each
anchor's positive and negative terms are averaged separately (the 1/|P_i| and 1/|N_i| of
eq. 12, which balance the few positives against the many negatives). This is the "Binomial"
baseline of the multi-similarity paper's ablation (Wang et al. preprint Table 1): every pair of the
batch, no mining.

Deliberate choices:
- Eq. 12 *sums* over the m anchors of the batch (unlike eq. 17's 1/m); it is followed. The
  scale of the loss grows with the batch size, which Adam's step normalisation absorbs.
- An anchor with no positive (a singleton class) or no negative (a one-class batch) has
  that term dropped (an empty average counts 0), so degenerate batches are finite.
- Similarities are cosine: the embeddings are L2-normalised inside the loss, as the
  multi-similarity code (and pytorch-metric-learning's cosine similarity) does.

pytorch-metric-learning has no binomial deviance loss (its ``MultiSimilarityLoss`` is eq. 17,
a log-sum-exp per anchor, not a per-pair softplus), so it is written here.

Defaults α = 2, β = 50, γ = 0.5: Wang et al. preprint §6 sets "α = 2, β = 50 and γ = 0.5 in both
Equation (13) and Equation (17)", eq. 13 being this loss's weight. Batches: K = 5 images per
class, as Wang et al.'s preprint uses for CUB and Cars.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks


class BinomialDevianceLoss(nn.Module):
    def __init__(self, alpha: float, beta: float, gamma: float) -> None:
        super().__init__()
        self.alpha, self.beta, self.gamma = alpha, beta, gamma

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = F.normalize(embeddings, dim=1)
        s = x @ x.t()
        pos, neg = label_masks(labels)
        zero = torch.zeros_like(s)
        pos_terms = torch.where(pos, F.softplus(self.alpha * (self.gamma - s)), zero)
        neg_terms = torch.where(neg, F.softplus(self.beta * (s - self.gamma)), zero)
        pos_mean = pos_terms.sum(dim=1) / pos.sum(dim=1).clamp_min(1)
        neg_mean = neg_terms.sum(dim=1) / neg.sum(dim=1).clamp_min(1)
        return (pos_mean + neg_mean).sum()


@register_method("binomial")
class Binomial(Method):
    paper = (
        "Yi et al., Deep Metric Learning for Person Re-identification, ICPR 2014 "
        "(Wang et al. preprint eq. 12)"
    )
    defaults: ClassVar[HParams] = {"alpha": 2.0, "beta": 50.0, "gamma": 0.5}
    defaults_source = (
        "Wang et al. preprint §6 (α = 2, β = 50, γ = 0.5 for eq. 13, the binomial weights; K = 5)"
    )
    samples_per_class = 5

    def build_loss(self) -> nn.Module:
        h = self.hparams
        return BinomialDevianceLoss(float(h["alpha"]), float(h["beta"]), float(h["gamma"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "alpha": trial.suggest_float("alpha", 0.5, 10.0, log=True),
            "beta": trial.suggest_float("beta", 2.0, 80.0, log=True),
            "gamma": trial.suggest_float("gamma", 0.0, 1.0),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 5, 8]),
        }
