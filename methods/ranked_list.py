"""Ranked list loss (Wang et al., CVPR 2019; Fehervari et al. eq. 6–9).

Every image x_i of the batch is a query; with Euclidean (non-squared) distances d_ij, the
negative boundary α and the margin m (positives are pulled inside α − m)::

    P*_i = {j ≠ i: y_j = y_i, d_ij > α − m}          non-trivial positives
    N*_i = {j: y_j ≠ y_i, d_ij < α}                   non-trivial negatives
    L_P(i) = 1/|P*_i| Σ_{j ∈ P*_i} (d_ij − (α − m))                                  (eq. 6, 9)
    w_ij   = exp(T_n (α − d_ij)),   L_N(i) = Σ_{j ∈ N*_i} w_ij / Σ_{k ∈ N*_i} w_ik · (α − d_ij)
                                                                                     (eq. 7, 9)
    L = 1/B Σ_i  L_P(i) + λ L_N(i)                                                   (eq. 8)

Deliberate choices:
- The weights w_ij are constants in the gradient (computed without autograd, as a softmax of
  T_n (α − d) over N*_i), as in the official Caffe layer
  (``DistanceWeightedValidPairLossV12``), which scales each pair's hinge gradient by its
  normalised weight and does not differentiate the weight.
- L is the mean over all B queries; a query with empty P*_i (or N*_i) has L_P = 0 (L_N = 0).
  Fehervari et al.'s MXNet code divides instead by the number of queries with a non-zero
  loss; that changes only the scale of a step, which Adam absorbs to first order.
- Distances are taken on the embeddings as given: α = 1.2 and m = 0.4 are distances on the
  unit sphere, where the RLL model puts its embeddings (normalised last layer, Fehervari et al. 2019
  Table 1), as ``normalize: true`` does in the glyphs protocols.

pytorch-metric-learning's ``RankedListLoss`` is not used: it weighs the two terms as
``(1 − imbalance) L_P + imbalance L_N`` rather than ``L_P + λ L_N``, adds 1e-5 for every
column of the batch to the weight sums, and back-propagates through the weights. With
``imbalance = 0.5`` its value is half of ours up to that 1e-5 smoothing, which the test
checks.

Defaults: α = 1.2, m = 0.4, T_n = 10 and 3 images per class are the defaults of Fehervari
et al.'s ``train_rankedlistloss.py``; they equal the official RLL release's
In-shop configuration (``pn_margin`` 0.4, boundaries 1 ± m/2, T_n = 10; its CUB configuration
uses m = 0.2). The RLL paper's own text was not available here, so the values were not checked
against it. λ = 1 is eq. 8's balance as their code computes it (L_P + L_N).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, pairwise_distances


class RankedListLoss(nn.Module):
    def __init__(self, alpha: float, margin: float, temperature: float, lam: float) -> None:
        super().__init__()
        self.alpha, self.margin, self.temperature, self.lam = alpha, margin, temperature, lam

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        d = pairwise_distances(embeddings)
        pos, neg = label_masks(labels)
        pos_star = pos & (d > self.alpha - self.margin)
        neg_star = neg & (d < self.alpha)
        zero = torch.zeros_like(d)
        pos_hinge = torch.where(pos_star, d - (self.alpha - self.margin), zero)
        loss_p = pos_hinge.sum(dim=1) / pos_star.sum(dim=1).clamp_min(1)
        with torch.no_grad():
            logits = (self.temperature * (self.alpha - d)).masked_fill(~neg_star, float("-inf"))
            weights = torch.softmax(logits, dim=1).nan_to_num(0.0)  # rows with empty N*: 0
        loss_n = (weights * torch.where(neg_star, self.alpha - d, zero)).sum(dim=1)
        return (loss_p + self.lam * loss_n).mean()


@register_method("ranked-list")
class RankedList(Method):
    paper = "Wang et al., Ranked List Loss for Deep Metric Learning, CVPR 2019"
    defaults: ClassVar[HParams] = {"alpha": 1.2, "margin": 0.4, "temperature": 10.0, "lam": 1.0}
    defaults_source = (
        "Fehervari et al.'s train_rankedlistloss.py (α = 1.2, m = 0.4, T_n = 10, 3 images "
        "per class; = official RLL In-shop config); λ = 1 (Fehervari et al. eq. 8, L_P + L_N)"
    )
    samples_per_class = 3

    def build_loss(self) -> nn.Module:
        h = self.hparams
        return RankedListLoss(
            float(h["alpha"]), float(h["margin"]), float(h["temperature"]), float(h["lam"])
        )

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "alpha": trial.suggest_float("alpha", 0.8, 1.6),
            "margin": trial.suggest_float("margin", 0.1, 0.8),
            "temperature": trial.suggest_float("temperature", 0.0, 20.0),
            "lam": trial.suggest_float("lam", 0.25, 4.0, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 3, 4, 5]),
        }
