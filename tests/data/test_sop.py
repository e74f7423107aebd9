"""Stanford Online Products: Ebay_train.txt / Ebay_test.txt on a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.data.sop import SopParams, StanfordOnlineProducts
from dmlbench.errors import DataError
from dmlbench.protocol import ImagesSpec, TransformSpec
from tests.data.fixtures import make_sop

IMAGES = ImagesSpec(
    train=TransformSpec(resize=36, random_resized_crop=32),
    test=TransformSpec(resize=36, center_crop=32),
)


def load(root: Path, tmp_path: Path):
    return StanfordOnlineProducts(IMAGES).load(SopParams(), root, tmp_path / "cache")


def test_official_split_files(tmp_path: Path) -> None:
    root = make_sop(tmp_path / "Stanford_Online_Products", train=3, test=2, per_class=2)
    data = load(root, tmp_path)
    assert sorted(set(data.train.labels.tolist())) == [1, 2, 3]
    assert sorted(set(data.test.labels.tolist())) == [11319, 11320]
    assert (len(data.train), len(data.test)) == (6, 4)
    assert data.test.images[3].shape == (3, 32, 32)


def test_header_is_checked(tmp_path: Path) -> None:
    root = make_sop(tmp_path / "sop")
    path = root / "Ebay_test.txt"
    path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(DataError, match=r"Ebay_test\.txt: expected the header line image_id"):
        load(root, tmp_path)


def test_missing_split_file_and_image_name_the_path(tmp_path: Path) -> None:
    root = make_sop(tmp_path / "sop")
    victim = root / "bicycle_final" / "100002_1.JPG"
    victim.unlink()
    with pytest.raises(DataError, match=r"bicycle_final/100002_1\.JPG: image file is missing"):
        load(root, tmp_path)
    (root / "Ebay_train.txt").unlink()
    with pytest.raises(DataError, match=r"Ebay_train\.txt: index file not found"):
        load(root, tmp_path)


def test_non_integer_class_names_the_file(tmp_path: Path) -> None:
    root = make_sop(tmp_path / "sop")
    path = root / "Ebay_train.txt"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace(" 1 ", " one ", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"Ebay_train\.txt: class_id 'one' is not an integer"):
        load(root, tmp_path)
