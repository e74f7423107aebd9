"""Atomic file writes: readers see the old file or the new one, never a torn half.

Every file dmlbench writes that a later run reads back (records, checkpoints, generated data,
neighbour caches) goes through :func:`atomic_write`: a temp file in the same folder, fsync,
then ``os.replace``, which is atomic on POSIX and Windows.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` by calling ``write(fh)`` on a temp file, then renaming it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_savez(path: Path, **arrays: np.ndarray) -> None:
    """``np.savez`` to ``path``, atomically."""
    atomic_write(path, lambda fh: np.savez(fh, **arrays))  # type: ignore[arg-type]
