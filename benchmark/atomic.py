"""Atomic file writes: readers see the old file or the new one, never a torn half.

Every file dmlbench writes that a later run reads back (records, checkpoints, generated data,
neighbour caches) goes through :func:`atomic_write`: a temp file in the same folder, fsync,
then ``os.replace``, which is atomic on POSIX and Windows. The file gets the user's normal
mode (``0666`` less the umask, as ``open`` would give it), not ``mkstemp``'s private ``0600``:
colleagues sharing a results folder must be able to read the records and reports.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dmlbench.errors import DmlbenchError


class WriteError(DmlbenchError, OSError):
    """A file could not be written (disk full, read-only folder, quota): one line naming it.

    Also an :class:`OSError` with the original ``errno``, so callers that can go on without
    the file (a regenerable cache) still catch it as one.
    """

    def __init__(self, path: Path, err: OSError) -> None:
        super().__init__(err.errno, err.strerror)
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: cannot write ({self.strerror or 'I/O error'})"


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` by calling ``write(fh)`` on a temp file, then renaming it into place.

    Raises:
        WriteError: the folder cannot be created or the file written (``No space left on
            device``...); the old file, if any, is untouched and no temp file is left.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temp(path)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except WriteError:
        raise
    except OSError as err:
        raise WriteError(path, err) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


_TEMP_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
)


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path``, created with mode 0666 so the kernel applies the umask
    (and any default ACL) as for any other file; ``O_EXCL`` keeps ``mkstemp``'s safety."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temp file name for {path.name}")


def atomic_savez(path: Path, **arrays: np.ndarray) -> None:
    """``np.savez`` to ``path``, atomically."""
    atomic_write(path, lambda fh: np.savez(fh, **arrays))  # type: ignore[arg-type]
