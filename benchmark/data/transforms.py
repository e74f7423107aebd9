"""Image pipelines: a protocol's :class:`~dmlbench.protocol.TransformSpec` as torchvision v2 steps.

A pipeline works on uint8 (3, H, W) tensors, the form the decoded-image cache
(:mod:`dmlbench.data.cache`) stores, and ends with a float tensor in [0, 1], RGB. The steps, in
this order, each optional:

1. ``resize``: shorter side to N, aspect kept (``torchvision.transforms.Resize(N)``). The cache
   already stores images resized this way (with PIL, exactly as ``Resize`` on a PIL image
   does), so a cached pipeline skips this step.
2. ``random_resized_crop``: ``RandomResizedCrop(N, scale=crop_scale)``, aspect ratio 3/4..4/3.
3. ``random_crop``: a plain N×N crop at a random position (padded with zeros if too small).
4. ``center_crop``: the central N×N crop.
5. ``hflip``: horizontal flip with that probability.

Normalisation to a backbone's convention is *not* part of the data pipeline: it is the first
layer of the backbone (:mod:`dmlbench.models.normalization`), so the convention travels with the
weights and every pipeline and the cache stay backbone-independent.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from dmlbench.errors import DataError
from dmlbench.protocol import TransformSpec

Pipeline = Callable[[torch.Tensor], torch.Tensor]


def output_size(spec: TransformSpec) -> int | None:
    """The side of the square images a pipeline produces, or ``None`` when sizes vary."""
    for size in (spec.center_crop, spec.random_crop, spec.random_resized_crop):
        if size is not None:
            return size
    return None


def is_random(spec: TransformSpec) -> bool:
    return bool(spec.random_resized_crop or spec.random_crop or spec.hflip > 0.0)


def require_fixed_size(spec: TransformSpec, where: str) -> int:
    """The output size; a pipeline without a crop cannot batch images of different sizes."""
    size = output_size(spec)
    if size is None:
        raise DataError(
            f"{where}: real images differ in size, so the pipeline needs a crop "
            "(random_resized_crop, random_crop or center_crop) to make batches"
        )
    return size


def build_pipeline(spec: TransformSpec, *, resized: bool = False) -> Pipeline:
    """The v2 pipeline for uint8 (3, H, W) tensors, ending in float32 [0, 1].

    Args:
        spec: the protocol's ``images.train`` or ``images.test``.
        resized: the input is already resized to ``spec.resize`` (images from the cache).
    """
    from torchvision.transforms import v2

    steps: list[nn.Module] = []
    if spec.resize is not None and not resized:
        steps.append(v2.Resize(spec.resize, antialias=True))
    if spec.random_resized_crop is not None:
        steps.append(
            v2.RandomResizedCrop(spec.random_resized_crop, scale=spec.crop_scale, antialias=True)
        )
    if spec.random_crop is not None:
        steps.append(v2.RandomCrop(spec.random_crop, pad_if_needed=True))
    if spec.center_crop is not None:
        steps.append(v2.CenterCrop(spec.center_crop))
    if spec.hflip > 0.0:
        steps.append(v2.RandomHorizontalFlip(spec.hflip))
    steps.append(v2.ToDtype(torch.float32, scale=True))
    return v2.Compose(steps)


def split_to_float(pipeline: Pipeline) -> tuple[Pipeline, Pipeline] | None:
    """A pipeline of :func:`build_pipeline` as (its uint8 steps, its final conversion to
    float32 in [0, 1]), or ``None`` for any other callable.

    Applying the two in turn is applying the pipeline: the conversion is the last step and
    elementwise (``uint8.to(float32).mul_(1 / 255)``), so it gives the same bits on a batch as
    on each image, and on a GPU as on the CPU. Training uses the split to move uint8 batches
    to its device and convert them there (:class:`dmlbench.data.base.Uint8Batches`).
    """
    from torchvision.transforms import v2

    if not isinstance(pipeline, v2.Compose) or not pipeline.transforms:
        return None
    last = pipeline.transforms[-1]
    if not (isinstance(last, v2.ToDtype) and last.dtype == torch.float32 and last.scale):
        return None
    return v2.Compose(list(pipeline.transforms[:-1])), last
