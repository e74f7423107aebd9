"""CUB-200-2011 (Wah et al. 2011), zero-shot split: classes 1–100 train, 101–200 test.

Read from the official release: under the root ``CUB_200_2011``,
``images.txt`` (``<image id> <class dir>/<file>.jpg``, files under ``images/``) and
``image_class_labels.txt`` (``<image id> <class 1..200>``). ``train_test_split.txt`` is not
used: the metric-learning split is by class (Oh Song et al. 2016), 5,864 training and 5,924
test images. Bounding boxes are not used either (the protocols train on whole images).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from dmlbench.data.about import About, Archive, Spec
from dmlbench.data.base import DATASETS
from dmlbench.data.files import Entry, ImageSource, in_range, read_rows, to_int
from dmlbench.errors import DataError
from dmlbench.protocol import FrozenModel, Int


class Cub200Params(FrozenModel):
    train_classes: tuple[Int, Int] = (1, 100)
    test_classes: tuple[Int, Int] = (101, 200)


@DATASETS.register("cub200")
class Cub200(ImageSource):
    Params = Cub200Params
    name = "cub200"
    description = "CUB-200-2011 birds, classes 1-100 train / 101-200 test (real images)"
    about = About(
        source="Caltech-UCSD Birds-200-2011 release (data.caltech.edu)",
        licence="the release's own terms; images collected from Flickr",
        citation="Wah et al., The Caltech-UCSD Birds-200-2011 Dataset, CNS-TR-2011-001, 2011",
        splits="classes 1-100 train, 101-200 test (zero-shot)",
        prepare=Spec(
            Archive(
                "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",
                "0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
                strip="CUB_200_2011/",
            ),
            layout="{root}/images.txt\n{root}/image_class_labels.txt\n"
            "{root}/images/001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg (…)",
            where="download CUB_200_2011.tgz from https://data.caltech.edu/records/65de6-vp158 "
            "(SHA-256 0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081) and "
            "extract the contents of its CUB_200_2011/ folder into {root}",
        ),
        paper_benchmark=True,
        published_protocols=("cub200", "cub200-ms512"),
    )
    expected: ClassVar[dict[str, int]] = {"train": 5864, "test": 5924}

    def entries(self, params: Cub200Params, root: Path) -> list[Entry]:
        images_txt, labels_txt = root / "images.txt", root / "image_class_labels.txt"
        paths = {r[0]: r[1] for r in read_rows(images_txt, 2)}
        entries = []
        labelled: set[str] = set()
        for image_id, cls in read_rows(labels_txt, 2):
            label = to_int(cls, labels_txt, "class id")
            if image_id not in paths:
                raise DataError(f"{labels_txt}: image id {image_id} is not in {images_txt}")
            if not 1 <= label <= 200:  # a corrupt row, not a class the protocol leaves out
                raise DataError(
                    f"{labels_txt}: image {image_id}: class id {label} is outside 1..200"
                )
            role = (
                "train"
                if in_range(label, params.train_classes)
                else "test"
                if in_range(label, params.test_classes)
                else None
            )
            if role is not None:
                entries.append(Entry(f"images/{paths[image_id]}", label, role))
            labelled.add(image_id)
        unlabelled = [i for i in paths if i not in labelled]
        if unlabelled:  # dropping it silently would change the data set without a word
            more = f" (and {len(unlabelled) - 1} more)" if len(unlabelled) > 1 else ""
            raise DataError(
                f"{images_txt}: image {unlabelled[0]} ({paths[unlabelled[0]]}) has no class in "
                f"{labels_txt}{more}"
            )
        return entries
