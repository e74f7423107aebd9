"""The method registry. Every module in this package registers one method on import.

Third-party methods register through the ``dmlbench.methods`` entry-point group (or
``dmlbench run --plugin MODULE``): they are imported by :func:`load_plugins`.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

from dmlbench.methods._base import (
    METHODS,
    HParams,
    Method,
    create_method,
    method_for,
    register_method,
)

__all__ = [
    "METHODS",
    "HParams",
    "Method",
    "create_method",
    "is_catalogue_entry",
    "load_plugins",
    "method_for",
    "register_method",
]


def is_catalogue_entry(name: str) -> bool:
    """Whether a registered method is a catalogue entry (a library's loss by name, docs/methods.md
    "The catalogue") rather than a method with a module of its own."""
    from dmlbench.methods._catalogue import CatalogueMethod

    return issubclass(METHODS.get(name), CatalogueMethod)


def _import_builtin() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def load_plugins(modules: list[str] | None = None) -> None:
    """Import methods from the ``dmlbench.methods`` entry points and the given modules."""
    from importlib.metadata import entry_points

    from dmlbench.errors import DmlbenchError

    for ep in entry_points(group="dmlbench.methods"):
        ep.load()
    if modules and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `--plugin my_methods` finds ./my_methods.py
    for name in modules or []:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise DmlbenchError(f"--plugin {name}: cannot import ({err})") from None
        except (Exception, SystemExit) as err:  # its code failed: a syntax error, a name twice
            first = (str(err).strip().splitlines() or [""])[0]
            raise DmlbenchError(
                f"--plugin {name}: importing it failed ({type(err).__name__}: {first})"
            ) from err


_import_builtin()
