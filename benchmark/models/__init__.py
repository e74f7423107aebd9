"""Backbones (a registry) and the embedding head that turns features into embeddings."""

from __future__ import annotations

from dmlbench.models.backbones import BACKBONES, backbone_exists, create_backbone
from dmlbench.models.head import EmbeddingNet, build_model

__all__ = ["BACKBONES", "EmbeddingNet", "backbone_exists", "build_model", "create_backbone"]
