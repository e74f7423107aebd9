"""mpii-pose: MPII full-body human poses as packaged by thin-slicing (Kwak et al. 2016) and used by
Kim et al., CVPR 2019 (§4.3).

The bundle's layout (what Kim et al.'s ``Dense_PairDataset`` / ``utils.eval_retrieval`` read)::

    <root>/train/...          12,366 training images (a torchvision ImageFolder class folder)
    <root>/val/...            9,919 test images; the first 1,919 are the queries
    <root>/list_nn.pkl        {"trn": (12366, M) int, "val": (9919, M) int}: every image's
                              other images, sorted by pose distance (0-based, ImageFolder order)
    <root>/dist_nn.pkl        {"trn": ..., "val": ...}: the matching pose distances
    <root>/dist_pose_val.mat  "dist_pose_val": (9919, 9919) pose distances between test images

Image order is torchvision ``ImageFolder``'s (files sorted within each folder, walked
recursively), which the neighbour lists index. The bundle ships no joint coordinates, so the
label distance is ``precomputed``: an image's label "vector" is its index, the training split
carries the neighbour lists (the dense sampler takes the k nearest from them and the losses look
up anchor distances in them), and the test split carries the query × database block of
``dist_pose_val``. Kim et al. report mean label distance multiplied by 224/288 (poses are in the
288-px frame, images are evaluated at 224 px): ``mld_scale`` reproduces that; nDCG is unscaled.

Images go through the protocol's pipelines (:mod:`dmlbench.data.transforms`) from the shared
decoded-image cache (:mod:`dmlbench.data.cache`), like every real-image source: the source
is constructed with the protocol's ``images`` section (``takes_images``; see
:func:`dmlbench.data.files.load_protocol_data`).

Why pickle: ``list_nn.pkl`` / ``dist_nn.pkl`` are the bundle's own format (Python pickles of
numpy arrays). They are read only from the user's data root, and through a restricted
unpickler that resolves nothing but the numpy array and dtype constructors, so a crafted file
cannot run code; anything else is a :class:`~dmlbench.errors.DataError` naming the file.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from dmlbench.data.about import About
from dmlbench.data.base import DATASETS, DatasetSource, DataSplits, Split, fingerprint_arrays
from dmlbench.errors import DataError, MissingFile
from dmlbench.protocol import MAX_K, Float, FrozenModel, ImagesSpec, Int

PICKLE_ALLOWED = {
    (module, name)
    for prefix in ("numpy.core", "numpy._core")
    for module, name in (
        (f"{prefix}.multiarray", "_reconstruct"),
        (f"{prefix}.multiarray", "scalar"),
        (f"{prefix}.numeric", "_frombuffer"),
    )
} | {("numpy", "ndarray"), ("numpy", "dtype")}


class MpiiParams(FrozenModel):
    train_dir: str = "train"
    test_dir: str = "val"
    num_queries: Int = Field(
        1919, ge=1, le=MAX_K, description="the first N test images are the queries"
    )
    mld_scale: Float = Field(224 / 288, gt=0.0, description="factor on mean label distance")


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in PICKLE_ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def load_pickle(path: Path) -> dict[str, np.ndarray]:
    """A bundle pickle: a dict of numpy arrays, read with the restricted unpickler."""
    if not path.is_file():
        raise MissingFile(f"{path}: neighbour file not found", path)
    try:
        with path.open("rb") as fh:
            data = _NumpyOnlyUnpickler(fh, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as err:
        raise DataError(f"{path}: not a neighbour-list pickle of numpy arrays ({err})") from None
    if not isinstance(data, dict) or not {"trn", "val"} <= set(data):
        raise DataError(f"{path}: expected a dict with keys 'trn' and 'val'")
    return {k: np.asarray(data[k]) for k in ("trn", "val")}


def load_matrix(path: Path) -> np.ndarray:
    from scipy.io import loadmat

    if not path.is_file():
        raise MissingFile(f"{path}: test distance matrix not found", path)
    try:
        return np.asarray(loadmat(str(path), variable_names=["dist_pose_val"])["dist_pose_val"])
    except (ValueError, KeyError, NotImplementedError, OSError) as err:
        raise DataError(
            f"{path}: cannot read 'dist_pose_val' ({type(err).__name__}: {err})"
        ) from None


def image_files(folder: Path) -> list[Path]:
    """The images of one ImageFolder class folder, in torchvision's ``make_dataset`` order."""
    from torchvision.datasets.folder import IMG_EXTENSIONS

    if not folder.is_dir():
        raise MissingFile(f"{folder}: image folder not found", folder)
    return [
        Path(dirpath) / name
        for dirpath, _, names in sorted(os.walk(folder, followlinks=True))
        for name in sorted(names)
        if name.lower().endswith(IMG_EXTENSIONS)
    ]


def training_lists(nn_path: Path, dist_path: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The training neighbour lists (int32) and distances (float32), checked against ``n``.

    Each pickle also holds the test lists, which are not needed: only the training part is
    kept, converted before the next file is read, so peak memory stays near one file's size.
    """
    neighbours = load_pickle(nn_path)["trn"]
    if neighbours.ndim != 2 or len(neighbours) != n:
        raise DataError(f"{nn_path}: 'trn' is {neighbours.shape}, expected {n} rows (the images)")
    if neighbours.size and (neighbours.min() < 0 or neighbours.max() >= n):
        raise DataError(f"{nn_path}: neighbour indices outside 0..{n - 1}")
    neighbours = neighbours.astype(np.int32)
    distances = load_pickle(dist_path)["trn"].astype(np.float32)
    if distances.shape != neighbours.shape:
        raise DataError(f"{dist_path}: 'trn' is {distances.shape}, expected {neighbours.shape}")
    return neighbours, distances


@DATASETS.register("mpii-pose")
class MpiiPose(DatasetSource):
    Params = MpiiParams
    label_kind = "continuous"
    takes_images: ClassVar[bool] = True
    description = "MPII human poses, thin-slicing bundle (Kim et al. 2019; real images)"
    about = About(
        source="MPII Human Pose images with the thin-slicing pose-distance bundle of Kim et al.",
        licence="the MPII release's own terms (images from YouTube); the bundle's, as shipped",
        citation="Andriluka et al., 2D Human Pose Estimation, CVPR 2014; Kim et al., Deep "
        "Metric Learning Beyond Binary Supervision, CVPR 2019",
        splits="the bundle's train and test images; the first test images query the rest",
        published_protocols=("mpii-pose",),
    )

    def __init__(self, images: ImagesSpec | None = None, workers: int | None = None) -> None:
        self.images = images
        self.workers = workers

    def load(self, params: MpiiParams, root: Path | None, cache_dir: Path) -> DataSplits:
        from dmlbench.data.cache import CachedImages, open_or_build
        from dmlbench.data.files import Entry, manifest, require_root
        from dmlbench.data.transforms import build_pipeline, is_random, require_fixed_size

        if self.images is None:
            raise DataError(
                "mpii-pose: real images need the protocol's image pipelines; "
                "load it with dmlbench.data.files.load_protocol_data"
            )
        require_fixed_size(self.images.train, "mpii-pose: images.train")
        require_fixed_size(self.images.test, "mpii-pose: images.test")
        root = require_root("mpii-pose", root)
        train_files = image_files(root / params.train_dir)
        test_files = image_files(root / params.test_dir)
        n_train, n_test = len(train_files), len(test_files)
        if not n_train or params.num_queries >= n_test:
            raise DataError(
                f"{root}: {n_train} training and {n_test} test images; need training "
                f"images and more than num_queries={params.num_queries} test images"
            )
        nn_path, dist_path = root / "list_nn.pkl", root / "dist_nn.pkl"
        neighbours, distances = training_lists(nn_path, dist_path, n_train)
        mat_path = root / "dist_pose_val.mat"
        matrix = load_matrix(mat_path)
        if matrix.shape != (n_test, n_test):
            raise DataError(
                f"{mat_path}: dist_pose_val is {matrix.shape}, expected "
                f"({n_test}, {n_test}) for the images of {root / params.test_dir}"
            )
        queries = np.arange(params.num_queries)
        gallery = np.arange(params.num_queries, n_test)
        block = np.ascontiguousarray(
            matrix[: params.num_queries, params.num_queries :], dtype=np.float32
        )
        del matrix

        files = train_files + test_files
        entries = [Entry(p.relative_to(root).as_posix(), 0, "train") for p in train_files]
        entries += [
            Entry(
                p.relative_to(root).as_posix(), 0, "query" if i < params.num_queries else "gallery"
            )
            for i, p in enumerate(test_files)
        ]
        _, manifest_hash = manifest(root, entries, "mpii-pose")
        fingerprint = fingerprint_arrays(neighbours, distances, block, extra=manifest_hash)

        def images(spec_name: str, idx: np.ndarray) -> CachedImages:
            spec = getattr(self.images, spec_name)
            cache = open_or_build(cache_dir, manifest_hash, files, spec.resize, self.workers)
            return CachedImages(cache, idx, build_pipeline(spec, resized=True), is_random(spec))

        train = Split(
            images("train", np.arange(n_train)),
            np.arange(n_train, dtype=np.float32)[:, None],
            label_kind="continuous",
            extras={
                "label_distance": "precomputed",
                "neighbours": neighbours,
                "neighbour_distances": distances,
            },
        )
        test = Split(
            images("test", np.arange(n_train, n_train + n_test)),
            np.arange(n_test, dtype=np.float32)[:, None],
            label_kind="continuous",
            queries=queries,
            gallery=gallery,
            extras={
                "label_distance": "precomputed",
                "distances": block,
                "mld_scale": params.mld_scale,
            },
        )
        return DataSplits(
            train=train,
            test=test,
            fingerprint=fingerprint,
            info={
                "root": str(root),
                "train": n_train,
                "queries": len(queries),
                "database": len(gallery),
            },
        )
