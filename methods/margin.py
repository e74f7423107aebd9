"""Margin loss with distance-weighted sampling (Wu et al., "Sampling Matters in Deep Embedding
Learning", ICCV 2017; Fehervari et al. 2019 §2.2).

Loss (Wu et al. §5): for a pair (i, j) with y_ij = +1 (same class) or −1 and Euclidean distance
D_ij (not squared)::

    ℓ(i, j) = [α + y_ij (D_ij − β_c(i))]₊

over the triplets (a, p, n) below, each giving the pair (a, p) and the pair (a, n). β is learned:
one β per class (β_c(i) is the anchor's class; the paper's β^(class)) or one global β
(``beta_per_class: false``), initialised at 1.2, with α = 0.2. The loss is
``(Σ ℓ + ν Σ_triplets β_c(a)) / #{ℓ > 0}`` as in the official code; a batch where every ℓ is 0
gives 0. β's learning rate is ``lr × beta_lr_mult``, 1000 by default: the official code
trains β at 0.1 while the network trains at 1e-4. There β has its own SGD (momentum 0.9); here
it shares the protocol's optimizer, so only the ratio carries over. At the backbone's rate (× 1)
β moves by about 0.01 over cub200's 2,880 Adam steps at 1e-5, i.e. it is not learned (tested).

Sampling (Wu et al. §4): embeddings on the unit sphere of R^n have pairwise distances with
density q(d) ∝ d^{n−2} (1 − d²/4)^{(n−3)/2}; a negative is drawn for an anchor with probability
∝ 1/q(max(d, cutoff)) among the negatives with d < nonzero_loss_cutoff (cutoff 0.5 bounds the
weights; 1.4 = α + β drops negatives that can only give ℓ = 0). As in the official MXNet code,
every anchor-positive pair (a, p) gets one negative. Sampling uses distances without gradient
and torch's global RNG (``torch.multinomial``), so it is reproducible under the trainer's seed.

Choices and differences from pytorch-metric-learning:
    * The loss is pytorch-metric-learning's ``MarginLoss`` (same hinge, learned β, ν and
      divisor) on the triplets sampled here, with non-normalising ``LpDistance`` (the protocol
      decides normalisation). With a *global* learned β its ν·β term is added once per batch
      (the official code never learns a global β; with the default ν = 0 this is moot).
    * The sampler is ours, not ``DistanceWeightedMiner``: that one subtracts the *global*
      maximum log-weight before exp (rows underflow to all-zero at n ≈ 512 in float32 and their
      anchors are dropped; here the normalisation is per anchor), draws random positives
      instead of taking every (a, p) pair, and drops anchors whose negatives are all beyond
      nonzero_loss_cutoff, where we fall back to a uniform draw among the negatives (the intent
      of the official code's fallback, which could also draw positives).
    * The density assumes unit-norm embeddings (the paper's setting); distances are clipped to
      [cutoff, 2) for the weights only.
    * Anchors without a positive or without a negative in the batch form no triplet (a batch of
      one class or of singletons gives a zero loss that keeps the graph).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from pytorch_metric_learning import distances, losses
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, pairwise_distances, zero_loss


def negative_probabilities(
    d: torch.Tensor, labels: torch.Tensor, dim: int, cutoff: float, nonzero_loss_cutoff: float
) -> torch.Tensor:
    """Row a: the probability of drawing each sample as anchor a's negative (0 for non-negatives).

    Rows of anchors without any negative are all zero.
    """
    _, neg = label_masks(labels)
    dc = d.clamp(min=cutoff, max=2.0 - 1e-6)
    log_w = (2.0 - dim) * dc.log() - (dim - 3.0) / 2.0 * (1.0 - dc.pow(2) / 4.0).log()  # −log q
    allowed = neg & (d < nonzero_loss_cutoff)
    fallback = neg & ~allowed.any(dim=1, keepdim=True)  # uniform among the negatives
    log_w = torch.where(allowed, log_w, torch.where(fallback, 0.0, float("-inf")))
    probs = torch.softmax(log_w, dim=1)
    return torch.nan_to_num(probs, nan=0.0)  # rows with no negative at all


def distance_weighted_triplets(
    embeddings: torch.Tensor, labels: torch.Tensor, cutoff: float, nonzero_loss_cutoff: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(anchors, positives, negatives): every (a, p) pair with one sampled negative."""
    with torch.no_grad():
        d = pairwise_distances(embeddings.detach())
        probs = negative_probabilities(d, labels, embeddings.shape[1], cutoff, nonzero_loss_cutoff)
        pos, _ = label_masks(labels)
        a, p = torch.nonzero(pos & (probs.sum(dim=1, keepdim=True) > 0), as_tuple=True)
        if len(a) == 0:
            return a, p, a.clone()
        n = torch.multinomial(probs[a], 1, replacement=True).squeeze(1)
    return a, p, n


class MarginLoss(nn.Module):
    def __init__(self, num_classes: int, h: HParams) -> None:
        super().__init__()
        self.cutoff = float(h["cutoff"])
        self.nonzero_loss_cutoff = float(h["nonzero_loss_cutoff"])
        self.loss = losses.MarginLoss(
            margin=float(h["margin"]),
            nu=float(h["nu"]),
            beta=float(h["beta"]),
            learn_beta=True,
            num_classes=num_classes if h["beta_per_class"] else None,
            distance=distances.LpDistance(normalize_embeddings=False, p=2, power=1),
        )

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        triplets = distance_weighted_triplets(
            embeddings, labels, self.cutoff, self.nonzero_loss_cutoff
        )
        if len(triplets[0]) == 0:
            return zero_loss(embeddings)
        return self.loss(embeddings, labels, triplets)


@register_method("margin")
class Margin(Method):
    paper = "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017"
    defaults: ClassVar[HParams] = {
        "margin": 0.2,
        "beta": 1.2,
        "beta_per_class": True,
        "nu": 0.0,
        "beta_lr_mult": 1000.0,
        "cutoff": 0.5,
        "nonzero_loss_cutoff": 1.4,
    }
    defaults_source = (
        "Wu et al. 2017 §4-5 and the official MXNet example (margin 0.2, beta 1.2, nu 0, "
        "cutoff 0.5, nonzero-loss cutoff 1.4, batch-k 5); beta_lr_mult 1000: the ratio of the "
        "official code's rates (--lr-beta 0.1 for β, --lr 1e-4 for the network; kept in "
        "Fehervari et al.'s train_margin.py), β sharing the protocol's optimizer"
    )
    samples_per_class = 5
    lr_mult_key = "beta_lr_mult"

    def build_loss(self) -> nn.Module:
        return MarginLoss(self.num_classes, self.hparams)

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "margin": trial.suggest_float("margin", 0.05, 0.5, log=True),
            "beta": trial.suggest_float("beta", 0.6, 1.6),
            "nu": trial.suggest_float("nu", 0.0, 0.1),
            # 1-10^4 holds the paper default (1000) with a decade above it and three below.
            "beta_lr_mult": trial.suggest_float("beta_lr_mult", 1.0, 10000.0, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 5, 8]),
        }
