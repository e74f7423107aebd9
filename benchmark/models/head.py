"""The embedding network: backbone features → (optional layer norm) → linear → (L2 norm)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.models.backbones import create_backbone
from dmlbench.protocol import ModelSpec


class EmbeddingNet(nn.Module):
    """Backbone plus a linear embedding head.

    Args:
        backbone: maps images to features (B, feature_dim).
        feature_dim: width of the backbone's features.
        embedding_size: width of the embedding.
        normalize: L2-normalise the embedding (the protocol decides, for every method alike).
        feature_layer_norm: standardise features before the head without learnable affine
            parameters, as normalized softmax (Zhai & Wu 2018) does; a method may ask for it.
    """

    def __init__(
        self,
        backbone: nn.Module,
        feature_dim: int,
        embedding_size: int,
        normalize: bool = True,
        feature_layer_norm: bool = False,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.norm = (
            nn.LayerNorm(feature_dim, elementwise_affine=False) if feature_layer_norm else None
        )
        self.head = nn.Linear(feature_dim, embedding_size)
        self.normalize = normalize
        self.embedding_size = embedding_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.backbone(x)
        if self.norm is not None:
            features = self.norm(features)
        emb = self.head(features)
        return F.normalize(emb, dim=1) if self.normalize else emb


def build_model(
    spec: ModelSpec, in_channels: int, feature_layer_norm: bool = False
) -> EmbeddingNet:
    backbone, dim = create_backbone(spec.backbone, spec.pretrained, in_channels, spec.pooling)
    if spec.frozen_bn:
        freeze_batchnorm(backbone)
    return EmbeddingNet(backbone, dim, spec.embedding_size, spec.normalize, feature_layer_norm)


def freeze_batchnorm(module: nn.Module) -> None:
    """Keep BatchNorm statistics and affine parameters fixed (common with small DML batches)."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()
            m.train = lambda mode=True, _m=m: _m  # type: ignore[method-assign,misc]
            for p in m.parameters():
                p.requires_grad_(False)
