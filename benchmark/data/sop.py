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

from dmlbench.data.about import About, Spec
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
    about = About(
        source="Stanford Online Products (cvgl.stanford.edu/projects/lifted_struct)",
        licence="the release's own terms; images from eBay listings",
        citation="Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding, "
        "CVPR 2016",
        splits="the official files: 11,318 train, 11,316 test classes",
        prepare=Spec(
            None,
            layout="{root}/Ebay_train.txt\n{root}/Ebay_test.txt\n"
            "{root}/bicycle_final/111085122871_0.JPG (… one folder per super-class)",
            where="download Stanford_Online_Products.zip, linked from "
            "https://cvgl.stanford.edu/projects/lifted_struct/ (the original "
            "ftp://cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip is usually unreachable), "
            "and unzip it so that its Stanford_Online_Products/ folder is {root}",
        ),
        paper_benchmark=True,
        published_protocols=("sop", "sop-ms512"),
    )
    expected: ClassVar[dict[str, int]] = {"train": 59551, "test": 60502}

    def entries(self, params: SopParams, root: Path) -> list[Entry]:
        return read_ebay(root / "Ebay_train.txt", "train") + read_ebay(
            root / "Ebay_test.txt", "test"
        )
