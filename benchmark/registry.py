"""One generic registry for methods, backbones and data sets.

Modelled on timm's ``register_model`` / ``list_models``: components register themselves with a
decorator, names are unique, ``get`` suggests close matches for typos and ``list`` accepts a
shell-style pattern (``dmlbench list methods '*proxy*'``), matched regardless of case.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from dmlbench.errors import DmlbenchError, RegistryError, did_you_mean

T = TypeVar("T")


def name_matches(name: str, pattern: str) -> bool:
    """Whether ``name`` matches the shell-style ``pattern``, regardless of case.

    Registered names are lower case, but users type the papers' class names (``*Proxy*``,
    ``pml:*circle*``): a case-sensitive match found nothing and read as "no such method".
    """
    return fnmatch.fnmatchcase(name.casefold(), pattern.casefold())


class Registry(Generic[T]):
    """A named collection of components of one kind.

    Args:
        kind: what is registered, used in error messages ("method", "backbone", ...).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._resolvers: dict[str, Callable[[str], T]] = {}
        self._resolved: dict[str, T] = {}

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

    def add_resolver(self, prefix: str, resolve: Callable[[str], T]) -> None:
        """Build names starting with ``prefix`` on demand (``pml:CircleLoss``).

        A resolved name works wherever a registered one does (``get``, ``in``) but is not
        listed: ``list()`` stays the registered set, so ``--method all`` keeps its meaning.
        ``resolve`` raises a one-line error for a name it cannot build.
        """
        self._resolvers[prefix] = resolve

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._resolved:
            return self._resolved[name]
        for prefix, resolve in self._resolvers.items():
            if name.startswith(prefix):
                self._resolved[name] = resolve(name)
                return self._resolved[name]
        try:
            return self._items[name]
        except KeyError:
            hint = did_you_mean(name, list(self._items))
            known = ", ".join(sorted(self._items))
            raise RegistryError(f"unknown {self.kind} '{name}'{hint}; known: {known}") from None

    def list(self, pattern: str = "*") -> list[str]:
        """The registered names matching ``pattern`` (:func:`name_matches`), sorted."""
        return sorted(n for n in self._items if name_matches(n, pattern))

    def __contains__(self, name: object) -> bool:
        if name in self._items or name in self._resolved:
            return True
        if not isinstance(name, str) or not any(map(name.startswith, self._resolvers)):
            return False
        try:
            self.get(name)
        except DmlbenchError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)
