"""Load a regenerable ``.npz`` cache, or rebuild it: the one place that decides "damaged".

Generated data (glyphs, poses) and dense-neighbour lists are cached as ``.npz`` files that can
always be rebuilt from their inputs. A cache file can be truncated by a full disk, overwritten
by a stray copy or flipped by bad storage; a run must then rebuild it with a warning naming the
file, never stop on a ``zipfile``/``numpy`` exception the user can do nothing about. Every
reader goes through :func:`load_or_rebuild` so all of them agree on what counts as damaged:
any error while opening or reading the archive, a missing array, or arrays that fail the
caller's own shape check.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dmlbench.atomic import atomic_savez

log = logging.getLogger(__name__)

# What reading a damaged .npz can raise: zipfile's own errors (BadZipFile, bad CRC), numpy's
# header parser (ValueError, SyntaxError from ast.literal_eval), short reads (EOFError), zlib
# and struct on mangled local headers, plus the OSError of an unreadable file.
DAMAGED = (
    OSError,
    ValueError,
    KeyError,
    EOFError,
    SyntaxError,
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    NotImplementedError,  # zipfile: an unsupported compression method read from a flipped byte
)

Arrays = tuple[np.ndarray, ...]


def read_npz(path: Path, keys: Sequence[str]) -> Arrays:
    """The arrays ``keys`` of ``path``, fully read (never pickled objects)."""
    z = np.load(path, allow_pickle=False)
    if not isinstance(z, np.lib.npyio.NpzFile):  # a lone .npy header: not what was written
        raise ValueError("not an .npz archive")
    with z:
        return tuple(np.asarray(z[k]) for k in keys)


def load_or_rebuild(
    path: Path,
    keys: Sequence[str],
    build: Callable[[], Arrays],
    check: Callable[[Arrays], bool] | None = None,
    what: str = "cache",
) -> Arrays:
    """The arrays ``keys`` cached at ``path``; built (and saved) when absent or damaged.

    Args:
        path: the ``.npz`` file.
        keys: names of the arrays, in the order they are returned and built.
        build: computes the arrays from scratch (same order as ``keys``).
        check: ``True`` when loaded arrays are plausible (shapes, dtypes); a byte flip in an
            ``.npy`` header can yield arrays that load but are not what was written.
        what: the kind of cache, for the warning (``"glyphs cache"``).
    """
    if path.is_file():
        try:
            arrays = read_npz(path, keys)
            if check is None or check(arrays):
                with contextlib.suppress(OSError):  # last use, for `dmlbench cache clean`
                    os.utime(path)
                return arrays
            problem = "arrays of the wrong shape or type"
        except DAMAGED as err:
            problem = f"{type(err).__name__}: {err}".splitlines()[0][:200]
        log.warning("%s %s is damaged (%s); rebuilding it", what, path, problem)
    arrays = build()
    try:
        atomic_savez(path, **dict(zip(keys, arrays, strict=True)))
    except OSError as err:  # a read-only or full cache folder: use the arrays, say why
        log.warning("%s %s could not be written (%s); not cached", what, path, err.strerror)
    return arrays
