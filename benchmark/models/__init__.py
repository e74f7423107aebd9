"""Backbones (a registry) and the embedding head that turns features into embeddings."""

from __future__ import annotations

from dmlbench.models import bn_inception as _bn_inception  # noqa: F401  (registers "bn-inception")
from dmlbench.models import small_resnet as _small_resnet  # noqa: F401  (registers "small-resnet")
from dmlbench.models import zoo as _zoo  # noqa: F401  (registers "googlenet", "resnet50")
from dmlbench.models.backbones import (
    BACKBONES,
    NO_PRETRAINED,
    backbone_exists,
    backbone_hint,
    check_weights,
    create_backbone,
)
from dmlbench.models.head import EmbeddingNet, build_model

__all__ = [
    "BACKBONES",
    "NO_PRETRAINED",
    "EmbeddingNet",
    "backbone_exists",
    "backbone_hint",
    "build_model",
    "check_weights",
    "create_backbone",
]
