"""``small-resnet``: a small ResNet for the embedded continuous-label protocols (poses).

The layout of He et al. 2016 scaled down for 64-px single-channel images on a CPU: a 3×3
stride-2 stem, four stages of one basic residual block each (widths 16, 32, 64, 128; stages
2-4 halve the resolution with a 1×1 projection shortcut), then global average pooling. About
0.3 M parameters and 16 M multiply-adds per 64×64 image. It stands in for the ResNet-34 that
Kim et al. use on MPII (Kim et al. 2019 §4.2); it has no pretrained weights.
"""

from __future__ import annotations

import torch
from torch import nn

from dmlbench.models.backbones import BACKBONES, load_trunk


class BasicBlock(nn.Module):
    """conv3×3-BN-ReLU-conv3×3-BN plus the (projected) input, then ReLU."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, in_channels: int = 1, widths: tuple[int, ...] = (16, 32, 64, 128)) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        )
        blocks, c = [], widths[0]
        for i, w in enumerate(widths):
            blocks.append(BasicBlock(c, w, stride=1 if i == 0 else 2))
            c = w
        self.stages = nn.Sequential(*blocks)
        self.out_dim = c
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.stem(x)).mean(dim=(2, 3))


@BACKBONES.register("small-resnet")
def small_resnet(pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    net = SmallResNet(in_channels)
    load_trunk(net, "small-resnet", pretrained, in_channels)
    return net, net.out_dim
