"""mpii-pose on a tiny fixture written in the thin-slicing bundle layout Kim et al.'s code reads."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from dmlbench.data.dense import PoseDistance, label_distance_for
from dmlbench.data.files import load_protocol_data
from dmlbench.data.mpii import image_files, load_pickle
from dmlbench.errors import DataError
from dmlbench.protocol import load_protocol

N_TRAIN, N_TEST, N_QUERIES = 14, 11, 3


def neighbour_lists(poses: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = PoseDistance().rowwise(poses[:, None], poses[None])
    order = np.argsort(d, axis=1, kind="stable")
    lists = np.array([[j for j in row if j != i] for i, row in enumerate(order)])
    return lists, np.take_along_axis(d, lists, axis=1), d


def make_bundle(root: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """train/ and val/ image folders, list_nn.pkl, dist_nn.pkl, dist_pose_val.mat."""
    from PIL import Image
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    poses = {"trn": rng.uniform(size=(N_TRAIN, 28)), "val": rng.uniform(size=(N_TEST, 28))}
    for folder, n in (("train", N_TRAIN), ("val", N_TEST)):
        for i in range(n):
            sub = root / folder / ("b" if i % 3 == 0 else "")  # nested folders are walked too
            sub.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, size=(40, 48, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(sub / f"img_{i:03d}.{'PNG' if i % 2 else 'png'}")
        (root / folder / "notes.txt").write_text("not an image")
    lists, dists, full = {}, {}, {}
    for key in ("trn", "val"):
        lists[key], dists[key], full[key] = neighbour_lists(poses[key])
    with (root / "list_nn.pkl").open("wb") as fh:
        pickle.dump(lists, fh)
    with (root / "dist_nn.pkl").open("wb") as fh:
        pickle.dump(dists, fh)
    savemat(str(root / "dist_pose_val.mat"), {"dist_pose_val": full["val"]})
    return {"lists": lists["trn"], "dists": dists["trn"], "val": full["val"]}


def protocol(root: Path, **extra: object):
    overrides = {
        "data.root": str(root),
        "data.params.num_queries": N_QUERIES,
        "images.train": {"resize": 36, "random_crop": 32},
        "images.test": {"resize": 36, "center_crop": 32},
        "model.backbone": "small-resnet",
        "model.pretrained": None,
        "batch.size": 8,
        **extra,
    }
    return load_protocol("mpii-pose").with_overrides(overrides, name="mpii-fixture")


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path / "mpii"
    return root, make_bundle(root)


def test_loads_the_bundle_layout(bundle, tmp_path: Path) -> None:
    root, truth = bundle
    data = load_protocol_data(protocol(root), cache=tmp_path / "cache")
    train, test = data.train, data.test
    assert len(train) == N_TRAIN and len(test) == N_TEST
    assert train.label_kind == test.label_kind == "continuous"
    np.testing.assert_array_equal(train.labels[:, 0], np.arange(N_TRAIN))
    np.testing.assert_array_equal(train.extras["neighbours"], truth["lists"])
    np.testing.assert_allclose(train.extras["neighbour_distances"], truth["dists"], rtol=1e-6)
    np.testing.assert_array_equal(test.queries, np.arange(N_QUERIES))
    np.testing.assert_array_equal(test.gallery, np.arange(N_QUERIES, N_TEST))
    np.testing.assert_allclose(
        test.extras["distances"], truth["val"][:N_QUERIES, N_QUERIES:], rtol=1e-6
    )
    assert test.extras["mld_scale"] == pytest.approx(224 / 288)
    img = test.images[0]
    assert (
        img.shape == (3, 32, 32) and img.dtype == torch.float32 and 0 <= img.min() <= img.max() <= 1
    )
    assert (
        data.fingerprint == load_protocol_data(protocol(root), cache=tmp_path / "cache").fingerprint
    )
    # the loss's anchor distances are the shipped ones
    batch = torch.tensor([[4.0], [truth["lists"][4, 0]], [truth["lists"][4, 7]]])
    got = label_distance_for(train).from_anchor(batch)
    np.testing.assert_allclose(
        got.numpy(), [0.0, truth["dists"][4, 0], truth["dists"][4, 7]], rtol=1e-6
    )


def test_image_order_is_torchvision_imagefolder_order(bundle) -> None:
    from torchvision.datasets.folder import IMG_EXTENSIONS, make_dataset

    root, _ = bundle
    ours = [str(p) for p in image_files(root / "train")]
    theirs = [p for p, _ in make_dataset(str(root), {"train": 0}, extensions=IMG_EXTENSIONS)]
    assert ours == theirs and len(ours) == N_TRAIN


def test_missing_pieces_name_the_path(bundle, tmp_path: Path) -> None:
    root, _ = bundle
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="nowhere"):
        load_protocol_data(protocol(tmp_path / "nowhere"), cache=cache)
    (root / "dist_pose_val.mat").rename(root / "moved.mat")
    with pytest.raises(DataError, match=r"dist_pose_val\.mat"):
        load_protocol_data(protocol(root), cache=cache)
    (root / "moved.mat").rename(root / "dist_pose_val.mat")
    (root / "list_nn.pkl").unlink()
    with pytest.raises(DataError, match=r"list_nn\.pkl"):
        load_protocol_data(protocol(root), cache=cache)


def test_mismatched_lists_are_rejected(bundle, tmp_path: Path) -> None:
    root, truth = bundle
    cache = tmp_path / "cache"
    good = (root / "list_nn.pkl").read_bytes()
    with (root / "list_nn.pkl").open("wb") as fh:
        pickle.dump({"trn": truth["lists"][:-1], "val": truth["lists"]}, fh)
    with pytest.raises(DataError, match=r"list_nn\.pkl"):
        load_protocol_data(protocol(root), cache=cache)
    with (root / "list_nn.pkl").open("wb") as fh:
        pickle.dump({"trn": truth["lists"] + N_TRAIN, "val": truth["lists"]}, fh)
    with pytest.raises(DataError, match="outside"):
        load_protocol_data(protocol(root), cache=cache)
    (root / "list_nn.pkl").write_bytes(good)
    with (root / "dist_nn.pkl").open("wb") as fh:
        pickle.dump({"trn": truth["dists"][:, :3], "val": truth["dists"]}, fh)
    with pytest.raises(DataError, match=r"dist_nn\.pkl"):
        load_protocol_data(protocol(root), cache=cache)


class _Exploit:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_pickles_cannot_run_code(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    path = tmp_path / "list_nn.pkl"
    with path.open("wb") as fh:
        pickle.dump({"trn": _Exploit(str(target)), "val": np.zeros(2)}, fh)
    with pytest.raises(DataError, match="refusing to load"):
        load_pickle(path)
    assert not target.exists()
    path.write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"list_nn\.pkl"):
        load_pickle(path)


def test_corrupt_image_names_the_file(bundle, tmp_path: Path) -> None:
    root, _ = bundle
    bad = sorted((root / "val").glob("*.png"))[0]
    bad.write_bytes(b"\x89PNG not really")
    with pytest.raises(DataError, match=re.escape(bad.name)):
        load_protocol_data(protocol(root), cache=tmp_path / "cache")


@pytest.mark.parametrize("method", ["log-ratio", "triplet-dense"])
def test_trains_and_evaluates_end_to_end(bundle, tmp_path: Path, method: str) -> None:
    from dmlbench.engine.evaluation import evaluate_model
    from dmlbench.engine.train import train
    from dmlbench.methods import create_method

    root, truth = bundle
    p = protocol(root)
    data = load_protocol_data(p, cache=tmp_path / "cache")
    m = create_method(method, None, 0, p.model.embedding_size)
    result = train(p, m, data.train, seed=0, max_steps=2, progress=False)
    assert result.steps == 2 and np.isfinite(result.curve[-1]["loss"])
    metrics = evaluate_model(p.metrics, result.model, data.test, "cpu", 0)
    assert set(metrics) == {
        "queries",
        *(f"ndcg@{k}" for k in range(10, 101, 10)),
        *(f"mld@{k}" for k in range(1, 11)),
    }
    gallery_d = truth["val"][:N_QUERIES, N_QUERIES:]
    assert gallery_d.min() * 224 / 288 <= metrics["mld@1"] <= gallery_d.max() * 224 / 288
    assert 0 < metrics["ndcg@10"] <= 1
