"""In-shop Clothes Retrieval (DeepFashion, Liu et al. 2016): query → gallery evaluation.

Under the root: ``Eval/list_eval_partition.txt`` (also accepted at the root itself), a count
line, the header ``image_name item_id evaluation_status``, then rows
``img/WOMEN/Dresses/id_00000002/02_1_front.jpg id_00000002 train|query|gallery``; images
under ``img/``. 3,997 training items (25,882 images); the test split holds 14,218 query and
12,612 gallery images of 3,985 items, and evaluation retrieves each query among the gallery
only (``Split.queries`` / ``Split.gallery``). Labels are the item numbers (``id_00000002`` → 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from dmlbench.data.about import About, Spec
from dmlbench.data.base import DATASETS
from dmlbench.data.files import Entry, ImageSource, read_rows, require_file
from dmlbench.errors import DataError
from dmlbench.protocol import FrozenModel

HEADER = ["image_name", "item_id", "evaluation_status"]


class InshopParams(FrozenModel):
    pass


def partition_file(root: Path) -> Path:
    for candidate in (root / "Eval" / "list_eval_partition.txt", root / "list_eval_partition.txt"):
        if candidate.is_file():
            return candidate
    return require_file(root / "Eval" / "list_eval_partition.txt")


def item_number(item: str, path: Path) -> int:
    digits = item.removeprefix("id_")
    if not digits.isdigit():
        raise DataError(f"{path}: item id {item!r} is not of the form id_<digits>")
    return int(digits)


@DATASETS.register("inshop")
class InShop(ImageSource):
    Params = InshopParams
    name = "inshop"
    description = "In-shop Clothes Retrieval, 3,997 train items, query -> gallery (real images)"
    about = About(
        source="DeepFashion In-shop Clothes Retrieval Benchmark (mmlab.ie.cuhk.edu.hk)",
        licence="the release's own terms (non-commercial research)",
        citation="Liu et al., DeepFashion: Powering Robust Clothes Recognition and Retrieval "
        "with Rich Annotations, CVPR 2016",
        splits="the official partition: 3,997 train items; test query -> gallery",
        prepare=Spec(
            None,
            layout="{root}/Eval/list_eval_partition.txt\n"
            "{root}/img/WOMEN/Dresses/id_00000002/02_1_front.jpg (…)",
            where="download the DeepFashion In-shop Clothes Retrieval Benchmark (Google Drive, "
            "linked from https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html): "
            "Eval/list_eval_partition.txt, and Img/img.zip unzipped into {root}",
        ),
        paper_benchmark=True,
        published_protocols=("inshop", "inshop-ms512"),
    )
    expected: ClassVar[dict[str, int]] = {"train": 25882, "query": 14218, "gallery": 12612}

    def entries(self, params: InshopParams, root: Path) -> list[Entry]:
        path = partition_file(root)
        rows = read_rows(path, 1)
        if len(rows) < 2 or rows[1][:3] != HEADER:
            raise DataError(f"{path}: expected a count line, then the header {' '.join(HEADER)}")
        entries = []
        for fields in rows[2:]:
            if len(fields) < 3 or fields[2] not in ("train", "query", "gallery"):
                raise DataError(f"{path}: bad row {' '.join(fields)!r}")
            entries.append(Entry(fields[0], item_number(fields[1], path), fields[2]))
        declared = rows[0][0]
        if declared.isdigit() and int(declared) != len(entries):
            raise DataError(
                f"{path}: the count line says {declared} images, the file lists "
                f"{len(entries)} (truncated?)"
            )
        return entries
