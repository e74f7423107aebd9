"""Backbones (a registry) and the embedding head that turns features into embeddings.

Backbones are found the way methods and data sets are: every module of this package whose
name does not start with ``_`` is imported when the package is, and a module that defines a
backbone registers it (``@BACKBONES.register("name")``), so a new backbone is its module, not
an entry in a list here. Unlike the data sets' discovery this one is eager: the backbone
modules import only torch, which whoever imports the models needs anyway.
"""

from __future__ import annotations

import importlib
import pkgutil

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
    "backbone_modules",
    "build_model",
    "check_weights",
    "create_backbone",
    "discover",
]


def backbone_modules() -> list[str]:
    """The modules of this package that discovery imports (backbones and their helpers),
    found on ``__path__`` without importing any of them."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name[0] != "_")


def discover() -> None:
    """Import every module of the package, so that each backbone registers itself.

    Idempotent (a module already imported is not run again): a folder added to ``__path__``
    later is picked up by calling this again.
    """
    for module in backbone_modules():
        importlib.import_module(f"{__name__}.{module}")


discover()
