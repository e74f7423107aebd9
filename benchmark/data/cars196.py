"""Cars196 (Stanford Cars, Krause et al. 2013), zero-shot split: classes 1–98 train, 99–196 test.

Two on-disk forms are read (the official release and a common re-pack); ``annotations: auto``
picks whichever is present:

- ``mat``, the original release: ``cars_annos.mat`` holding the struct array ``annotations``
  with fields ``relative_im_path`` (``car_ims/000001.jpg``), ``bbox_x1``, ``bbox_y1``,
  ``bbox_x2``, ``bbox_y2``, ``class`` (1-based, the 6th field) and ``test``; images under
  ``car_ims/``. The ``test`` flag (the classification split) is not used.
- ``csv``, the common re-pack "stanford-car-dataset-by-classes-folder": ``anno_train.csv`` and
  ``anno_test.csv`` without header, rows ``<file>,x1,y1,x2,y2,<class 1..196>``, images under
  ``car_data/car_data/{train,test}/<class name>/<file>`` (``car_data/{train,test}``,
  ``{train,test}`` and the devkit's flat ``cars_{train,test}`` folders are accepted too).
  Both csv files are read (train rows first), then split by class like the original.

Either way 8,054 training and 8,131 test images. The two forms list the same images under
different paths and orders, so their fingerprints differ: records say which one was used.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, ClassVar, Literal

from dmlbench.data.about import About, Spec
from dmlbench.data.base import DATASETS
from dmlbench.data.files import Entry, ImageSource, in_range, require_file, to_int, walk_files
from dmlbench.errors import DataError, MissingFile
from dmlbench.protocol import FrozenModel, Int

CSV_IMAGE_DIRS = ("car_data/car_data/{}", "car_data/{}", "{}", "cars_{}")


class Cars196Params(FrozenModel):
    train_classes: tuple[Int, Int] = (1, 98)
    test_classes: tuple[Int, Int] = (99, 196)
    annotations: Literal["auto", "mat", "csv"] = "auto"


def _scalar(value: Any) -> Any:
    """A MATLAB cell/array element (``array([[5]])``, ``array(['car_ims/..'])``) as a scalar."""
    import numpy as np

    arr = np.asarray(value)
    while arr.dtype == object and arr.size == 1:
        arr = np.asarray(arr.reshape(-1)[0])
    return arr.reshape(-1)[0].item() if arr.size else None


def read_mat(path: Path) -> list[tuple[str, int]]:
    """(relative path, class) per record of ``cars_annos.mat``."""
    import scipy.io

    try:
        mat = scipy.io.loadmat(str(require_file(path)), squeeze_me=False)
    except (ValueError, TypeError, OSError, NotImplementedError) as err:
        raise DataError(f"{path}: cannot read MATLAB file ({err})") from None
    if "annotations" not in mat:
        raise DataError(f"{path}: no 'annotations' variable")
    annos = mat["annotations"].reshape(-1)
    names = annos.dtype.names or ()
    out = []
    for record in annos:
        rel = record["relative_im_path"] if "relative_im_path" in names else record[0]
        cls = record["class"] if "class" in names else record[5]
        out.append((str(_scalar(rel)), int(_scalar(cls))))
    return out


def read_csv_split(root: Path, split: str) -> list[tuple[str, int]]:
    """(path relative to root, class) per row of ``anno_<split>.csv``."""
    path = require_file(root / f"anno_{split}.csv")
    image_dir = next(
        (root / d.format(split) for d in CSV_IMAGE_DIRS if (root / d.format(split)).is_dir()), None
    )
    if image_dir is None:
        raise MissingFile(
            f"{root / CSV_IMAGE_DIRS[0].format(split)}: image folder not found "
            f"(the images listed in {path.name})",
            *(root / d.format(split) for d in CSV_IMAGE_DIRS),
        )
    by_name: dict[str, Path] = {}
    for file in walk_files(image_dir):
        if file.name in by_name:
            raise DataError(f"{file}: file name also at {by_name[file.name]} (ambiguous)")
        by_name[file.name] = file
    out = []
    with path.open(newline="", encoding="utf-8") as fh:
        for n, row in enumerate(csv.reader(fh), start=1):
            if not row:
                continue
            if len(row) < 6:
                raise DataError(f"{path}:{n}: expected 6 columns (file,x1,y1,x2,y2,class)")
            file = by_name.get(row[0].strip())
            if file is None:
                raise DataError(
                    f"{image_dir}/**/{row[0].strip()}: image file is missing (listed in {path}:{n})"
                )
            out.append((file.relative_to(root).as_posix(), to_int(row[5], path, "class")))
    return out


@DATASETS.register("cars196")
class Cars196(ImageSource):
    Params = Cars196Params
    name = "cars196"
    description = "Cars196, classes 1-98 train / 99-196 test; cars_annos.mat or csv re-pack"
    about = About(
        source="Stanford Cars (ai.stanford.edu/~jkrause/cars), or its csv re-pack",
        licence="the release's own terms; images under their owners' copyright",
        citation="Krause et al., 3D Object Representations for Fine-Grained Categorization, "
        "3dRR 2013",
        splits="classes 1-98 train, 99-196 test (zero-shot)",
        prepare=Spec(
            None,
            layout="either the original release:\n  {root}/cars_annos.mat\n"
            "  {root}/car_ims/000001.jpg … {root}/car_ims/016185.jpg\n"
            "or the csv re-pack 'stanford-car-dataset-by-classes-folder':\n"
            "  {root}/anno_train.csv\n  {root}/anno_test.csv\n"
            "  {root}/car_data/car_data/train/<class name>/00001.jpg (…)\n"
            "  {root}/car_data/car_data/test/<class name>/00001.jpg (…)",
            where="the official URLs (car_ims.tgz and cars_annos.mat, linked from "
            "ai.stanford.edu/~jkrause/cars/car_dataset.html) no longer serve the files: use a "
            "copy of those two, or the csv re-pack",
        ),
        paper_benchmark=True,
        published_protocols=("cars196", "cars196-ms512"),
    )
    expected: ClassVar[dict[str, int]] = {"train": 8054, "test": 8131}

    def entries(self, params: Cars196Params, root: Path) -> list[Entry]:
        kind = params.annotations
        if kind == "auto":
            if (root / "cars_annos.mat").is_file():
                kind = "mat"
            elif (root / "anno_train.csv").is_file():
                kind = "csv"
            else:
                raise MissingFile(
                    f"{root}: neither cars_annos.mat nor anno_train.csv/anno_test.csv "
                    "found (run `dmlbench data prepare cars196 --root DIR` for the layout)",
                    root / "cars_annos.mat",
                    root / "anno_train.csv",
                )
        rows = (
            read_mat(root / "cars_annos.mat")
            if kind == "mat"
            else read_csv_split(root, "train") + read_csv_split(root, "test")
        )
        entries = []
        for rel, label in rows:
            if not 1 <= label <= 196:  # a corrupt row, not a class the protocol leaves out
                raise DataError(f"{root}: {rel}: class id {label} is outside 1..196")
            role = (
                "train"
                if in_range(label, params.train_classes)
                else "test"
                if in_range(label, params.test_classes)
                else None
            )
            if role is not None:
                entries.append(Entry(rel, label, role))
        return entries
