"""User-facing errors, and the registries whose look-ups raise them.

Every error a user can fix (a bad protocol key, a missing data root, an unknown method) is a
:class:`DmlbenchError`. The CLI prints its message on one line and exits with status 2, without
a traceback; everything else is a bug and keeps its traceback.

:class:`Registry` (methods, backbones, data sets) lives here because what it adds to a dict is
its errors: an unknown name is a :class:`RegistryError` with a did-you-mean, a duplicate one
a bug. Modelled on timm's ``register_model`` / ``list_models``: components register themselves
with a decorator, names are unique, ``get`` suggests close matches for typos and ``list``
accepts a shell-style pattern matched regardless of case (``dmlbench list methods
'*Proxy*'``).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError


class DmlbenchError(Exception):
    """An error caused by the user's input, reported as one line with exit status 2."""


class ProtocolError(DmlbenchError):
    """A protocol file is missing, malformed or fails validation (always one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.splitlines()))


class RegistryError(DmlbenchError, KeyError):
    """A name is not registered (the message suggests close matches)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DataError(DmlbenchError):
    """A data set root, index file or image is missing or corrupt; the message names the path."""


class MissingFile(DataError):
    """A file or folder a data set reads is not under its root; ``paths``: what was looked for
    (any one would do). Kept apart from other data errors so that the data loader can look one
    folder down for it (a root given one level too high is the common mistake)."""

    def __init__(self, message: str, *paths: Path) -> None:
        super().__init__(message)
        self.paths = paths


class PluginLossError(DmlbenchError):
    """A method's loss returned something other than one number with a gradient, or a
    plugin's loss raised: one line naming the method's loss and what it did."""


class NonFiniteLossError(DmlbenchError):
    """Training produced a NaN or Inf loss; the trial fails with this reason."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"non-finite loss at step {step} ({value})")
        self.step = step


def did_you_mean(name: str, choices: list[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def format_validation_error(
    err: ValidationError, model: type[BaseModel], prefix: str | None = None
) -> str:
    """One line per pydantic error: ``data.foo: unknown key (did you mean 'root'?)``."""
    parts = []
    for e in err.errors():
        loc = ".".join(_show_key(x) for x in e["loc"])
        key = f"{prefix}.{loc}" if prefix else loc
        if e["type"] == "extra_forbidden":
            allowed = _fields_at(model, e["loc"][:-1])
            hint = did_you_mean(str(e["loc"][-1]), allowed) if allowed else ""
            parts.append(f"{key}: unknown key{hint}")
        elif e["type"] == "missing":
            parts.append(f"{key}: required key is missing")
        else:
            got = e.get("input")
            shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
            parts.append(f"{key}: {e['msg']}{shown}")
    return "; ".join(parts)


def _show_key(key: Any) -> str:
    """A key as written in YAML, quoted when it holds spaces, newlines or odd characters."""
    text = str(key)
    return text if text and all(c.isalnum() or c in "_-@" for c in text) else repr(text)


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    current: Any = model
    for key in loc:
        field = getattr(current, "model_fields", {}).get(key)
        if field is None:
            return []
        current = field.annotation
    return list(getattr(current, "model_fields", {}))


# --------------------------------------------------------------------------- registries

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
