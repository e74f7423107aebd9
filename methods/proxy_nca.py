"""Proxy-NCA (Movshovitz-Attias et al., "No Fuss Distance Metric Learning using Proxies",
ICCV 2017; Fehervari et al. eq. 14).

Every training class c owns a learnable proxy p_c. Embeddings and proxies are L2-normalised
and multiplied by a constant s (Fehervari et al. §4.2: with normalised proxies training stalls
unless the embeddings are scaled by a constant or given a small temperature; Fehervari et al.'s code
multiplies both by 3). For a sample x of class y, with squared Euclidean distances as in the
paper's NCA::

    ℓ(x) = −log( exp(−‖s·x̂ − s·p̂_y‖²) / Σ_{z ≠ y} exp(−‖s·x̂ − s·p̂_z‖²) )
         = s²‖x̂ − p̂_y‖² + log Σ_{z ≠ y} exp(−s²‖x̂ − p̂_z‖²)

and the loss is the mean of ℓ over the batch.

Choices:
    * The denominator sums over the *negative* proxies only, as in the paper (NCA's Z is the set
      of negatives) and in Fehervari et al.'s reproduction (``exclude_positives=True``). The
      loss can therefore be negative (its infimum is log(C − 1) − 4s²); only its gradient
      matters. pytorch-metric-learning's ``ProxyNCALoss`` puts every proxy in the denominator
      (cross-entropy over ``softmax_scale × −‖x̂ − p̂‖²``); per sample its value is
      ``softplus(ℓ)``, which tests/methods/test_proxy_nca.py checks. That is a different loss,
      so this one is written here.
    * ``‖x̂ − p̂‖² = 2 − 2 x̂·p̂`` for unit vectors: one (B, C) matrix product, so the loss stays
      cheap with tens of thousands of classes (SOP).
    * Proxies start as N(0, 1) draws (pytorch-metric-learning's initialisation); being
      normalised, only their direction matters. Their learning rate is ``lr × proxy_lr_mult``,
      100 by default as in the authors' code: under Adam at the real protocols' 1e-5, proxies
      at the backbone's rate end where they started (mean cosine 0.9998 between start and end
      over CUB's 2,880 steps; tests/methods/test_lr_multipliers.py).
    * Degenerate batches need no care: the negatives are proxies, not batch samples, so a batch
      of one class or of singletons is as good as any. Fewer than two training classes leave no
      negative proxy: that is an error at construction.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.methods._base import HParams, Method, register_method


def nca_excluding_positive(
    x: torch.Tensor, proxies: torch.Tensor, targets: torch.Tensor, scale: float
) -> torch.Tensor:
    """Per-sample NCA against the negatives only, on normalised and scaled vectors.

    Args:
        x: embeddings (B, d), any norm.
        proxies: proxies (C, d), any norm.
        targets: proxy index of each sample (B,), in 0..C-1.
        scale: multiplier s of the normalised vectors (distances are multiplied by s²).
    """
    x = F.normalize(x, dim=-1)
    p = F.normalize(proxies, dim=-1).to(x.dtype)
    d = (2.0 - 2.0 * x @ p.t()).clamp_min(0.0) * scale**2
    own = F.one_hot(targets, p.shape[0]).bool()
    pos = d.gather(1, targets[:, None]).squeeze(1)
    return pos + torch.logsumexp((-d).masked_fill(own, float("-inf")), dim=1)


class ProxyNCALoss(nn.Module):
    def __init__(self, num_classes: int, embedding_size: int, scale: float) -> None:
        super().__init__()
        if num_classes < 2:
            raise DmlbenchError(f"proxy-nca needs at least 2 training classes, got {num_classes}")
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_size))
        self.scale = scale

    def per_sample(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nca_excluding_positive(embeddings, self.proxies, labels, self.scale)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.per_sample(embeddings, labels).mean()


@register_method("proxy-nca")
class ProxyNCA(Method):
    paper = "Movshovitz-Attias et al., No Fuss Distance Metric Learning using Proxies, ICCV 2017"
    defaults: ClassVar[HParams] = {"scale": 3.0, "proxy_lr_mult": 100.0}
    defaults_source = (
        "Fehervari et al. 2019 eq. 14 and §4.2 (scaled normalised proxies); scale 3 from their "
        "code (train_proxy.py --embedding-multiplier 3); proxy_lr_mult 100 from the same script "
        "(--lr-proxynca 1e-3 with --lr-embedding 1e-5: proxies at 100x the embedding's rate)"
    )
    samples_per_class = 2
    lr_mult_key = "proxy_lr_mult"

    def build_loss(self) -> nn.Module:
        return ProxyNCALoss(self.num_classes, self.embedding_size, float(self.hparams["scale"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "scale": trial.suggest_float("scale", 1.0, 8.0, log=True),
            "proxy_lr_mult": trial.suggest_float("proxy_lr_mult", 1.0, 1000.0, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [1, 2, 4]),
        }
