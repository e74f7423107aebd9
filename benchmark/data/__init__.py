"""Data sets: a registry of sources, each producing train/test :class:`Split` objects.

A source declares a ``Params`` model (validated as ``data.params`` of the protocol) and a
``load`` function. Embedded sources generate their images; real ones read them from a root.
"""

from __future__ import annotations

from dmlbench.data.base import DATASETS, DatasetSource, DataSplits, Split, load_data
from dmlbench.data import glyphs as _glyphs  # noqa: F401  (registers "glyphs")

__all__ = ["DATASETS", "DataSplits", "DatasetSource", "Split", "load_data"]
