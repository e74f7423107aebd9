"""CUB-200-2011 loader on a fixture in the official layout; the shared error paths of real data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from dmlbench.data.cub200 import Cub200, Cub200Params
from dmlbench.data.files import load_protocol_data
from dmlbench.errors import DataError
from dmlbench.protocol import ImagesSpec, TransformSpec, load_protocol
from tests.data.fixtures import make_cub, small_images

IMAGES = ImagesSpec(
    train=TransformSpec(resize=36, random_resized_crop=32, hflip=0.5),
    test=TransformSpec(resize=36, center_crop=32),
)


@pytest.fixture
def cub(tmp_path: Path) -> Path:
    return make_cub(tmp_path / "CUB_200_2011", train=3, test=2, per_class=3)


def load(root: Path | None, tmp_path: Path, **params):
    return Cub200(IMAGES).load(Cub200Params(**params), root, tmp_path / "cache")


def test_zero_shot_split_by_class(cub: Path, tmp_path: Path) -> None:
    data = load(cub, tmp_path)
    assert sorted(set(data.train.labels.tolist())) == [1, 2, 3]
    assert sorted(set(data.test.labels.tolist())) == [101, 102]
    assert (len(data.train), len(data.test)) == (9, 6)
    assert data.test.queries is None
    assert data.train.images[0].shape == data.test.images[5].shape == (3, 32, 32)
    assert data.info["counts"] == {"train": 9, "test": 6}
    assert data.info["differs_from_official"] == {"train": 5864, "test": 5924}
    narrow = load(cub, tmp_path, train_classes=(1, 2), test_classes=(102, 200))
    assert (len(narrow.train), len(narrow.test)) == (6, 3)


def test_test_images_equal_the_torchvision_pil_pipeline(cub: Path, tmp_path: Path) -> None:
    data = load(cub, tmp_path)
    rows = dict(line.split() for line in (cub / "images.txt").read_text().splitlines())
    reference = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])
    first_test_id = str(10)  # ids are numbered class by class: 9 training images come first
    expected = reference(Image.open(cub / "images" / rows[first_test_id]).convert("RGB"))
    as_bytes = (data.test.images[0] * 255).round().to(torch.uint8)  # ToTensor divides by 255,
    assert torch.equal(as_bytes, (expected * 255).round().to(torch.uint8))  # v2 multiplies


def test_fingerprint_is_the_manifest(cub: Path, tmp_path: Path) -> None:
    first = load(cub, tmp_path).fingerprint
    assert load(cub, tmp_path).fingerprint == first
    labels = cub / "image_class_labels.txt"
    labels.write_text(labels.read_text().replace("1 1\n", "1 2\n", 1))
    relabelled = load(cub, tmp_path).fingerprint
    assert relabelled != first
    image = next((cub / "images").rglob("*.jpg"))
    image.write_bytes(image.read_bytes() + b"\0")  # same path, different size
    assert load(cub, tmp_path).fingerprint != relabelled


def test_wrong_or_missing_root_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nowhere.*dmlbench data prepare cub200"):
        load(tmp_path / "nowhere", tmp_path)
    with pytest.raises(DataError, match="no data root"):
        load(None, tmp_path)
    with pytest.raises(DataError, match="DMLBENCH_DATA"):
        load(Path("${DMLBENCH_DATA}/CUB_200_2011"), tmp_path)


def test_missing_index_file_names_the_path(cub: Path, tmp_path: Path) -> None:
    (cub / "image_class_labels.txt").unlink()
    with pytest.raises(DataError, match=r"image_class_labels\.txt: index file not found"):
        load(cub, tmp_path)


def test_malformed_index_row_names_file_and_line(cub: Path, tmp_path: Path) -> None:
    path = cub / "image_class_labels.txt"
    path.write_text(path.read_text() + "99\n")
    with pytest.raises(DataError, match=r"image_class_labels\.txt:16: expected 2 fields"):
        load(cub, tmp_path)


def test_missing_image_names_the_path(cub: Path, tmp_path: Path) -> None:
    victim = sorted((cub / "images").rglob("*.jpg"))[4]
    victim.unlink()
    with pytest.raises(DataError, match=f"{victim.name}: image file is missing"):
        load(cub, tmp_path)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_image_names_the_path(cub: Path, tmp_path: Path, damage: str) -> None:
    victim = sorted((cub / "images").rglob("*.jpg"))[2]
    data = victim.read_bytes()
    victim.write_bytes(b"not a jpeg at all" * 10 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(DataError, match=f"{victim.name}: (not a readable|corrupt) image"):
        load(cub, tmp_path)
    assert not any(p.name.startswith(".") for p in (tmp_path / "cache" / "images").iterdir())


def test_source_without_image_pipelines_refuses(cub: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="need the protocol's image pipelines"):
        Cub200().load(Cub200Params(), cub, tmp_path)


def test_pipeline_without_crop_is_refused(cub: Path, tmp_path: Path) -> None:
    images = ImagesSpec(
        train=TransformSpec(resize=36, random_crop=32), test=TransformSpec(resize=36)
    )
    with pytest.raises(DataError, match=r"images\.test: .* needs a crop"):
        Cub200(images).load(Cub200Params(), cub, tmp_path)


def test_shipped_protocol_loads_the_fixture(
    cub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DMLBENCH_DATA", str(cub.parent))
    protocol = small_images(load_protocol("cub200"))
    assert protocol.data_root() == cub
    data = load_protocol_data(protocol, cache=tmp_path / "cache")
    assert np.array_equal(np.unique(data.test.labels), [101, 102])
    assert os.path.isdir(tmp_path / "cache" / "images")
