"""User-facing errors.

Every error a user can fix (a bad protocol key, a missing data root, an unknown method) is a
:class:`DmlbenchError`. The CLI prints its message on one line and exits with status 2, without
a traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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


class NonFiniteLossError(DmlbenchError):
    """Training produced a NaN or Inf loss; the trial fails with this reason."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"non-finite loss at step {step} ({value})")
        self.step = step
