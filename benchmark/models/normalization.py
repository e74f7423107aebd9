"""Input conventions: the first layer of every pretrainable backbone.

Images arrive from the data pipeline (:mod:`dmlbench.data.transforms`) as RGB in [0, 1], the
same for every backbone, so the pipelines and the decoded-image cache stay backbone-independent.
What a network's weights were trained on (channel order, value range, per-channel mean and
std) belongs to the backbone instead: :class:`InputNormalization` is its first layer, so the
convention travels with the weights, and a backbone override (``small-cnn`` on CUB) can never
receive inputs normalised for another network.

Conventions:

- ``imagenet`` (:data:`IMAGENET`): RGB, (x - mean) / std with the ImageNet mean/std; the
  ``googlenet`` and ``resnet50`` backbones.
- ``caffe-bgr`` (:data:`CAFFE_BGR`): BGR, 0-255, minus the per-channel mean (104, 117, 128) in
  BGR order, std 1: what the converted BN-Inception weights expect (``pretrainedmodels``'
  ``input_space: BGR``, ``input_range: [0, 255]``), and what the multi-similarity reference
  code feeds them.
- ``timm:<model>.<tag>`` and ``torchvision:<model>.<weights>``: the mean and std the library
  itself preprocesses with for those weights (:mod:`dmlbench.models.backbones`), e.g. 0.5/0.5
  for many ViTs, not always ImageNet's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from dmlbench.errors import DmlbenchError


@dataclass(frozen=True)
class InputConvention:
    """What a backbone expects: channel order, value range, per-channel mean and std.

    The network receives ``(flip(x) if bgr else x) * scale``, minus ``mean``, divided by
    ``std``, for ``x`` RGB in [0, 1].
    """

    name: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    bgr: bool = False
    scale: float = 1.0

    def for_channels(self, channels: int) -> InputConvention:
        """The convention for ``channels``-channel images.

        A one-channel (grey) image reaches RGB weights through a first convolution whose
        kernels are summed over the colour channels (timm's ``in_chans=1``); the channel
        averages of mean and std are the closest single normalisation to what those weights
        saw on a grey RGB image.

        Raises:
            DmlbenchError: any other channel count than the convention's or one.
        """
        if channels == len(self.mean):
            return self
        if channels == 1:
            return replace(
                self,
                mean=(sum(self.mean) / len(self.mean),),
                std=(sum(self.std) / len(self.std),),
            )
        raise DmlbenchError(
            f"input convention {self.name} is for {len(self.mean)}-channel images, "
            f"got {channels} channels"
        )


IMAGENET = InputConvention("imagenet", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
CAFFE_BGR = InputConvention(
    "caffe-bgr", mean=(104.0, 117.0, 128.0), std=(1.0, 1.0, 1.0), bgr=True, scale=255.0
)


class InputNormalization(nn.Module):
    """Map RGB images in [0, 1] to a backbone's input convention (first layer of the backbone).

    Args:
        convention: what the backbone's weights expect.
        persistent: keep mean and std in the state dict. A timm or torchvision backbone's
            convention depends on its weights tag, which a network rebuilt without its
            pretrained weights (to load kept weights into) does not know: saved with the
            weights, the convention the network was trained with is restored with them. The
            registered backbones (BN-Inception, GoogLeNet, ResNet-50) have one convention per
            architecture and keep their state dicts' original keys.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, convention: InputConvention, persistent: bool = False) -> None:
        super().__init__()
        channels = len(convention.mean)
        self.convention = convention.name
        self.bgr = convention.bgr
        self.scale = convention.scale
        self.register_buffer(
            "mean", torch.tensor(convention.mean).view(1, channels, 1, 1), persistent=persistent
        )
        self.register_buffer(
            "std", torch.tensor(convention.std).view(1, channels, 1, 1), persistent=persistent
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bgr:
            x = x.flip(1)
        if self.scale != 1.0:
            x = x * self.scale
        return (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)

    def extra_repr(self) -> str:
        return self.convention
