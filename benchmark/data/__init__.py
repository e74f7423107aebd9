"""Data sets: a registry of sources, each producing train/test :class:`Split` objects.

A source declares a ``Params`` model (validated as ``data.params`` of the protocol) and a
``load`` function. Embedded sources generate their images; real ones read them from a root.

The names below are loaded on first use (PEP 562), not when the package is imported: the
sources import torch (seconds), and a command that only builds its parser imports this package
through :mod:`dmlbench.data.prepare`. Asking for any of them imports every source first, so
whoever sees the registry sees all of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dmlbench.data.base import DATASETS, DatasetSource, DataSplits, Split, load_data

#: The modules whose import registers a source (under another name where it differs).
SOURCE_MODULES = (
    "cars196",
    "cub200",
    "custom",  # "images"
    "emoji",
    "glyphs",
    "icons",
    "inshop",
    "mpii",  # "mpii-pose"
    "poses",
    "sop",
)

__all__ = ["DATASETS", "DataSplits", "DatasetSource", "Split", "load_data"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in SOURCE_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    value = getattr(importlib.import_module(f"{__name__}.base"), name)
    globals()[name] = value
    return value
