"""Multi-class N-pair loss (Sohn, NeurIPS 2016), in the form of Fehervari et al. eq. 3.

Batches hold N classes × 2 images (``samples_per_class = 2``). With inner products as
similarities, every sample a of the batch is an anchor, p the other image of its class, and
every image n of another class a negative::

    L = 1/|B| Σ_a log(1 + Σ_{n: y_n ≠ y_a} exp(f_aᵀf_n − f_aᵀf_p))
        + λ/4 · (mean_a ‖f_a‖² + mean_p ‖f_p‖²)

The second term is Sohn's L2 regulariser that keeps the embedding norms small (his section
"L2 norm regularization of embedding vectors"); λ = ``l2_reg`` = 0.002 and the λ/4 form are
the defaults of the TensorFlow implementation (``tf.contrib.losses.metric_learning.npairs_loss``,
``reg_lambda=0.002``); Fehervari et al.'s code uses the same weight (0.0005 = 0.25 × 0.002). Under a
protocol with ``normalize: true`` every norm is 1: the term is a constant and no gradient of
it passes the normalisation layer back to the model.

Deliberate choices, all documented in the test:
- When a class has more than two images in the batch (a protocol may override the sampler),
  every ordered same-class pair (a, p) is a term and the mean runs over those pairs; with
  N × 2 batches this is exactly 1/|B| Σ_a. Singleton classes are negatives only.
- Eq. 3 (Fehervari et al.) uses *all* other-class images as negatives of every anchor. Sohn's own
  N-pair-mc loss, pytorch-metric-learning's ``NPairsLoss``, TensorFlow's ``npairs_loss`` and
  Fehervari et al.'s code instead take one anchor per class and only the other classes'
  *positives* as negatives (N − 1 of them, not 2(N − 1)). That is why pytorch-metric-learning
  is not used here: this module follows Fehervari et al. eq. 3, the formulation the benchmark
  reproduces.
- No positive pair in the batch (all singletons): zero loss. One class only: each term is
  log(1 + 0) = 0, so only the regulariser remains.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import label_masks, zero_loss


class NPairsLoss(nn.Module):
    def __init__(self, l2_reg: float) -> None:
        super().__init__()
        self.l2_reg = l2_reg

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pos, neg = label_masks(labels)
        a_idx, p_idx = torch.nonzero(pos, as_tuple=True)
        if len(a_idx) == 0:
            return zero_loss(embeddings)
        sim = embeddings @ embeddings.t()
        logits = sim[a_idx] - sim[a_idx, p_idx][:, None]  # f_a·f_n − f_a·f_p, (pairs, B)
        logits = logits.masked_fill(~neg[a_idx], float("-inf"))
        one = torch.zeros_like(logits[:, :1])  # the "1 +" inside the log
        terms = torch.logsumexp(torch.cat([one, logits], dim=1), dim=1)
        sq_norms = (embeddings * embeddings).sum(dim=1)
        reg = 0.25 * self.l2_reg * (sq_norms[a_idx].mean() + sq_norms[p_idx].mean())
        return terms.mean() + reg


@register_method("npairs")
class NPairs(Method):
    paper = (
        "Sohn, Improved Deep Metric Learning with Multi-class N-pair Loss Objective, NeurIPS 2016"
    )
    defaults: ClassVar[HParams] = {"l2_reg": 0.002}
    defaults_source = (
        "Fehervari et al. eq. 3; N classes × 2 per batch (Sohn); l2_reg λ = 0.002 with the λ/4 "
        "form of TensorFlow's npairs_loss (reg_lambda default), as in Fehervari et al.'s code"
    )
    samples_per_class = 2

    def build_loss(self) -> nn.Module:
        return NPairsLoss(float(self.hparams["l2_reg"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        # N-pair batches are part of the method: samples_per_class stays 2.
        return {"l2_reg": trial.suggest_float("l2_reg", 1e-4, 1e-1, log=True)}
