"""Cars196: the original cars_annos.mat layout and the csv re-pack, on fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io

from dmlbench.data.cars196 import Cars196, Cars196Params, read_mat
from dmlbench.errors import DataError
from dmlbench.protocol import ImagesSpec, TransformSpec
from tests.data.fixtures import make_cars_csv, make_cars_mat

IMAGES = ImagesSpec(
    train=TransformSpec(resize=36, random_crop=32, hflip=0.5),
    test=TransformSpec(resize=36, center_crop=32),
)


def load(root: Path, tmp_path: Path, **params):
    return Cars196(IMAGES).load(Cars196Params(**params), root, tmp_path / "cache")


def test_mat_file_in_the_real_struct_layout(tmp_path: Path) -> None:
    root = make_cars_mat(tmp_path / "cars", train=3, test=2, per_class=2)
    raw = scipy.io.loadmat(str(root / "cars_annos.mat"))["annotations"]
    assert raw.shape == (1, 10)
    assert raw.dtype.names[0] == "relative_im_path" and raw.dtype.names[5] == "class"
    assert read_mat(root / "cars_annos.mat")[0] == ("car_ims/000001.jpg", 1)
    data = load(root, tmp_path)
    assert sorted(set(data.train.labels.tolist())) == [1, 2, 3]
    assert sorted(set(data.test.labels.tolist())) == [99, 100]
    assert data.train.images[0].shape == (3, 32, 32)


def test_csv_repack_reads_both_files_and_splits_by_class(tmp_path: Path) -> None:
    root = make_cars_csv(tmp_path / "cars", train=3, test=2, per_class=3)
    data = load(root, tmp_path)
    assert (len(data.train), len(data.test)) == (9, 6)
    assert sorted(set(data.test.labels.tolist())) == [99, 100]
    assert np.bincount(data.train.labels)[1:4].tolist() == [3, 3, 3]


def test_both_forms_hold_the_same_images(tmp_path: Path) -> None:
    mat = load(make_cars_mat(tmp_path / "a", per_class=2), tmp_path)
    csv = load(make_cars_csv(tmp_path / "b", per_class=2), tmp_path)
    assert sorted(mat.train.labels.tolist()) == sorted(csv.train.labels.tolist())
    assert mat.fingerprint != csv.fingerprint  # different paths: records tell which was used


def test_auto_prefers_mat_and_can_be_forced(tmp_path: Path) -> None:
    root = make_cars_mat(tmp_path / "cars", per_class=2)
    make_cars_csv(root, per_class=3)
    assert len(load(root, tmp_path).train) == 6
    assert len(load(root, tmp_path, annotations="csv").train) == 9


def test_missing_annotations_names_both_layouts(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"cars_annos\.mat nor anno_train\.csv"):
        load(tmp_path / "empty", tmp_path)


def test_mat_without_annotations_variable(tmp_path: Path) -> None:
    root = tmp_path / "cars"
    root.mkdir()
    scipy.io.savemat(str(root / "cars_annos.mat"), {"something_else": np.zeros(3)})
    with pytest.raises(DataError, match=r"cars_annos\.mat: no 'annotations' variable"):
        load(root, tmp_path)


def test_missing_image_names_the_path(tmp_path: Path) -> None:
    root = make_cars_mat(tmp_path / "cars", per_class=2)
    (root / "car_ims" / "000003.jpg").unlink()
    with pytest.raises(DataError, match=r"car_ims/000003\.jpg: image file is missing"):
        load(root, tmp_path)


def test_csv_row_without_image_names_file_and_line(tmp_path: Path) -> None:
    root = make_cars_csv(tmp_path / "cars", per_class=2)
    with (root / "anno_test.csv").open("a") as fh:
        fh.write("09999.jpg,1,2,3,4,5\n")
    with pytest.raises(
        DataError, match=r"09999\.jpg: image file is missing \(listed in .*anno_test\.csv:"
    ):
        load(root, tmp_path)
