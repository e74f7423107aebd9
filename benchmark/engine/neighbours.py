"""Search a kept model's index: embed new images, return their nearest neighbours.

``load_index(record)`` opens a final run that kept its files (``dmlbench run`` keeps them by
default) and indexes a gallery: by default the run's own test embeddings (the kept
``<record>-embeddings.npz``, verified against the record: nothing is re-embedded, and the
neighbours are the test items the run was scored on, with their class labels; for a split
with a query/gallery protocol such as In-shop, its gallery), or a folder of images embedded
with the run's network and test pipeline (then each neighbour is a file). ``search(images, k)``
embeds a folder or a list of image files the same way and returns, per image, its k nearest
gallery items with their distances.

The neighbours are the evaluation's: the same metric space (L2-normalised embeddings when the
protocol says so) and the same exact k-NN (:func:`dmlbench.metrics.knn.knn`, ties by gallery
index), so the first neighbour of a kept test item is what Recall@1 counted. Distances are
Euclidean in that space, computed in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dmlbench.engine.inference import FolderImages, Kept, build_network, open_kept
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.knn import knn
from dmlbench.metrics.retrieval import metric_space


@dataclass(frozen=True)
class Neighbour:
    """One gallery item near a query.

    Attributes:
        index: its position in the gallery (the kept test split's order, or the sorted files).
        distance: Euclidean distance to the query in the evaluation's metric space.
        label: its class id (a kept test split), else ``None``.
        path: its file relative to the gallery folder (a folder gallery), else ``None``.
    """

    index: int
    distance: float
    label: int | None
    path: str | None


@dataclass(frozen=True)
class Result:
    """The neighbours of one query image, nearest first."""

    query: str
    neighbours: list[Neighbour]


class KeptIndex:
    """A kept network and a gallery of its embeddings (see the module docstring)."""

    def __init__(
        self,
        kept: Kept,
        gallery: str | Path | None = None,
        device: str | torch.device = "cpu",
        batch_size: int = 256,
    ) -> None:
        from dmlbench.engine.artifacts import read_embeddings

        self.kept = kept
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.model = build_network(kept).to(self.device).eval()  # weights checked first
        self.labels: np.ndarray | None = None
        self.paths: list[str] | None = None
        if gallery is None:
            arrays = read_embeddings(kept.record, kept.path)
            if "labels" not in arrays or arrays["labels"].ndim != 1:
                raise DmlbenchError(
                    f"{kept.path}: its test split has no class labels; give a gallery folder"
                )
            items = arrays["gallery"] if "gallery" in arrays else np.arange(len(arrays["labels"]))
            self.positions = np.asarray(items, dtype=np.int64)
            self.labels = arrays["labels"][self.positions]
            embeddings = arrays["embeddings"][self.positions]
        else:
            files, self.paths = image_files(Path(gallery), "gallery")
            embeddings = self.embed(files)
            self.positions = np.arange(len(files))
        self.gallery = metric_space(embeddings, kept.protocol.metrics.normalize)

    def __len__(self) -> int:
        return len(self.gallery)

    def embed(self, files: Sequence[Path]) -> np.ndarray:
        """The network's embeddings of image files, through the run's test pipeline."""
        from dmlbench.data.base import Split
        from dmlbench.engine.train import embed

        card = self.kept.card
        images = FolderImages(list(files), self.kept.protocol.images.test, card.input_shape)
        split = Split(images, np.zeros(len(files), dtype=np.int64))
        return embed(self.model, split, self.device, self.batch_size)

    def search(self, images: str | Path | Sequence[str | Path], k: int = 5) -> list[Result]:
        """The ``k`` nearest gallery items of each image (a folder, or a list of files).

        Raises:
            DmlbenchError: k out of range, no images, an unreadable image (naming it).
        """
        if not 1 <= k <= len(self):
            raise DmlbenchError(f"k={k}: must be in [1, {len(self)}] (the gallery's size)")
        if isinstance(images, (str, Path)):
            files, names = image_files(Path(images), "images")
        else:
            files = [Path(f) for f in images]
            names = [str(f) for f in images]
            for f in files:
                if not f.is_file():
                    raise DmlbenchError(f"{f}: image not found")
        if not files:
            raise DmlbenchError("no images to search with")
        queries = metric_space(self.embed(files), self.kept.protocol.metrics.normalize)
        nn = knn(queries, self.gallery, k)
        diff = queries.astype(np.float64)[:, None, :] - self.gallery[nn].astype(np.float64)
        dist = np.sqrt((diff * diff).sum(axis=2))
        return [
            Result(
                name,
                [
                    Neighbour(
                        int(self.positions[j]),
                        float(d),
                        None if self.labels is None else int(self.labels[j]),
                        None if self.paths is None else self.paths[j],
                    )
                    for j, d in zip(row, drow, strict=True)
                ],
            )
            for name, row, drow in zip(names, nn, dist, strict=True)
        ]


def image_files(directory: Path, what: str) -> tuple[list[Path], list[str]]:
    """Every .jpg/.jpeg/.png file under ``directory``, sorted, and its path relative to it."""
    from dmlbench.data.files import walk_files

    if not directory.is_dir():
        raise DmlbenchError(f"{what} {directory}: not a folder")
    files = walk_files(directory)
    if not files:
        raise DmlbenchError(f"{directory}: no .jpg, .jpeg or .png images in this folder")
    return files, [p.relative_to(directory).as_posix() for p in files]


def load_index(
    record: str | Path,
    gallery: str | Path | None = None,
    device: str | torch.device = "cpu",
    batch_size: int = 256,
) -> KeptIndex:
    """A kept run's network and a gallery to search: its test split, or a folder of images.

    >>> index = load_index("results/glyphs-mini@defaults/HASH/contrastive-seed0-final.json")
    >>> index.search("my_letters", k=3)[0].neighbours[0].label  # doctest: +SKIP

    Raises:
        DmlbenchError: one line naming the file (a missing or changed kept file, a record
            without kept files, a folder without images).
    """
    return KeptIndex(open_kept(Path(record)), gallery, device, batch_size)
