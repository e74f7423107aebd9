"""Multi-similarity loss: VTHM mining + RAW weighting (Wang et al., CVPR 2019; preprint eq. 15–17).

Pairs are mined per anchor on cosine similarities S of L2-normalised embeddings (eq. 15–16):
a negative is kept when ``S_an > min_p S_ap − ε``, a positive when ``S_ap < max_n S_an + ε``.
The loss (eq. 17) is, averaged over all anchors of the batch (an anchor with no pair left
contributes 0, as in the official code)::

    1/α · log(1 + Σ_p exp(−α (S_ap − λ))) + 1/β · log(1 + Σ_n exp(β (S_an − λ)))

pytorch-metric-learning's ``MultiSimilarityMiner`` + ``MultiSimilarityLoss`` implement exactly
this (checked against the slow reference in tests/methods/test_multi_similarity.py), so they are
used. Defaults follow the paper (β = 50); the official code uses β = 40.
"""

from __future__ import annotations

from typing import Any

import torch
from pytorch_metric_learning import losses, miners
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method


class MultiSimilarity(nn.Module):
    def __init__(self, alpha: float, beta: float, base: float, epsilon: float) -> None:
        super().__init__()
        self.miner = miners.MultiSimilarityMiner(epsilon=epsilon)
        self.loss = losses.MultiSimilarityLoss(alpha=alpha, beta=beta, base=base)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(embeddings, labels, self.miner(embeddings, labels))


@register_method("multi-similarity")
class MultiSimilarityMethod(Method):
    paper = "Wang et al., Multi-Similarity Loss, CVPR 2019"
    defaults: HParams = {"alpha": 2.0, "beta": 50.0, "base": 0.5, "epsilon": 0.1}
    defaults_source = "Wang et al. preprint §5 (α=2, β=50, λ=0.5, mining margin ε=0.1)"
    samples_per_class = 5

    def build_loss(self) -> nn.Module:
        h = self.hparams
        return MultiSimilarity(h["alpha"], h["beta"], h["base"], h["epsilon"])

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "alpha": trial.suggest_float("alpha", 0.5, 10.0, log=True),
            "beta": trial.suggest_float("beta", 10.0, 80.0, log=True),
            "base": trial.suggest_float("base", 0.0, 1.0),
            "epsilon": trial.suggest_float("epsilon", 0.01, 0.3, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 5, 8]),
        }
