"""Stanford Online Products (Oh Song et al. 2016), the official split.

Under the root ``Stanford_Online_Products``: ``Ebay_train.txt`` and ``Ebay_test.txt``, a header
line ``image_id class_id super_class_id path`` then space-separated rows, paths relative to the
root (``bicycle_final/111085122871_0.JPG``). Training classes 1–11,318 (59,551 images), test
classes 11,319–22,634 (60,502 images). The official files are used as they are; Fehervari et
al.'s code sampled classes by folder order instead, which this loader does not
reproduce.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from dmlbench.data.base import DATASETS
from dmlbench.data.files import Entry, ImageSource, read_rows, to_int
from dmlbench.errors import DataError
from dmlbench.protocol import FrozenModel

HEADER = ["image_id", "class_id", "super_class_id", "path"]


class SopParams(FrozenModel):
    pass


def read_ebay(path: Path, role: str) -> list[Entry]:
    rows = read_rows(path, 4)
    if not rows or rows[0][:4] != HEADER:
        raise DataError(f"{path}: expected the header line {' '.join(HEADER)}")
    return [Entry(r[3], to_int(r[1], path, "class_id"), role) for r in rows[1:]]


@DATASETS.register("sop")
class StanfordOnlineProducts(ImageSource):
    Params = SopParams
    name = "sop"
    description = "Stanford Online Products, official split 11,318 / 11,316 classes (real images)"
    expected: ClassVar[dict[str, int]] = {"train": 59551, "test": 60502}

    def entries(self, params: SopParams, root: Path) -> list[Entry]:
        return read_ebay(root / "Ebay_train.txt", "train") + read_ebay(
            root / "Ebay_test.txt", "test"
        )
