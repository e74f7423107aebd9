"""The data containers every source produces and the trainer and evaluator consume."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import BaseModel

from dmlbench.data.about import About
from dmlbench.errors import MissingFile, Registry

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

log = logging.getLogger(__name__)

LabelKind = Literal["class", "continuous"]


class ArrayImages(torch.utils.data.Dataset):
    """Images held in memory as one uint8 array (N, C, H, W), fetched a batch at a time.

    ``__getitems__`` lets a DataLoader fetch a whole batch with one indexing operation instead
    of N ``__getitem__`` calls and a collate, which matters for small images on a CPU.
    """

    def __init__(self, images: np.ndarray) -> None:
        if images.dtype != np.uint8 or images.ndim != 4:
            raise ValueError(
                f"expected uint8 (N, C, H, W) images, got {images.dtype} {images.shape}"
            )
        self.images = torch.from_numpy(images)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.images[index].float().div_(255.0)

    def __getitems__(self, indices: list[int]) -> torch.Tensor:
        return self.to_float(self.uint8_items(indices))

    def uint8_items(self, indices: list[int]) -> torch.Tensor:
        """The batch as stored, uint8 (:class:`Uint8Batches`)."""
        return self.images[torch.as_tensor(indices)]

    @staticmethod
    def to_float(x: torch.Tensor) -> torch.Tensor:
        """uint8 -> float32 in [0, 1], as :meth:`__getitems__` has always computed it (a
        division by 255, elementwise: the same bits on any device)."""
        return x.float().div_(255.0)


class Uint8Batches(torch.utils.data.Dataset):
    """A dataset's batches before their conversion to float: what training moves to its device.

    A batch of uint8 images is a quarter of its float32 size, so it crosses to a GPU (from
    pinned memory) four times faster; ``to_float`` then runs there. Both halves are the
    dataset's own (``uint8_items``, ``to_float``), and the conversion is elementwise, so the
    images the network sees are bit for bit those of ``dataset[indices]``
    (``tests/data/test_uint8_batches.py``). :func:`uint8_batches` builds one where it can.
    """

    def __init__(self, dataset: Any, indices: list[int] | None = None) -> None:
        self.dataset = dataset
        self.indices = indices  # a torch Subset's, unwrapped
        self.to_float = dataset.to_float

    def __len__(self) -> int:
        return len(self.dataset) if self.indices is None else len(self.indices)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> torch.Tensor:
        if self.indices is not None:
            indices = [self.indices[i] for i in indices]
        return self.dataset.uint8_items(indices)


def uint8_batches(dataset: Any) -> Uint8Batches | None:
    """The uint8 batches of ``dataset`` (also behind a ``torch.utils.data.Subset``), or
    ``None`` when it cannot give its images before their conversion to float."""
    indices = None
    if isinstance(dataset, torch.utils.data.Subset):
        dataset, indices = dataset.dataset, list(dataset.indices)
    uint8_items = getattr(dataset, "uint8_items", None)
    if uint8_items is None or getattr(dataset, "to_float", None) is None:
        return None
    if hasattr(dataset, "can_give_uint8") and not dataset.can_give_uint8():
        return None
    return Uint8Batches(dataset, indices)


@dataclass
class Split:
    """One split (train, validation or test) of a data set.

    Attributes:
        images: a dataset whose items are image tensors in [0, 1], (C, H, W).
        labels: class ids (N,) for ``class`` labels, label vectors (N, L) for ``continuous``.
        label_kind: ``class`` or ``continuous``.
        queries: indices of the query items when evaluation is query → gallery (In-shop,
            poses); ``None`` means every item queries all the others.
        gallery: indices of the gallery items (with ``queries``).
    """

    images: torch.utils.data.Dataset
    labels: np.ndarray
    label_kind: LabelKind = "class"
    queries: np.ndarray | None = None
    gallery: np.ndarray | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_classes(self) -> int:
        return int(np.unique(self.labels).size) if self.label_kind == "class" else 0

    def subset(self, indices: np.ndarray) -> Split:
        """A split holding only ``indices`` (used to carve validation classes).

        ``extras`` carry over (the label distance of a continuous data set must not silently
        fall back to Euclidean); per-item extras (``groups``) are subset with the items, and
        shipped neighbour lists (``precomputed`` label distances, MPII) are restricted to the
        members and renumbered, so samplers never draw an item outside the subset. A
        query → gallery layout does not survive subsetting: every item queries the others.
        """
        indices = np.asarray(indices, dtype=np.int64)
        extras = dict(self.extras)
        labels = self.labels[indices]
        if "groups" in extras:
            extras["groups"] = np.asarray(extras["groups"])[indices]
        if extras.get("label_distance") == "precomputed" and "neighbours" in extras:
            extras["neighbours"], extras["neighbour_distances"] = restrict_neighbours(
                np.asarray(extras["neighbours"]), np.asarray(extras["neighbour_distances"]), indices
            )
            extras.pop("distances", None)  # a query x gallery block of the full split
            labels = np.arange(len(indices)).astype(self.labels.dtype).reshape(-1, 1)
        return Split(
            images=torch.utils.data.Subset(self.images, indices.tolist()),
            labels=labels,
            label_kind=self.label_kind,
            extras=extras,
        )

    def groups(self) -> np.ndarray:
        """The unit a validation split holds out: the class, or ``extras["groups"]`` (e.g. the
        base pose of a continuous-label image), or else each item on its own."""
        if "groups" in self.extras:
            return np.asarray(self.extras["groups"])
        if self.label_kind == "class":
            return np.asarray(self.labels).reshape(-1)
        return np.arange(len(self))


def restrict_neighbours(
    neighbours: np.ndarray, distances: np.ndarray, members: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Shipped neighbour lists of ``members`` only, renumbered to positions in ``members``.

    Row i of the result is member i's list with non-members dropped, order kept, so it is
    still sorted by label distance and holds the member's nearest members exactly. Rows keep
    the length of the shortest one (every row the same width, as the samplers index them);
    with complete lists (every other item, as the MPII bundle ships) that is ``len(members)
    - 1`` and nothing is lost.
    """
    position = np.full(len(neighbours), -1, dtype=np.int64)
    position[members] = np.arange(len(members))
    rows = position[np.asarray(neighbours)[members]]  # (n, M), -1 where not a member
    keep = rows >= 0
    width = int(keep.sum(axis=1).min()) if len(members) else 0
    order = np.argsort(~keep, axis=1, kind="stable")[:, :width]  # members first, order kept
    nn = np.take_along_axis(rows, order, axis=1)
    dist = np.take_along_axis(np.asarray(distances)[members], order, axis=1)
    return nn, dist


@dataclass
class DataSplits:
    """The train and test splits of one protocol, with the fingerprint of their content."""

    train: Split
    test: Split
    fingerprint: str
    info: dict[str, Any] = field(default_factory=dict)


class DatasetSource:
    """Base of every registered data set. Subclasses set ``Params`` and implement ``load``.

    ``description`` is the one line ``dmlbench list datasets`` prints; ``about`` the rest of
    what is known of the data set (:class:`About`).
    """

    Params: ClassVar[type[BaseModel]]
    label_kind: ClassVar[LabelKind] = "class"
    description: ClassVar[str] = ""
    reads_root: ClassVar[bool] = True  # False: generated, a data root means nothing to it
    about: ClassVar[About] = About()

    def load(self, params: BaseModel, root: Path | None, cache_dir: Path) -> DataSplits:
        raise NotImplementedError


DATASETS: Registry[type[DatasetSource]] = Registry("data set")


def cache_dir() -> Path:
    """``$DMLBENCH_CACHE`` or ``~/.cache/dmlbench``: generated data, neighbour lists."""
    import os

    return Path(os.environ.get("DMLBENCH_CACHE", "~/.cache/dmlbench")).expanduser()


def load_data(
    protocol: Protocol,
    data_root: str | None = None,
    cache: Path | None = None,
    check_test: Callable[[Split], None] | None = None,
) -> DataSplits:
    """Build the splits a protocol names (generating or reading them as the source does).

    Sources that read real images (``takes_images``) get the protocol's image pipelines, and
    call ``check_test`` on the test split's labels (no pixels yet) before building the image
    cache: the caller's check (the run's: the metrics' K against the gallery) then fails in
    seconds, not after minutes of decoding. The check comes from above: data knows no metric.
    """
    source_cls = DATASETS.get(protocol.data.dataset)
    params = source_cls.Params.model_validate(protocol.data.params)
    takes_images = getattr(source_cls, "takes_images", False)
    source = source_cls(protocol.images) if takes_images else source_cls()
    if takes_images:
        source.check_test = check_test
    if data_root is not None and not source_cls.reads_root:
        log.warning(
            "--data-root %s is ignored: data set %s is generated and reads no files",
            data_root,
            protocol.data.dataset,
        )
    root = protocol.data_root(data_root)
    try:
        return source.load(params, root, cache or cache_dir())
    except MissingFile as err:
        if root is None:
            raise
        hint = child_root_hint(root, err)
        if not hint:
            raise
        raise MissingFile(f"{err}{hint}", *err.paths) from None


def child_root_hint(root: Path, err: MissingFile) -> str:
    """``"; did you mean --data-root ROOT/CHILD?"`` when a child folder of ``root`` holds what
    ``err`` missed, else ``""``.

    ``--data-root`` one level too high (the folder above ``CUB_200_2011``) is the common
    mistake, and "index file not found" alone does not say that the file is right there. Every
    real data set reports a missing file through :class:`MissingFile` and is loaded by
    :func:`load_data`, which adds this hint: one place for all of them.
    """
    wanted = [p.relative_to(root) for p in err.paths if p.is_relative_to(root)]
    try:
        children = sorted(c for c in root.iterdir() if c.is_dir())
    except OSError:
        return ""
    for child in children:
        if any((child / rel).exists() for rel in wanted):
            return f"; did you mean --data-root {child}?"
    return ""


def fingerprint_arrays(*arrays: np.ndarray, extra: str = "") -> str:
    """SHA-256 over array bytes, shapes and dtypes: the identity of generated data."""
    h = hashlib.sha256(extra.encode())
    for a in arrays:
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
