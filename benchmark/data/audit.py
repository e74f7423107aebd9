"""Can a data set hand out free or impossible queries? An audit of a protocol's splits.

A retrieval board measures what a method learned only if every query has a fair answer. Two
defects break that without any error, and both hide in small rendered data sets:

- **look-alike classes**: two classes with identical (or nearly identical) drawings, such as
  Latin B and Greek Β rendered by one font. A query of one has an exact copy under the other
  label: a miss no method can avoid (an impossible query), and across splits a test class drawn
  like a training class was seen in training (a free one);
- **near-blank images** (white on white): they carry no drawing, so every answer is a guess.

The audit compares the images **as the protocol feeds them to the network** (its resolution,
its deterministic test pipeline for both splits: a random training crop would hide a copy),
pairwise, within the test split, within the training split, and test against training. Two
images are *identical* when their 8-bit pixels are equal, *near-identical* when their
root-mean-square difference is at most :data:`NEAR_RMS` (on the [0, 1] scale; about two grey
levels: anti-aliasing noise, not another drawing). An image is *near-blank* when its pixels'
standard deviation is below :data:`BLANK_STD`. Pairs within one class are fine (fonts or
themes may agree); only pairs of *different* classes count.

``dmlbench data audit --protocol NAME`` prints the counts and exits 1 when any is non-zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from dmlbench.data.base import DATASETS, DataSplits, Split, load_data
from dmlbench.protocol import Protocol

NEAR_RMS = 0.01
BLANK_STD = 0.02
_BLOCK = 1024  # rows per block of the pairwise distances (memory: _BLOCK x N floats)


@dataclass(frozen=True)
class Clash:
    """Images of two different classes that look alike: ``where`` is ``test``, ``train`` or
    ``test~train``; the image indices are positions in their splits."""

    where: str
    image_a: int
    image_b: int
    class_a: int
    class_b: int
    identical: bool


@dataclass
class Audit:
    """What :func:`audit` found; :attr:`ok` when nothing at all."""

    protocol: str
    images: dict[str, int]
    clashes: list[Clash] = field(default_factory=list)
    blank: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.clashes and not any(self.blank.values())

    def images_with_a_lookalike(self, where: str, identical_only: bool = False) -> int:
        """Images of ``where``'s first split that have a look-alike in another class."""
        seen = {c.image_a for c in self._of(where, identical_only)}
        if where != "test~train":  # both ends of a within-split pair are queries
            seen |= {c.image_b for c in self._of(where, identical_only)}
        return len(seen)

    def class_pairs(self, where: str, identical_only: bool = False) -> set[tuple[int, int]]:
        return {(c.class_a, c.class_b) for c in self._of(where, identical_only)}

    def _of(self, where: str, identical_only: bool) -> Iterator[Clash]:
        return (c for c in self.clashes if c.where == where and (c.identical or not identical_only))

    def summary(self) -> str:
        """One line per finding, for the terminal and the docs."""
        n_test = self.images.get("test", 0)
        lines = [f"{self.protocol}: {self.images}"]
        for where, what in (
            ("test", "test images with a look-alike in another test class"),
            ("train", "training images with a look-alike in another training class"),
            ("test~train", "test images with a look-alike in a training class"),
        ):
            n = self.images_with_a_lookalike(where)
            same = self.images_with_a_lookalike(where, identical_only=True)
            share = f" ({100 * n / n_test:.1f}% of the test split)" if where != "train" else ""
            lines.append(
                f"  {what}: {n}{share}, {same} of them identical; "
                f"{len(self.class_pairs(where))} class pairs"
            )
        for split, items in sorted(self.blank.items()):
            lines.append(f"  near-blank {split} images: {len(items)}")
        lines.append("  audit passed" if self.ok else "  audit FAILED")
        return "\n".join(lines)


def pixels(split: Split) -> np.ndarray:
    """Every image of ``split`` as a row of floats in [0, 1] (as the network receives them)."""
    rows = [np.asarray(split.images[i], dtype=np.float32).reshape(-1) for i in range(len(split))]
    return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def lookalikes(
    a: np.ndarray, b: np.ndarray, same_split: bool, near_rms: float = NEAR_RMS
) -> Iterator[tuple[int, int, bool]]:
    """Pairs (i in ``a``, j in ``b``) whose RMS difference is at most ``near_rms``, with
    whether their 8-bit pixels are equal; each unordered pair once when ``same_split``."""
    if len(a) == 0 or len(b) == 0:
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    dims = a.shape[1]
    qa, qb = np.rint(a64 * 255).astype(np.uint8), np.rint(b64 * 255).astype(np.uint8)
    nb = (b64**2).sum(axis=1)
    limit = near_rms**2 * dims
    for start in range(0, len(a), _BLOCK):
        block = a64[start : start + _BLOCK]
        d2 = (block**2).sum(axis=1)[:, None] + nb[None, :] - 2.0 * block @ b64.T
        for i, j in zip(*np.nonzero(d2 <= limit + 1e-9), strict=True):
            i = int(i) + start
            if same_split and j <= i:
                continue
            # the expansion above cancels badly near 0: confirm on the pixels themselves
            rms = float(np.sqrt(((a64[i] - b64[j]) ** 2).mean()))
            if rms <= near_rms:
                yield i, int(j), bool(np.array_equal(qa[i], qb[j]))


def audit(
    name: str,
    splits: DataSplits,
    drawings: dict[str, np.ndarray] | None = None,
    near_rms: float = NEAR_RMS,
    blank_std: float = BLANK_STD,
) -> Audit:
    """Look-alike classes and near-blank images of ``splits`` (module docstring).

    ``drawings`` (per split, one row per image on [0, 1]) replace the pixels where a source
    draws each image with a random transform (glyphs: a random scale, slant and noise per
    image would hide that two classes share one drawing)."""
    found = Audit(name, {"train": len(splits.train), "test": len(splits.test)})
    if splits.test.label_kind != "class":
        return found  # continuous labels: no classes to tell apart
    x = drawings or {"train": pixels(splits.train), "test": pixels(splits.test)}
    y = {s: np.asarray(getattr(splits, s).labels).reshape(-1) for s in x}
    for where, sa, sb in (("test", "test", "test"), ("train", "train", "train"),
                          ("test~train", "test", "train")):  # fmt: skip
        for i, j, identical in lookalikes(x[sa], x[sb], sa == sb, near_rms):
            if sa != sb or y[sa][i] != y[sb][j]:  # the splits' classes are disjoint
                found.clashes.append(Clash(where, i, j, int(y[sa][i]), int(y[sb][j]), identical))
    for split, rows in x.items():
        found.blank[split] = [int(i) for i in np.nonzero(rows.std(axis=1) < blank_std)[0]]
    return found


@dataclass(frozen=True)
class Dropped:
    """What :func:`to_drop` removes so that an audit passes: whole classes (their labels),
    and single images (per split, positions in the split)."""

    classes: frozenset[int]
    images: dict[str, frozenset[int]]


def to_drop(found: Audit, labels: dict[str, np.ndarray]) -> Dropped:
    """The classes and images to remove so that ``found``'s splits pass the audit.

    Of two classes drawn alike within a split the later (higher label) goes; a test class
    drawn like a training class goes (it was not unseen); a near-blank image goes, and with it
    a class left with fewer than two images (no query of it would have an answer). The rule
    depends on nothing but the labels, so the same data always lose the same classes.
    """
    classes: set[int] = set()
    for c in sorted(found.clashes, key=lambda c: (c.where, c.class_a, c.class_b)):
        if c.class_a in classes or c.class_b in classes:
            continue  # one of the two is gone already
        classes.add(c.class_a if c.where == "test~train" else max(c.class_a, c.class_b))
    images = {split: frozenset(found.blank.get(split, [])) for split in labels}
    for split, y in labels.items():
        kept = np.array([i not in images[split] for i in range(len(y))], dtype=bool)
        left = dict(zip(*np.unique(y[kept], return_counts=True), strict=True))
        classes |= {int(c) for c in np.unique(y) if left.get(c, 0) < 2}
    return Dropped(frozenset(classes), images)


def audit_protocol(
    protocol: Protocol,
    data_root: str | None = None,
    near_rms: float = NEAR_RMS,
    blank_std: float = BLANK_STD,
) -> Audit:
    """:func:`audit` of ``protocol``'s splits, both through its test pipeline (a random
    training crop would hide a copy; a generated set has no pipeline to swap)."""
    protocol = protocol.with_overrides(
        {"images.train": protocol.images.test.model_dump(mode="json")}
    )
    splits = load_data(protocol, data_root)
    source = DATASETS.get(protocol.data.dataset)
    drawings = None
    if hasattr(source, "drawings"):
        params = source.Params.model_validate(protocol.data.params)
        drawings = source().drawings(params, splits)
    return audit(protocol.name, splits, drawings, near_rms, blank_std)
