"""``googlenet`` and ``resnet50``: torchvision's ImageNet models as DML backbones.

Both are the versions the DML literature compares against (Fehervari et al. 2019 test
GoogLeNet-style Inception and ResNet-50): torchvision's ``googlenet`` with
``GoogLeNet_Weights.IMAGENET1K_V1`` and ``resnet50`` with ``ResNet50_Weights.IMAGENET1K_V1``
(the original 76.1 % weights, not the later V2 recipe). Each is wrapped like BN-Inception:
ImageNet input normalisation as the first layer (inputs arrive as RGB in [0, 1]), the
convolutional trunk, then adaptive ``avg`` or ``avgmax`` pooling; the classifier and GoogLeNet's
auxiliary heads are removed. GoogLeNet keeps torchvision's ``transform_input`` (its ported
weights expect inputs rescaled from the ImageNet normalisation), with or without weights.

Weights go through the same hash-checked fetch as BN-Inception: a failure names the URL and
the file to place, and never falls back to random weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.models.backbones import BACKBONES
from dmlbench.models.bn_inception import PooledBackbone, Weights, fetch_state_dict, load_converted
from dmlbench.models.normalization import IMAGENET

if TYPE_CHECKING:  # importing torchvision costs about 2 s (its ops pull in torch._dynamo):
    import torchvision  # only when one of these backbones is built, not for every CLI call

GOOGLENET_LAYERS = [
    "conv1",
    "maxpool1",
    "conv2",
    "conv3",
    "maxpool2",
    "inception3a",
    "inception3b",
    "maxpool3",
    "inception4a",
    "inception4b",
    "inception4c",
    "inception4d",
    "inception4e",
    "maxpool4",
    "inception5a",
    "inception5b",
]


class GoogLeNetTrunk(nn.Module):
    """torchvision GoogLeNet up to inception 5b: (B, 3, H, W) → (B, 1024, H/32, W/32)."""

    def __init__(self, net: torchvision.models.GoogLeNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.net._transform_input(x)
        for name in GOOGLENET_LAYERS:
            x = getattr(self.net, name)(x)
        return x


def _check(name: str, pretrained: str | None, in_channels: int) -> bool:
    if in_channels != 3:
        raise DmlbenchError(f"{name} expects 3-channel images, got {in_channels}")
    if pretrained not in (None, "imagenet"):
        raise DmlbenchError(f"{name} has no weights {pretrained!r}; use imagenet or null")
    return pretrained == "imagenet"


@BACKBONES.register("googlenet")
def googlenet(
    pretrained: str | None, in_channels: int, pooling: str = "avg"
) -> tuple[nn.Module, int]:
    """torchvision GoogLeNet (Szegedy et al. 2015), ImageNet weights IMAGENET1K_V1."""
    import torchvision

    use_weights = _check("googlenet", pretrained, in_channels)
    net = torchvision.models.googlenet(
        weights=None, aux_logits=True, transform_input=True, init_weights=not use_weights
    )
    if use_weights:
        url = torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1.url
        load_converted(net, fetch_state_dict(Weights(url), "GoogLeNet ImageNet"), url)
    net.aux1 = net.aux2 = None
    net.aux_logits = False
    net.fc = nn.Identity()
    return PooledBackbone(GoogLeNetTrunk(net), 1024, IMAGENET, pooling), 1024


@BACKBONES.register("resnet50")
def resnet50(
    pretrained: str | None, in_channels: int, pooling: str = "avg"
) -> tuple[nn.Module, int]:
    """torchvision ResNet-50 (He et al. 2016), ImageNet weights IMAGENET1K_V1."""
    import torchvision

    use_weights = _check("resnet50", pretrained, in_channels)
    net = torchvision.models.resnet50(weights=None)
    if use_weights:
        url = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url
        load_converted(net, fetch_state_dict(Weights(url), "ResNet-50 ImageNet"), url)
    trunk = nn.Sequential(
        net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3, net.layer4
    )
    return PooledBackbone(trunk, 2048, IMAGENET, pooling), 2048
