"""Bring your own data: class-labelled images in a folder, split class-disjointly.

Two layouts under the data root:

- ``index.csv`` (or ``params.index``), UTF-8 with a header line ``path,label[,split][,group]``:
  ``path`` relative to the root (POSIX), ``label`` the class name, ``split`` ``train`` or
  ``test`` (read by the ``column`` rule), ``group`` any grouping of classes (read by the
  ``test_groups`` rule; one group per class);
- an index in Open Metric Learning's format (``label,path,split,is_query,is_gallery[,category]``),
  for a query/gallery split as In-shop's: :mod:`dmlbench.data.query_gallery`;
- without an index file, the ImageFolder layout ``ROOT/<class>/<image>``: the class is the name
  of the folder (images anywhere below it; ``.png``, ``.jpg``, ``.jpeg``).

Class names are strings; class ids are their positions in the sorted list of all names, so the
same files give the same ids. The split is by class (zero-shot, as in the metric-learning
benchmarks), written in the protocol as exactly one :class:`SplitSpec` rule. Every test class
needs two images: each test image queries the others, and a class of one has no positive.

The data fingerprint is the manifest hash of :class:`~dmlbench.data.files.ImageSource`
(relative paths, sizes, labels, roles); the split rule is in the protocol's hash, the root in
neither (the same data moved elsewhere is the same data).
"""

from __future__ import annotations

import csv
import os
import posixpath
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from dmlbench.data.about import About
from dmlbench.data.base import DATASETS, DataSplits
from dmlbench.data.cache import image_size, resized_shape
from dmlbench.data.files import Entry, ImageSource, require_file, require_root
from dmlbench.data.transforms import output_size
from dmlbench.errors import DataError, did_you_mean
from dmlbench.protocol import Bool, Float, FrozenModel, ImagesSpec, Int, TransformSpec

COLUMNS = ("path", "label", "split", "group")
SPLITS = ("train", "test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
CLASHES = {  # a class with two values of a column that must be one per class
    "group": "class {label!r} is in group {here!r} here and {there!r} at {at}; "
    "a class has one group",
    "split": "class {label!r} is in {here} here and in {there} at {at}; the split is by class",
}


class SplitSpec(FrozenModel):
    """Which classes are test classes: exactly one rule.

    Attributes:
        test_fraction: the fraction of classes in test, drawn with ``seed``: the sorted class
            names are permuted by ``numpy.random.default_rng(seed).permutation`` and the first
            ``round(test_fraction * n)`` (at least 1, at most n - 1) are the test classes.
        seed: the seed of ``test_fraction`` (ignored by the other rules).
        test_classes: the class names in test; every other class trains.
        test_groups: the groups (index column ``group``) whose classes are in test.
        column: read each image's side from the index column ``split``.
    """

    test_fraction: Float | None = Field(default=None, gt=0, lt=1)
    seed: Int = 0
    test_classes: tuple[str, ...] | None = Field(default=None, min_length=1)
    test_groups: tuple[str, ...] | None = Field(default=None, min_length=1)
    column: Bool = False

    @model_validator(mode="after")
    def _one_rule(self) -> SplitSpec:
        given = [r for r in ("test_fraction", "test_classes", "test_groups") if getattr(self, r)]
        given += ["column"] if self.column else []
        if len(given) != 1:
            rules = "test_fraction (+ seed), test_classes, test_groups or column: true"
            got = f"got {' and '.join(given)}" if given else "got none"
            raise ValueError(f"give exactly one split rule: {rules} ({got})")
        return self


class CustomImagesParams(FrozenModel):
    """``data.params`` of ``images``: the index file (relative to the root) and the split."""

    index: str = "index.csv"
    split: SplitSpec


@DATASETS.register("images")
class CustomImages(ImageSource):
    """Your own class-labelled images (see the module docstring for the layouts)."""

    Params = CustomImagesParams
    name = "images"
    description = "your own images: ROOT/<class>/ folders or ROOT/index.csv, split by class"
    about = About(
        source="your own images: ROOT/<class>/ folders or ROOT/index.csv",
        licence="yours",
        splits="by class, as data.params.split says",
    )
    images: ImagesSpec | None  # set by ImageSource.__init__; declared for the override below

    def entries(self, params: CustomImagesParams, root: Path) -> list[Entry]:
        return index_entries(root, params.split, params.index)

    def load(self, params: CustomImagesParams, root: Path | None, cache_dir: Path) -> DataSplits:
        """:meth:`ImageSource.load`, also for pipelines without a crop when every image has
        the same square size after ``resize`` (icons, emoji, your thumbnails): batches need
        one size, and the shipped sets, whose photos vary, need a crop to get one."""
        specs = self.images
        if specs is not None and None in (output_size(specs.train), output_size(specs.test)):
            at = require_root(self.name, root)
            files = [at / e.path for e in self.entries(params, at)]
            self.images = ImagesSpec(
                train=square(specs.train, files, f"{self.name}: images.train"),
                test=square(specs.test, files, f"{self.name}: images.test"),
            )
        return super().load(params, root, cache_dir)


def square(spec: TransformSpec, files: list[Path], where: str) -> TransformSpec:
    """``spec``, with a no-op ``center_crop`` when it has no crop and every image of ``files``
    is N×N after its ``resize``; else an error naming two images of different sizes."""
    if output_size(spec) is not None:
        return spec
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        shapes = [resized_shape(w, h, spec.resize) for w, h in pool.map(image_size, files)]
    odd = next((i for i, s in enumerate(shapes) if s != shapes[0] or s[0] != s[1]), None)
    if odd is None:
        return spec.model_copy(update={"center_crop": shapes[0][0]})
    (h0, w0), (h, w) = shapes[0], shapes[odd]
    raise DataError(
        f"{where}: without a crop every image must be one square size after resize, but "
        f"{files[odd]} is {w}x{h}"
        + ("" if odd == 0 else f" and {files[0]} is {w0}x{h0}")
        + "; add center_crop (or random_crop, random_resized_crop)"
    )


@dataclass(frozen=True)
class Row:
    """One image of the index before the split: where it was read (for messages)."""

    path: str
    label: str
    split: str
    group: str
    where: str  # "FILE:LINE", or the class folder of the ImageFolder layout


def index_entries(root: Path, split: SplitSpec, index: str = "index.csv") -> list[Entry]:
    """The manifest of a bring-your-own root: its images, class ids and train/test roles.

    ``root / index`` is read when it exists; otherwise, for the default ``index.csv`` only, the
    ImageFolder layout. Every image must exist (checked here, so the message names the index
    line). Class ids are positions in the sorted class names.

    Raises:
        DataError: one line naming the file and line (or the folder, or the split rule) for a
            bad header or row, a path outside the root, a missing image, an unknown class or
            group, a class on both sides, a test class with fewer than two images, or an
            empty side.
    """
    check_path(root, index, "data.params.index", exists=False)
    index_path = root / index
    if index_path.is_file() and (oml := query_gallery_entries(root, index_path, split)):
        return oml
    if index_path.is_file() or index != "index.csv":
        rows = read_index(root, require_file(index_path))
        source = str(index_path)
    else:
        rows = image_folder(root)
        source = f"{root} (one folder per class, no {index})"
    sides = assign(rows, split, source)
    names = sorted({r.label for r in rows})
    ids = {name: i for i, name in enumerate(names)}
    entries = [Entry(r.path, ids[r.label], sides[r.label]) for r in rows]
    check_test_sizes(rows, sides, source)
    return entries


def query_gallery_entries(root: Path, path: Path, split: SplitSpec) -> list[Entry]:
    """The manifest of an index in Open Metric Learning's format
    (:mod:`dmlbench.data.query_gallery`), or ``[]`` for any other index."""
    from dmlbench.data.query_gallery import is_query_gallery_index, query_gallery_rows

    lines = list(csv_lines(path))
    if not lines or not is_query_gallery_index(lines[0][1]):
        return []
    if not split.column:
        raise DataError(
            f"data.params.split: {path} has is_query/is_gallery columns (Open Metric "
            "Learning's format), whose split column decides; use split: {column: true}"
        )
    rows = query_gallery_rows(path, lines, lambda rel, where: check_path(root, rel, where))
    ids = {name: i for i, name in enumerate(sorted({r[1] for r in rows}))}
    return [Entry(rel, ids[label], role) for rel, label, role, _, _ in rows]


def read_index(root: Path, path: Path) -> list[Row]:
    """The rows of an index CSV, each checked (columns, values, path inside root, file)."""
    rows: list[Row] = []
    seen: dict[str, int] = {}
    lines = csv_lines(path)
    try:
        at, header = next(lines)
    except StopIteration:
        raise DataError(
            f"{path}: empty; expected the header line path,label[,split][,group]"
        ) from None
    header = [h.strip() for h in header]
    if "path" not in header or "label" not in header:
        raise DataError(
            f"{path}:{at}: the header line must name the columns path and label "
            f"(path,label[,split][,group]), got {','.join(header)!r}"
        )
    for name in header:
        if name not in COLUMNS or header.count(name) > 1:
            problem = "repeated" if name in COLUMNS else f"unknown{did_you_mean(name, [*COLUMNS])}"
            raise DataError(f"{path}:{at}: column {name!r} is {problem}; columns: {COLUMNS}")
    for at, cells in lines:
        if len(cells) != len(header):
            raise DataError(f"{path}:{at}: expected {len(header)} fields, got {len(cells)}")
        row = dict(zip(header, (c.strip() for c in cells), strict=True))
        where = f"{path}:{at}"
        for key in ("path", "label"):
            if not row[key]:
                raise DataError(f"{where}: empty {key}")
        if row.get("split", "") not in ("", *SPLITS):
            raise DataError(f"{where}: split {row['split']!r} is neither train nor test")
        check_path(root, row["path"], where)
        # One file under two spellings (ant/0.png, ./ant/0.png, ant//0.png) is listed twice
        # too: a test image would retrieve its own copy and Recall@1 count it as a hit.
        key = posixpath.normpath(row["path"].replace("\\", "/"))
        if key in seen:
            raise DataError(f"{where}: {row['path']} is listed twice (line {seen[key]})")
        seen[key] = at
        rows.append(
            Row(row["path"], row["label"], row.get("split", ""), row.get("group", ""), where)
        )
    if not rows:
        raise DataError(f"{path}: lists no images")
    return rows


def csv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, cells)`` of the non-blank lines of a CSV file (a BOM is allowed)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        at = path.read_bytes()[: err.start].count(b"\n") + 1
        raise DataError(f"{path}:{at}: not UTF-8 text") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read the index file ({err.strerror})") from None
    reader = csv.reader(text.splitlines())
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                yield reader.line_num, cells
    except csv.Error as err:
        raise DataError(f"{path}:{reader.line_num}: not CSV ({err})") from None


def check_path(root: Path, rel: str, where: str, exists: bool = True) -> None:
    """Refuse a path that leaves the root (checked lexically, as
    :func:`~dmlbench.data.files.check_inside`) or, with ``exists``, names no file."""
    norm = os.path.normpath(rel)
    if os.path.isabs(rel) or norm == ".." or norm.startswith(("../", "..\\")):
        raise DataError(f"{where}: path {rel!r} is outside the data root; refused")
    if exists and not (root / rel).is_file():
        raise DataError(f"{where}: image {root / rel} not found")


def image_folder(root: Path) -> list[Row]:
    """The rows of the ImageFolder layout: one folder per class, images anywhere below it."""
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DataError(
            f"{root}: no index.csv and no class folders; put images in ROOT/<class>/ or list "
            "them in ROOT/index.csv (path,label[,split][,group])"
        )
    if len(classes) == 1 and any(p.is_dir() for p in classes[0].iterdir()):
        raise DataError(
            f"{root}: one class folder ({classes[0].name}), which holds folders; "
            f"did you mean --data-root {classes[0]}?"
        )
    rows = []
    for folder in classes:
        files = sorted(
            p
            for p in folder.rglob("*")
            if p.suffix.lower() in IMAGE_SUFFIXES
            and not any(part.startswith(".") for part in p.relative_to(folder).parts)
            and p.is_file()
        )
        if not files:
            raise DataError(f"{folder}: class folder holds no image ({', '.join(IMAGE_SUFFIXES)})")
        for f in files:
            rows.append(Row(f.relative_to(root).as_posix(), folder.name, "", "", str(folder)))
    return rows


def assign(rows: list[Row], split: SplitSpec, source: str) -> dict[str, str]:
    """Each class name's side (``train`` or ``test``) under the split rule."""
    names = sorted({r.label for r in rows})
    if split.test_fraction is not None:
        if len(names) < 2:
            raise DataError(f"{source}: {len(names)} class; a split by class needs at least two")
        n_test = min(max(1, round(split.test_fraction * len(names))), len(names) - 1)
        test = set(np.random.default_rng(split.seed).permutation(names)[:n_test].tolist())
    elif split.test_classes is not None:
        for name in split.test_classes:
            if name not in names:
                raise DataError(
                    f"split.test_classes: class {name!r} is not in {source}"
                    f"{did_you_mean(name, names)} ({len(names)} classes)"
                )
        test = set(split.test_classes)
    elif split.test_groups is not None:
        test = test_by_group(rows, split.test_groups, source)
    else:
        test = test_by_column(rows, source)
    sides = {name: "test" if name in test else "train" for name in names}
    for side in SPLITS:
        if side not in sides.values():
            raise DataError(f"{source}: the split rule leaves no {side} class")
    return sides


def test_by_group(rows: list[Row], groups: tuple[str, ...], source: str) -> set[str]:
    """The classes whose group is in ``groups``; each class must have one, and one only."""
    group_of = value_per_class(rows, "group", "split.test_groups", source)
    known = sorted(set(group_of.values()))
    for g in groups:
        if g not in known:
            raise DataError(
                f"split.test_groups: group {g!r} is not in {source}{did_you_mean(g, known)} "
                f"(groups: {', '.join(known)})"
            )
    return {name for name, group in group_of.items() if group in groups}


def test_by_column(rows: list[Row], source: str) -> set[str]:
    """The classes the ``split`` column puts in test; a class on both sides is an error."""
    side_of = value_per_class(rows, "split", "split.column", source)
    return {name for name, side in side_of.items() if side == "test"}


def value_per_class(rows: list[Row], column: str, rule: str, source: str) -> dict[str, str]:
    """Each class's value of ``column`` (``group`` or ``split``), read by the split ``rule``:
    every row must have one, and all rows of a class the same (else :data:`CLASHES`)."""
    if not any(getattr(r, column) for r in rows):
        raise DataError(f"{rule}: {source} has no {column} column")
    first_of: dict[str, Row] = {}
    for r in rows:
        value = getattr(r, column)
        if not value:
            raise DataError(f"{r.where}: empty {column} ({rule} reads the {column} column)")
        first = first_of.setdefault(r.label, r)
        if (there := getattr(first, column)) != value:
            text = CLASHES[column].format(label=r.label, here=value, there=there, at=first.where)
            raise DataError(f"{r.where}: {text}")
    return {name: getattr(r, column) for name, r in first_of.items()}


def check_test_sizes(rows: list[Row], sides: dict[str, str], source: str) -> None:
    """Every test class has two images or more: a query needs a positive among the others."""
    counts = Counter(r.label for r in rows)
    for r in rows:
        if sides[r.label] == "test" and counts[r.label] < 2:
            raise DataError(
                f"{r.where}: test class {r.label!r} has 1 image, so it cannot be a query with a "
                "positive; add images or keep the class in train"
            )
