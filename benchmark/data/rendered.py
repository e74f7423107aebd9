"""The sets this package renders from installed packages (emoji, icons): what they share.

Each is prepared once into the bring-your-own layout of :mod:`dmlbench.data.custom`
(``ROOT/images/<class>/<source>.png`` and ``ROOT/index.csv`` with a ``group`` column) under
the cache, in a folder keyed by everything that decides its pixels, and loaded through that
generic path, so real data exercises it in every test run. A figure of a few classes by their
sources shows a reader what the retrieval task is.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from dmlbench.data.base import DataSplits
from dmlbench.data.custom import CustomImages, SplitSpec, index_entries
from dmlbench.data.files import Entry
from dmlbench.errors import DataError
from dmlbench.protocol import Bool, FrozenModel, ImagesSpec


class GroupSplitParams(FrozenModel):
    """``data.params`` of a prepared set: the groups (index column ``group``) held out for
    test, and whether look-alike classes and near-blank images are dropped (``distinct``)."""

    test_groups: tuple[str, ...] = Field(min_length=1)
    distinct: Bool = Field(
        False,
        description="drop the classes and images `dmlbench data audit` finds at the "
        "protocol's resolution (dmlbench.data.audit.to_drop)",
    )


LICENCES = "licences.yaml"
LICENCES_HEADER = (
    "# The licence of every source and image in this folder (dmlbench.data.licences): the\n"
    "# art's own, read per file where its Debian copyright file has Files: stanzas. Not in the\n"
    "# data fingerprint (sources.yaml is). Derived images of ShareAlike art keep its licence.\n"
)


def write_licences(root: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` as ``root/licences.yaml`` (atomically: readers never see half)."""
    import yaml

    from dmlbench.atomic import atomic_write

    text = LICENCES_HEADER + yaml.safe_dump(record, sort_keys=False, allow_unicode=True)
    path = root / LICENCES
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
    return path


class RenderedImages(CustomImages):
    """A set this package renders into the cache (emoji, icons) and loads as a bring-your-own
    root: no data root, split by the index's groups, and no flip augmentation (a mirrored
    drawing is another class: :attr:`mirrored`). Subclasses give :meth:`prepared_root` and
    :meth:`licences`."""

    reads_root = False
    mirrored: ClassVar[str]  # what a mirror image would be, for the refusal's one line

    def prepared_root(self, cache_dir: Path, params: GroupSplitParams) -> Path:
        """The prepared root under ``cache_dir`` of what ``params`` chooses to render (icons:
        the theme set), rendered on first use."""
        raise NotImplementedError

    def licences(self, root: Path) -> dict[str, Any]:
        """The licence record of the prepared folder ``root`` (``licences.yaml``)."""
        raise NotImplementedError

    def ensure_licences(self, root: Path) -> Path:
        """``root/licences.yaml``, written when missing: folders prepared before it existed
        get it without a re-render (their key, and so their pixels, are unchanged)."""
        path = root / LICENCES
        if not path.is_file():
            from filelock import FileLock

            with FileLock(str(root) + ".lock"):
                if not path.is_file():
                    write_licences(root, self.licences(root))
        return path

    dropped: frozenset[int] = frozenset()  # indices into the index's entries (``distinct``)

    def entries(self, params: GroupSplitParams, root: Path) -> list[Entry]:
        entries = index_entries(root, SplitSpec(test_groups=params.test_groups))
        return [e for i, e in enumerate(entries) if i not in self.dropped]

    def _lookalikes(self, params: GroupSplitParams, root: Path, cache_dir: Path) -> frozenset[int]:
        """The entries ``distinct`` drops: :func:`~dmlbench.data.audit.to_drop` of the audit
        of every image as the protocol's test pipeline feeds it (a random training crop would
        hide a copy), mapped back to the index."""
        from dmlbench.data.audit import audit, to_drop

        assert self.images is not None
        probe = type(self)(ImagesSpec(train=self.images.test, test=self.images.test))
        splits = CustomImages.load(probe, params, root, cache_dir)
        labels = {s: np.asarray(getattr(splits, s).labels) for s in ("train", "test")}
        drop = to_drop(audit(self.name, splits), labels)
        entries = index_entries(root, SplitSpec(test_groups=params.test_groups))
        roles = np.array([e.role for e in entries])
        where = {
            "train": np.flatnonzero(roles == "train"),
            "test": np.flatnonzero(roles != "train"),
        }
        gone = {i for i, e in enumerate(entries) if e.label in drop.classes}
        gone |= {int(where[s][i]) for s, items in drop.images.items() for i in items}
        return frozenset(gone)

    def load(self, params: GroupSplitParams, root: Path | None, cache_dir: Path) -> DataSplits:
        """The prepared root, loaded as a bring-your-own root (a flip is refused before
        anything is rendered); the fingerprint also covers ``sources.yaml``, the sources'
        versions and the render settings, which the manifest's paths and sizes do not.
        ``licences.yaml`` is not hashed: a corrected licence must not move the fingerprint of
        the committed boards."""
        if self.images is not None and self.images.train.hflip > 0:
            raise DataError(f"{self.name}: images.train.hflip must be 0: mirrored, {self.mirrored}")
        prepared = self.prepared_root(cache_dir, params)
        self.dropped = frozenset()
        if params.distinct:
            self.dropped = self._lookalikes(params, prepared, cache_dir)
        splits = super().load(params, prepared, cache_dir)
        if params.distinct:
            splits.info["dropped_images"] = len(self.dropped)
        h = hashlib.sha256(splits.fingerprint.encode())
        h.update((prepared / "sources.yaml").read_bytes())
        splits.fingerprint = h.hexdigest()
        splits.info["sources"] = str(prepared / "sources.yaml")
        splits.info["licences"] = str(self.ensure_licences(prepared))
        return splits


def prepared_under(folder: Path, key_material: str, prepare: Callable[[Path], Path]) -> Path:
    """``folder/<key>``, the first 16 hex digits of the SHA-256 of ``key_material`` (what
    decides the pixels: settings, source versions), prepared by ``prepare`` on first use.

    One process renders and the others wait on a file lock; a changed source or pipeline is a
    new folder, never a stale one.
    """
    from filelock import FileLock

    key = hashlib.sha256(key_material.encode()).hexdigest()[:16]
    root = folder / key
    if (root / "index.csv").is_file():
        return root
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock"):
        if not (root / "index.csv").is_file():
            prepare(root)
    return root


def figure(root: Path, classes: Sequence[str], sources: Sequence[str], path: Path) -> Path:
    """A grid of prepared images: one row per class (with its group), one column per source;
    "not drawn" where a source lacks the class. Written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    index = root / "index.csv"
    if not index.is_file():
        raise DataError(f"{root}: no index.csv; not a prepared data set")
    with index.open(newline="", encoding="utf-8") as f:
        groups = {row["label"]: row.get("group", "") for row in csv.DictReader(f)}
    missing = [c for c in classes if c not in groups]
    if missing:
        raise DataError(f"{index}: no class {missing[0]!r}")
    fig, axes = plt.subplots(
        len(classes), len(sources), figsize=(1.3 * len(sources), 1.2 * len(classes)), squeeze=False
    )
    for i, label in enumerate(classes):
        axes[i, 0].set_ylabel(f"{label}\n{groups[label]}", fontsize=7)
        for j, source in enumerate(sources):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            axes[0, j].set_title(source, fontsize=8)
            file = root / "images" / label / f"{source}.png"
            if file.is_file():
                ax.imshow(plt.imread(file), interpolation="nearest")
            else:
                ax.text(0.5, 0.5, "not drawn", ha="center", va="center", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path
