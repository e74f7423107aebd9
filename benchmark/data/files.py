"""Shared plumbing of the real-image data sets (CUB-200-2011, Cars196, SOP, In-shop).

A real-image source only turns its official index files into a list of :class:`Entry` (relative
path, class id, role); :class:`ImageSource` does the rest the same way for all of them:

- checks the root and every listed file, with errors that name the missing path;
- computes the manifest (relative paths, file sizes, labels, roles) and its hash, which is the
  data fingerprint written into every record (the image bytes are not hashed: a file whose
  size changes changes the fingerprint, and the cache is rebuilt);
- decodes and resizes every image once into the on-disk cache (:mod:`dmlbench.data.cache`);
- builds the train split with the protocol's ``images.train`` pipeline and the test split with
  ``images.test``; In-shop's test split also gets its query and gallery index arrays.

The image pipelines come from the protocol, so a source is constructed with them:
``Cub200(protocol.images)`` (what :func:`load_protocol_data` does).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from pydantic import BaseModel

from dmlbench.data.base import DatasetSource, DataSplits, Split
from dmlbench.data.cache import CachedImages, open_or_build
from dmlbench.data.transforms import build_pipeline, is_random, require_fixed_size
from dmlbench.errors import DataError, MissingFile
from dmlbench.protocol import ImagesSpec

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

log = logging.getLogger(__name__)
ROLES = ("train", "test", "query", "gallery")


@dataclass(frozen=True)
class Entry:
    """One image of a manifest: path relative to the root (POSIX), class id, role."""

    path: str
    label: int
    role: str


def require_root(name: str, root: Path | None) -> Path:
    """The data root, or an error saying how to set it and how to get the data."""
    hint = f"run `dmlbench data prepare {name} --root DIR` to download it or to see where files go"
    if root is None:
        raise DataError(f"{name}: no data root; set data.root in the protocol or pass --data-root")
    if "$" in str(root):
        raise DataError(
            f"{name}: data root {root} has an unset variable "
            "(export DMLBENCH_DATA or pass --data-root)"
        )
    if not root.is_dir():
        raise DataError(f"{name}: data root {root} is not a directory; {hint}")
    return root


def require_file(path: Path, what: str = "index file") -> Path:
    """``path``, or :class:`MissingFile` naming it (and, from the loader, the child folder of
    the root that holds it: :func:`~dmlbench.data.base.child_root_hint`)."""
    if not path.is_file():
        raise MissingFile(f"{path}: {what} not found", path)
    return path


def read_rows(path: Path, min_fields: int, skip: int = 0) -> list[list[str]]:
    """Whitespace-separated rows of a text index file; a short row is an error naming the line."""
    rows = []
    try:
        text = require_file(path).read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as err:
        at = path.read_bytes()[: err.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{at}: not UTF-8 text (byte {err.object[err.start]:#04x}); "
            "the index file is damaged or not the official one"
        ) from None
    except OSError as err:
        raise DataError(f"{path}: cannot read index file ({err.strerror})") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if n <= skip or not line.strip():
            continue
        fields = line.split()
        if len(fields) < min_fields:
            raise DataError(f"{path}:{n}: expected {min_fields} fields, got {line.strip()!r}")
        rows.append(fields)
    return rows


def to_int(value: str, path: Path, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise DataError(f"{path}: {what} {value!r} is not an integer") from None


def in_range(label: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= label <= bounds[1]


def check_inside(root: Path, entries: list[Entry]) -> None:
    """Refuse index entries that leave the data root (``../../etc/passwd``, ``/home/x.jpg``).

    Index files come with downloaded or shared data sets: one must not make dmlbench read (and
    cache) files elsewhere on the machine. Checked lexically, so it costs no system call.

    Symbolic links inside the root are followed, wherever they point: a link is placed by
    whoever owns the root (images linked from shared storage are the usual way to assemble a
    data set), whereas an index file may come from anyone. The data fingerprint counts the
    size of the file a link points to, as for any other image.
    """
    for e in entries:
        rel = os.path.normpath(e.path)
        if os.path.isabs(e.path) or rel == ".." or rel.startswith(("../", "..\\")):
            raise DataError(
                f"{root}: an index file lists {e.path!r}, outside the data root; refused"
            )


def manifest(root: Path, entries: list[Entry], name: str) -> tuple[np.ndarray, str]:
    """File sizes and the manifest hash; a missing file is an error naming it."""
    check_inside(root, entries)
    sizes = np.empty(len(entries), dtype=np.int64)
    missing = []
    for i, e in enumerate(entries):
        try:
            sizes[i] = os.stat(root / e.path).st_size
        except OSError:
            missing.append(root / e.path)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(f"{missing[0]}: image file is missing{more}")
    h = hashlib.sha256(f"{name}\n".encode())
    for e, size in zip(entries, sizes, strict=True):
        h.update(f"{e.role}\t{e.path}\t{int(size)}\t{e.label}\n".encode())
    return sizes, h.hexdigest()


class ImageSource(DatasetSource):
    """Base of the real-image sources: subclasses implement :meth:`entries`.

    Class attributes:
        name: the registry name (used in messages).
        expected: the official image count per role; a different count logs a warning and is
            noted in ``DataSplits.info`` (a fixture or a partial copy still loads).
        takes_images: the source is constructed with the protocol's ``images`` section.
    """

    name: ClassVar[str] = ""
    expected: ClassVar[dict[str, int]] = {}
    takes_images: ClassVar[bool] = True

    def __init__(self, images: ImagesSpec | None = None, workers: int | None = None) -> None:
        self.images = images
        self.workers = workers
        self.check_test: Callable[[Split], None] | None = None  # set by load_data

    def entries(self, params: BaseModel, root: Path) -> list[Entry]:
        raise NotImplementedError

    def load(self, params: BaseModel, root: Path | None, cache_dir: Path) -> DataSplits:
        if self.images is None:
            raise DataError(
                f"{self.name}: real images need the protocol's image pipelines; construct the "
                f"source with them ({type(self).__name__}(protocol.images)), as "
                "dmlbench.data.files.load_protocol_data does"
            )
        train_size = require_fixed_size(self.images.train, f"{self.name}: images.train")
        test_size = require_fixed_size(self.images.test, f"{self.name}: images.test")
        root = require_root(self.name, root)
        entries = self.entries(params, root)
        roles = np.array([e.role for e in entries])
        counts = {r: int((roles == r).sum()) for r in ROLES if (roles == r).any()}
        if not counts.get("train") or not (counts.get("test") or counts.get("query")):
            raise DataError(f"{self.name}: {root} lists no training or no test images {counts}")
        _, fingerprint = manifest(root, entries, self.name)
        files = [root / e.path for e in entries]
        labels = np.array([e.label for e in entries], dtype=np.int64)

        def split(spec_name: str, idx: np.ndarray) -> CachedImages:
            spec = getattr(self.images, spec_name)
            cache = open_or_build(cache_dir, fingerprint, files, spec.resize, self.workers)
            return CachedImages(cache, idx, build_pipeline(spec, resized=True), is_random(spec))

        train_idx = np.flatnonzero(roles == "train")
        test_idx = np.flatnonzero(roles != "train")
        queries = gallery = None
        if counts.get("query"):
            test_roles = roles[test_idx]
            queries = np.flatnonzero(test_roles == "query")
            gallery = np.flatnonzero(test_roles == "gallery")
        if self.check_test is not None:  # before decoding thousands of images, not after
            labels_only = torch.utils.data.TensorDataset()
            self.check_test(Split(labels_only, labels[test_idx], "class", queries, gallery))
        test = Split(split("test", test_idx), labels[test_idx])
        test.queries, test.gallery = queries, gallery
        info = {
            "root": str(root),
            "counts": counts,
            "image_size": {"train": train_size, "test": test_size},
            "train_classes": int(np.unique(labels[train_idx]).size),
            "test_classes": int(np.unique(labels[test_idx]).size),
        }
        if self.expected and counts != self.expected:
            log.warning(
                "%s: image counts %s differ from the official %s (root %s)",
                self.name,
                counts,
                self.expected,
                root,
            )
            info["differs_from_official"] = self.expected
        return DataSplits(
            train=Split(split("train", train_idx), labels[train_idx]),
            test=test,
            fingerprint=fingerprint,
            info=info,
        )


def load_protocol_data(
    protocol: Protocol, data_root: str | None = None, cache: Path | None = None
) -> DataSplits:
    """:func:`dmlbench.data.load_data` (kept as the name the loaders' docs and tests use)."""
    from dmlbench.data.base import load_data

    return load_data(protocol, data_root, cache)


def walk_files(directory: Path, suffixes: Iterable[str] = (".jpg", ".jpeg", ".png")) -> list[Path]:
    """Every image file under ``directory``, sorted (for the csv re-pack of Cars196)."""
    wanted = {s.lower() for s in suffixes}
    return sorted(p for p in directory.rglob("*") if p.suffix.lower() in wanted and p.is_file())
