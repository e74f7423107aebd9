"""Normalized softmax over proxies (Zhai & Wu, BMVC 2019; Fehervari et al. 2019 eq. 15).

Features are layer-normalised without affine parameters before the embedding layer (the
method asks the model for it), embeddings and class proxies are L2-normalised, and the loss is
the cross-entropy of ``cos(x, p_k) / T`` over all proxies with temperature T = 0.05.

pytorch-metric-learning's ``NormalizedSoftmaxLoss`` is exactly the loss part (normalised
weights, cosine logits divided by the temperature, mean cross-entropy); it owns the proxies.
"""

from __future__ import annotations

from typing import Any

import torch
from pytorch_metric_learning import losses
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method


class NormSoftmax(nn.Module):
    def __init__(self, num_classes: int, embedding_size: int, temperature: float) -> None:
        super().__init__()
        self.loss = losses.NormalizedSoftmaxLoss(num_classes, embedding_size, temperature)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(embeddings, labels)


@register_method("proxy-softmax")
class ProxySoftmax(Method):
    paper = "Zhai & Wu, Classification is a Strong Baseline for DML, BMVC 2019"
    defaults: HParams = {"temperature": 0.05, "proxy_lr_mult": 100.0}
    defaults_source = (
        "Zhai & Wu 2019 §3.2 (temperature 0.05); Fehervari et al. 2019 eq. 15. proxy_lr_mult "
        "100: Zhai & Wu state no separate proxy rate; Fehervari et al.'s train_normproxy.py "
        "trains the proxies with Adam at 1e-3 (an absolute rate 100x the protocols' 1e-5, the "
        "same proxy rate as their proxy-nca)"
    )
    samples_per_class = 2
    feature_layer_norm = True
    lr_mult_key = "proxy_lr_mult"

    def build_loss(self) -> nn.Module:
        h = self.hparams
        return NormSoftmax(self.num_classes, self.embedding_size, float(h["temperature"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "temperature": trial.suggest_float("temperature", 0.01, 0.5, log=True),
            "proxy_lr_mult": trial.suggest_float("proxy_lr_mult", 1.0, 1000.0, log=True),
        }
