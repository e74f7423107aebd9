"""Training batches travel as uint8 and are converted on the device by the dataset's own
conversion: the images the network sees are bit for bit those of ``dataset[indices]``, for the
in-memory arrays (glyphs, poses) and the decoded-image cache (with random crops and flips,
seeded per epoch or not), behind a Subset too; a dataset that cannot split its conversion off
keeps the float path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dmlbench.data.base import ArrayImages, Split, uint8_batches
from dmlbench.data.cache import CachedImages, open_or_build
from dmlbench.data.transforms import build_pipeline, is_random, split_to_float
from dmlbench.protocol import TransformSpec

BATCH = [5, 0, 5, 3, 7, 1]  # a repeated index: two different crops of one image


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and bool((a.view(torch.int32) == b.view(torch.int32)).all())
    )


def test_arrays() -> None:
    images = np.random.default_rng(0).integers(0, 256, size=(9, 1, 6, 6), dtype=np.uint8)
    data = ArrayImages(images)
    raw = uint8_batches(data)
    assert raw is not None
    x = raw.__getitems__(BATCH)
    assert x.dtype == torch.uint8 and same(raw.to_float(x), data.__getitems__(BATCH))
    sub = Split(data, np.arange(9)).subset(np.array([8, 6, 4, 2, 0, 1, 3, 5]))
    raw_sub = uint8_batches(sub.images)
    assert raw_sub is not None and len(raw_sub) == 8
    assert same(
        raw_sub.to_float(raw_sub.__getitems__([0, 4, 4])), sub.images.__getitems__([0, 4, 4])
    )


@pytest.mark.parametrize(
    "spec",
    [
        TransformSpec(resize=12, random_resized_crop=8, hflip=0.5),
        TransformSpec(resize=12, random_crop=10, hflip=0.5),
        TransformSpec(resize=12, center_crop=8),
    ],
)
@pytest.mark.parametrize("seeded", [True, False])
def test_cached_images(spec: TransformSpec, seeded: bool, tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    files = []
    for i in range(8):  # noise of varying sizes: every crop and flip shows
        files.append(tmp_path / f"{i}.png")
        size = (12 + 2 * i, 12 + i)
        Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(files[-1])
    cache = open_or_build(tmp_path / "cache", "f" * 64, files, spec.resize, None)
    data = CachedImages(cache, np.arange(8), build_pipeline(spec, resized=True), is_random(spec))
    if seeded:
        data.set_epoch(3, seed=11)
    raw = uint8_batches(data)
    assert raw is not None
    torch.manual_seed(0)
    expected = data.__getitems__(BATCH)
    torch.manual_seed(0)
    x = raw.__getitems__(BATCH)
    assert x.dtype == torch.uint8 and same(raw.to_float(x), expected)
    if is_random(spec):  # the test could tell two draws apart
        torch.manual_seed(1)
        if seeded:
            data.set_epoch(4, seed=11)
        assert not same(raw.to_float(raw.__getitems__(BATCH)), expected)


def test_other_datasets_keep_the_float_path() -> None:
    assert uint8_batches(torch.utils.data.TensorDataset(torch.zeros(2, 3))) is None
    assert split_to_float(lambda x: x) is None
    from torchvision.transforms import v2

    assert split_to_float(v2.Compose([v2.ToDtype(torch.float64, scale=True)])) is None
