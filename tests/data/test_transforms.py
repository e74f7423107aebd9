"""Image pipelines from TransformSpec, deterministic augmentation (input conventions:
tests/models/test_input_conventions.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from dmlbench.data.cache import CachedImages, open_or_build
from dmlbench.data.transforms import (
    build_pipeline,
    is_random,
    output_size,
    require_fixed_size,
)
from dmlbench.errors import DataError
from dmlbench.protocol import TransformSpec
from tests.data.fixtures import write_jpeg


def test_center_pipeline_equals_torchvision_on_pil(tmp_path: Path) -> None:
    path = tmp_path / "a.jpg"
    write_jpeg(path, 3, 0, size=(50, 37))
    pil = Image.open(path).convert("RGB")
    spec = TransformSpec(resize=30, center_crop=24)
    tensor = torch.from_numpy(np.asarray(pil).copy()).permute(2, 0, 1)
    ours = build_pipeline(spec)(tensor)  # resize on the tensor (not the cache path)
    reference = T.Compose([T.Resize(30), T.CenterCrop(24), T.ToTensor()])(pil)
    assert ours.shape == reference.shape == (3, 24, 24) and ours.dtype == torch.float32
    assert (ours - reference).abs().max() < 0.05  # tensor vs PIL bilinear resampling


def test_steps_and_sizes() -> None:
    x = torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8)
    flip = build_pipeline(TransformSpec(center_crop=40, hflip=1.0), resized=True)(x)
    assert torch.equal((flip * 255).round().to(torch.uint8), x[:, :, 10:50].flip(-1))
    rrc = build_pipeline(TransformSpec(resize=36, random_resized_crop=32), resized=True)(x)
    assert rrc.shape == (3, 32, 32) and rrc.min() >= 0.0 and rrc.max() <= 1.0
    small = build_pipeline(TransformSpec(random_crop=50))(x[:, :20, :20])
    assert small.shape == (3, 50, 50)  # padded when the image is smaller than the crop
    assert output_size(TransformSpec(resize=256, random_crop=224)) == 224
    assert output_size(TransformSpec(resize=256)) is None
    assert is_random(TransformSpec(center_crop=3, hflip=0.5))
    assert not is_random(TransformSpec(resize=4, center_crop=3))
    with pytest.raises(DataError, match="needs a crop"):
        require_fixed_size(TransformSpec(resize=256), "x")


@pytest.fixture
def dataset(tmp_path: Path) -> CachedImages:
    files = []
    for i in range(12):
        files.append(tmp_path / f"{i}.jpg")
        write_jpeg(files[-1], i % 3, i, size=(48, 40))
    cache = open_or_build(tmp_path / "cache", "abc", files, 36)
    spec = TransformSpec(resize=36, random_resized_crop=24, hflip=0.5)
    return CachedImages(cache, np.arange(12), build_pipeline(spec, resized=True), random=True)


def test_augmentation_depends_on_seed_epoch_and_batch_only(dataset: CachedImages) -> None:
    batch = [0, 3, 3, 7]
    dataset.set_epoch(0, seed=1)
    torch.manual_seed(123)
    a = dataset.__getitems__(batch)
    torch.manual_seed(999)  # the global generator does not matter once set_epoch was called
    assert torch.equal(dataset.__getitems__(batch), a)
    assert not torch.equal(a[1], a[2])  # a repeated image gets its own crop
    dataset.set_epoch(1, seed=1)
    assert not torch.equal(dataset.__getitems__(batch), a)
    dataset.set_epoch(0, seed=2)
    assert not torch.equal(dataset.__getitems__(batch), a)


def test_same_batches_with_any_number_of_workers(dataset: CachedImages) -> None:
    dataset.set_epoch(3, seed=0)
    batches = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]

    def run(workers: int) -> list[torch.Tensor]:
        loader = torch.utils.data.DataLoader(
            dataset, batch_sampler=batches, num_workers=workers, collate_fn=lambda b: b
        )
        return list(loader)

    for main, workers in zip(run(0), run(2), strict=True):
        assert torch.equal(main, workers)


def test_without_set_epoch_the_global_generator_is_used(dataset: CachedImages) -> None:
    torch.manual_seed(5)
    a = dataset[4]
    torch.manual_seed(5)
    assert torch.equal(dataset[4], a)
    assert not torch.equal(dataset[4], a)  # the generator moved on


@pytest.mark.parametrize(
    ("sizes", "cached_side", "spec"),
    [
        ([(48, 40)] * 5, 36, TransformSpec(resize=36, center_crop=24)),  # cached, one shape
        ([(48, 40)] * 5, None, TransformSpec(resize=30, center_crop=24)),  # resized batched
        ([(48, 40), (40, 48), (33, 33), (61, 20), (48, 40)], 36, TransformSpec(center_crop=24)),
    ],
)
def test_a_deterministic_batch_equals_one_call_per_image(
    tmp_path: Path, sizes: list[tuple[int, int]], cached_side: int | None, spec: TransformSpec
) -> None:
    """Evaluation batches go through the pipeline in one call when their images share a
    shape (one call per image otherwise): the values must be those of one call per image to
    the last bit, or a board's test metrics would move."""
    files = []
    for i, size in enumerate(sizes):
        files.append(tmp_path / f"{i}.jpg")
        write_jpeg(files[-1], i % 3, i, size=size)
    cache = open_or_build(tmp_path / "cache", "abc", files, cached_side)
    pipeline = build_pipeline(spec, resized=cached_side is not None)
    dataset = CachedImages(cache, np.arange(len(files)), pipeline, random=False)
    batch = [4, 0, 2, 1, 3]
    expected = torch.stack([pipeline(cache.get(i)) for i in batch])
    assert torch.equal(dataset.__getitems__(batch), expected)
