"""User-facing errors.

Every error a user can fix (a bad protocol key, a missing data root, an unknown method) is a
:class:`DmlbenchError`. The CLI prints its message on one line and exits with status 2, without
a traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

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
