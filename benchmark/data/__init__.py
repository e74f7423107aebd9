"""Data sets: a registry of sources, each producing train/test :class:`Split` objects.

A source declares a ``Params`` model (validated as ``data.params`` of the protocol) and a
``load`` function. Embedded sources generate their images; real ones read them from a root.
"""

from __future__ import annotations

from dmlbench.data import cars196 as _cars196  # noqa: F401  (registers "cars196")
from dmlbench.data import cub200 as _cub200  # noqa: F401  (registers "cub200")
from dmlbench.data import custom as _custom  # noqa: F401  (registers "images")
from dmlbench.data import emoji as _emoji  # noqa: F401  (registers "emoji")
from dmlbench.data import glyphs as _glyphs  # noqa: F401  (registers "glyphs")
from dmlbench.data import icons as _icons  # noqa: F401  (registers "icons")
from dmlbench.data import inshop as _inshop  # noqa: F401  (registers "inshop")
from dmlbench.data import mpii as _mpii  # noqa: F401  (registers "mpii-pose")
from dmlbench.data import poses as _poses  # noqa: F401  (registers "poses")
from dmlbench.data import sop as _sop  # noqa: F401  (registers "sop")
from dmlbench.data.base import DATASETS, DatasetSource, DataSplits, Split, load_data

__all__ = ["DATASETS", "DataSplits", "DatasetSource", "Split", "load_data"]
