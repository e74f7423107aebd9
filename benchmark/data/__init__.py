"""Data sets: a registry of sources, each producing train/test :class:`Split` objects.

A source declares a ``Params`` model (validated as ``data.params`` of the protocol), a
``load`` function and what is known of it (:class:`About`). Embedded sources generate their
images; real ones read them from a root.

Sources are found the way methods are: every module of this package whose name does not
start with ``_`` is imported, and those that define a source register it, so a new data set
is its module (and its protocol), not an entry in a list here. The modules are imported on
first use of the names below (PEP 562), not when the package is imported: the sources import
torch (seconds), and a command that only builds its parser imports this package through
:mod:`dmlbench.data.prepare`. Asking for any of them imports every source first, so whoever
sees the registry sees all of it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dmlbench.data.about import About
    from dmlbench.data.base import DATASETS, DatasetSource, DataSplits, Split, load_data

__all__ = ["DATASETS", "About", "DataSplits", "DatasetSource", "Split", "load_data"]


def source_modules() -> list[str]:
    """The modules of this package that discovery imports (sources and their helpers),
    found on ``__path__`` without importing any of them."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name[0] != "_")


def discover() -> None:
    """Import every module of the package, so that each source registers itself.

    Idempotent (a module already imported is not run again): a folder added to ``__path__``
    later is picked up by calling this again.
    """
    for module in source_modules():
        importlib.import_module(f"{__name__}.{module}")


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    discover()
    value = getattr(importlib.import_module(f"{__name__}.base"), name)
    globals()[name] = value
    return value
