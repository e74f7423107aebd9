"""One generic registry for methods, backbones and data sets.

Modelled on timm's ``register_model`` / ``list_models``: components register themselves with a
decorator, names are unique, ``get`` suggests close matches for typos and ``list`` accepts a
shell-style pattern (``dmlbench list methods '*proxy*'``).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from dmlbench.errors import RegistryError

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Registry(Generic[T]):
    """A named collection of components of one kind.

    Args:
        kind: what is registered, used in error messages ("method", "backbone", ...).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name``; a duplicate name is a bug and raises."""

        def decorator(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorator

    def add(self, name: str, obj: T) -> None:
        if name in self._items and self._items[name] is not obj:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            hint = did_you_mean(name, list(self._items))
            known = ", ".join(sorted(self._items))
            raise RegistryError(f"unknown {self.kind} '{name}'{hint}; known: {known}") from None

    def list(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self._items if fnmatch.fnmatchcase(n, pattern))

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)
