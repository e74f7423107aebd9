"""BN-Inception (Ioffe & Szegedy 2015), the standard backbone of the DML literature.

The architecture is the Caffe model converted to PyTorch by Cadene's ``pretrainedmodels``
(``bninception``), which the DML reference code (multi-similarity, Proxy-Anchor and others)
loads with the ImageNet weights ``bn_inception-52deb4733.pth``. Layer names are those of that
conversion, so its state dict loads key for key. Every branch is conv → BN → ReLU (the
original applies ReLU in place, so the concatenated outputs are the activated ones); stage 3c
and 4e halve the resolution with stride-2 convolutions and a max-pool branch; 5b's pool branch
is a stride-1 max pool. Deliberate choices:

- BatchNorm momentum is PyTorch's default 0.1 (the conversion writes 0.9, a Caffe leftover the
  multi-similarity code also drops); it only matters when BN statistics are updated.
- Global pooling is adaptive (any input size, e.g. the 227-pixel crops of the multi-similarity
  setting), average or average + max (``pooling: avgmax``, the sum, as in Proxy-Anchor).
- Inputs arrive as RGB in [0, 1]; the first layer converts them to what the weights expect:
  BGR, 0–255, minus (104, 117, 128) (``caffe-bgr`` in :mod:`dmlbench.models.normalization`).

Weights are fetched with ``torch.hub.load_state_dict_from_url(check_hash=True)``: the file
name carries the first hex digits of its SHA-256, which torch.hub checks after downloading;
a cached file is checked against the full SHA-256. When they cannot be loaded the error names
the URL and the exact file to place; ``pretrained`` never falls back to random weights.
Converted checkpoints store BN parameters as (1, C); they are reshaped to (C,) on load, and the
ImageNet classifier (``last_linear``) is dropped.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.models.backbones import BACKBONES
from dmlbench.models.normalization import CAFFE_BGR, InputConvention, InputNormalization


@dataclass(frozen=True)
class Weights:
    url: str
    sha256: str | None = None  # full digest, checked on cached files when known


IMAGENET = Weights(
    url="http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth",
    sha256="52deb473314542a5c2f87e9e6f26f4ca42fe863d15f986414dbae8c2dfdd2353",
)

CLASSIFIER_KEYS = ("last_linear.", "fc.")  # ImageNet classifiers, not part of a trunk
# name, in, 1x1, 3x3 reduce, 3x3, double reduce, double 3x3, pool, pool proj, stride
BLOCKS = (
    ("3a", 192, 64, 64, 64, 64, 96, "avg", 32, 1),
    ("3b", 256, 64, 64, 96, 64, 96, "avg", 64, 1),
    ("3c", 320, 0, 128, 160, 64, 96, "max", 0, 2),
    ("4a", 576, 224, 64, 96, 96, 128, "avg", 128, 1),
    ("4b", 576, 192, 96, 128, 96, 128, "avg", 128, 1),
    ("4c", 576, 160, 128, 160, 128, 160, "avg", 128, 1),
    ("4d", 608, 96, 128, 192, 160, 192, "avg", 128, 1),
    ("4e", 608, 0, 128, 192, 192, 256, "max", 0, 2),
    ("5a", 1056, 352, 192, 320, 160, 224, "avg", 128, 1),
    ("5b", 1024, 352, 192, 320, 192, 224, "max", 128, 1),
)


class BNInception(nn.Module):
    """The convolutional trunk: images (B, 3, H, W) → feature maps (B, 1024, H/32, W/32)."""

    out_dim = 1024

    def __init__(self) -> None:
        super().__init__()
        self._unit("conv1_7x7_s2", 3, 64, 7, stride=2)
        self._unit("conv2_3x3_reduce", 64, 64, 1)
        self._unit("conv2_3x3", 64, 192, 3)
        self.branches: dict[str, list[list[str]]] = {}
        for name, cin, c1, r3, c3, rd, cd, pool, proj, stride in BLOCKS:
            p = f"inception_{name}"
            paths: list[list[str]] = []
            if c1:
                paths.append([self._unit(f"{p}_1x1", cin, c1, 1)])
            paths.append(
                [
                    self._unit(f"{p}_3x3_reduce", cin, r3, 1),
                    self._unit(f"{p}_3x3", r3, c3, 3, stride),
                ]
            )
            paths.append(
                [
                    self._unit(f"{p}_double_3x3_reduce", cin, rd, 1),
                    self._unit(f"{p}_double_3x3_1", rd, cd, 3),
                    self._unit(f"{p}_double_3x3_2", cd, cd, 3, stride),
                ]
            )
            if pool == "avg":
                setattr(self, f"{p}_pool", nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True))
            elif stride == 2:
                setattr(self, f"{p}_pool", nn.MaxPool2d(3, stride=2, ceil_mode=True))
            else:
                setattr(self, f"{p}_pool", nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True))
            pool_path = [f"{p}_pool"] + (
                [self._unit(f"{p}_pool_proj", cin, proj, 1)] if proj else []
            )
            paths.append(pool_path)
            self.branches[p] = paths

    def _unit(self, name: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        setattr(self, name, nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2))
        setattr(self, f"{name}_bn", nn.BatchNorm2d(cout, eps=1e-5))
        return name

    def _run(self, name: str, x: torch.Tensor) -> torch.Tensor:
        layer = getattr(self, name)
        if isinstance(layer, nn.Conv2d):
            return F.relu(getattr(self, f"{name}_bn")(layer(x)), inplace=True)
        return layer(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._run("conv1_7x7_s2", x)
        x = F.max_pool2d(x, 3, stride=2, ceil_mode=True)
        x = self._run("conv2_3x3", self._run("conv2_3x3_reduce", x))
        x = F.max_pool2d(x, 3, stride=2, ceil_mode=True)
        for paths in self.branches.values():
            outs = []
            for path in paths:
                y = x
                for name in path:
                    y = self._run(name, y)
                outs.append(y)
            x = torch.cat(outs, dim=1)
        return x


class GlobalPool(nn.Module):
    """Adaptive global pooling: ``avg``, or ``avgmax`` = average + max (summed)."""

    def __init__(self, kind: str = "avg") -> None:
        super().__init__()
        if kind not in ("avg", "avgmax"):
            raise DmlbenchError(f"unknown pooling {kind!r}; use avg or avgmax")
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = x.mean(dim=(2, 3))
        return pooled + x.amax(dim=(2, 3)) if self.kind == "avgmax" else pooled

    def extra_repr(self) -> str:
        return self.kind


class PooledBackbone(nn.Module):
    """Input normalisation → convolutional trunk → global pooling: images → (B, out_dim)."""

    def __init__(
        self, trunk: nn.Module, out_dim: int, convention: InputConvention, pooling: str
    ) -> None:
        super().__init__()
        self.norm = InputNormalization(convention)
        self.trunk = trunk
        self.pool = GlobalPool(pooling)
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.trunk(self.norm(x)))


def fetch_state_dict(weights: Weights, what: str) -> dict[str, torch.Tensor]:
    """Download (or reuse from torch.hub's cache) and hash-check a checkpoint."""
    filename = weights.url.rsplit("/", 1)[-1].split("?")[0]
    target = Path(torch.hub.get_dir()) / "checkpoints" / filename
    hint = (
        f"download {weights.url} and place it at {target} (its SHA-256 must start with the "
        "hex digits after the last '-' of the file name), or set model.pretrained: null"
    )

    def check_digest() -> None:
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        if digest != weights.sha256:
            raise DmlbenchError(
                f"{target}: SHA-256 {digest} is not the expected "
                f"{weights.sha256} of the {what} weights; delete it and {hint}"
            )

    if weights.sha256 and target.is_file():
        check_digest()
    try:
        try:
            state = torch.hub.load_state_dict_from_url(
                weights.url, map_location="cpu", progress=False, check_hash=True, weights_only=True
            )
        except pickle.UnpicklingError:
            # An old (Python 2) pickle may need the full unpickler: allowed only for a file
            # whose complete SHA-256 is the known one.
            if not (weights.sha256 and target.is_file()):
                raise
            check_digest()
            state = torch.load(target, map_location="cpu", weights_only=False)
    except DmlbenchError:
        raise
    except Exception as err:  # network, hash mismatch, unreadable file
        raise DmlbenchError(
            f"{what} weights could not be loaded from {weights.url} "
            f"({type(err).__name__}: {err}); {hint}"
        ) from None
    return dict(state.get("state_dict", state))


def load_converted(net: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Load a converted checkpoint: (1, C) BN tensors reshaped, classifier keys dropped."""
    own = net.state_dict()
    fixed = {}
    for key, value in state.items():
        if key in own and value.shape != own[key].shape and value.numel() == own[key].numel():
            value = value.reshape(own[key].shape)
        fixed[key] = value
    try:
        missing, unexpected = net.load_state_dict(fixed, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise DmlbenchError(
            f"{source}: checkpoint does not match the architecture ({err})"
        ) from None
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    unexpected = [k for k in unexpected if not k.startswith(CLASSIFIER_KEYS)]
    if missing or unexpected:
        raise DmlbenchError(
            f"{source}: checkpoint does not match the architecture "
            f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
        )


@BACKBONES.register("bn-inception")
def bn_inception(
    pretrained: str | None, in_channels: int, pooling: str = "avg"
) -> tuple[nn.Module, int]:
    """BN-Inception, ``pretrained: imagenet`` or ``null`` (random initialisation)."""
    if in_channels != 3:
        raise DmlbenchError(f"bn-inception expects 3-channel images, got {in_channels}")
    if pretrained not in (None, "imagenet"):
        raise DmlbenchError(f"bn-inception has no weights {pretrained!r}; use imagenet or null")
    trunk = BNInception()
    if pretrained:
        load_converted(trunk, fetch_state_dict(IMAGENET, "BN-Inception ImageNet"), IMAGENET.url)
    return PooledBackbone(trunk, BNInception.out_dim, CAFFE_BGR, pooling), BNInception.out_dim


@cache
def bn_inception_takes(size: int) -> bool:
    """Whether BN-Inception runs on ``size`` x ``size`` images: a shape-only forward pass on
    PyTorch's meta device (no memory, no weights), since its accepted sizes follow no simple
    rule (224, 227 and 256 work; 56, 80, 112 and 299 do not)."""
    import torch

    try:
        _meta_bn_inception()(torch.zeros(1, 3, size, size, device="meta"))
    except RuntimeError:
        return False
    return True


@lru_cache(maxsize=1)
def _meta_bn_inception() -> Any:
    import torch

    with torch.device("meta"):
        return BNInception().eval()
