"""Backbone registry: a small CNN for the embedded protocols, timm and torchvision by name.

A backbone factory returns ``(module, feature_dim)``: the module maps images (B, C, H, W) to
features (B, feature_dim). Names ``timm:<model>`` and ``torchvision:<model>`` are resolved
on demand, so every model those libraries know is available without registering it here.

Pretrained weights are loaded only when the protocol asks (``model.pretrained``), and never
fall back silently to random weights: a failure to fetch them is an error naming the weights
and where to put them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.registry import Registry

BackboneFactory = Callable[[str | None, int], tuple[nn.Module, int]]
BACKBONES: Registry[BackboneFactory] = Registry("backbone")


class SmallCNN(nn.Module):
    """Four conv-BN-ReLU blocks with pooling, then global average pooling.

    The embedded protocols' backbone: about 0.3 M parameters, fast on a CPU at 32-64 px.
    """

    def __init__(self, in_channels: int = 1, widths: tuple[int, ...] = (32, 64, 128, 128)):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for i, w in enumerate(widths):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(True)]
            if i < len(widths) - 1:
                layers.append(nn.MaxPool2d(2))
            c = w
        self.features = nn.Sequential(*layers)
        self.out_dim = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x).mean(dim=(2, 3))


@BACKBONES.register("small-cnn")
def small_cnn(pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    if pretrained:
        raise DmlbenchError("backbone 'small-cnn' has no pretrained weights; set pretrained: null")
    net = SmallCNN(in_channels)
    return net, net.out_dim


# Backbones without pretrained weights of any kind (CPU-sized, trained from scratch).
NO_PRETRAINED = frozenset({"small-cnn", "small-resnet"})


def backbone_exists(name: str) -> bool:
    if name in BACKBONES:
        return True
    lib, _, model = name.partition(":")
    if lib == "timm" and model:
        import timm

        return bool(timm.is_model(model))
    if lib == "torchvision" and model:
        import torchvision

        return model in torchvision.models.list_models()
    return False


def create_backbone(
    name: str, pretrained: str | None, in_channels: int, pooling: str = "avg"
) -> tuple[nn.Module, int]:
    """Build a backbone by registered name, ``timm:<name>`` or ``torchvision:<name>``.

    ``pooling`` other than ``avg`` is passed to factories that take it (bn-inception,
    googlenet, resnet50); any other backbone refuses it rather than ignoring it.
    """
    if name in BACKBONES:
        factory = BACKBONES.get(name)
        if pooling == "avg":
            return factory(pretrained, in_channels)
        if "pooling" not in inspect.signature(factory).parameters:
            raise DmlbenchError(f"backbone '{name}' supports only pooling: avg")
        return factory(pretrained, in_channels, pooling=pooling)
    if pooling != "avg":
        raise DmlbenchError(f"backbone '{name}' supports only pooling: avg")
    lib, _, model = name.partition(":")
    if lib == "timm" and model:
        return _timm(model, pretrained, in_channels)
    if lib == "torchvision" and model:
        return _torchvision(model, pretrained, in_channels)
    BACKBONES.get(name)  # raises with "did you mean"
    raise AssertionError("unreachable")


def _require_timm_weights(model: str) -> None:
    """Fail at once, naming what to fetch, when timm's weights are neither cached nor reachable.

    Offline, the Hugging Face client retries for about a minute, printing a warning each time,
    and its final error names neither the repository nor the file.
    """
    import socket

    import timm
    from huggingface_hub import constants, try_to_load_from_cache

    cfg = timm.models.get_pretrained_cfg(model)
    repo = getattr(cfg, "hf_hub_id", None)
    if not repo:  # weights behind a plain URL: timm's own download error names it
        return
    files = ("model.safetensors", "pytorch_model.bin")
    if any(isinstance(try_to_load_from_cache(repo, f), str) for f in files):
        return
    try:
        socket.create_connection(("huggingface.co", 443), timeout=5).close()
    except OSError:
        raise DmlbenchError(
            f"timm:{model}: pretrained weights are not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}) and huggingface.co cannot be reached; fetch "
            f"{files[0]} of https://huggingface.co/{repo} into that cache (`huggingface-cli "
            f"download {repo} {files[0]}` where there is network), or set pretrained: null"
        ) from None


def _timm(model: str, pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    import timm

    if pretrained:
        _require_timm_weights(model)
    try:
        net = timm.create_model(
            model, pretrained=bool(pretrained), num_classes=0, in_chans=in_channels
        )
    except Exception as err:  # network, missing file, unknown tag
        if pretrained:
            raise DmlbenchError(
                f"pretrained weights for timm:{model} could not be loaded ({type(err).__name__}: "
                f"{err}); put them in the Hugging Face cache (HF_HOME) or set pretrained: null"
            ) from None
        raise
    return net, int(net.num_features)  # type: ignore[arg-type]


def _torchvision(model: str, pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    import torchvision

    weights = None
    if pretrained:
        tag = "DEFAULT" if pretrained in {"imagenet", "default"} else pretrained
        weights = torchvision.models.get_model_weights(model).__members__.get(tag)
        if weights is None:
            raise DmlbenchError(f"torchvision:{model} has no weights '{pretrained}'")
    try:
        net = torchvision.models.get_model(model, weights=weights)
    except Exception as err:
        if weights is not None:
            hub = torch.hub.get_dir()
            raise DmlbenchError(
                f"pretrained weights {weights} for torchvision:{model} could not be fetched "
                f"({type(err).__name__}); download {weights.url} into {hub}/checkpoints/"
            ) from None
        raise
    if in_channels != 3:
        raise DmlbenchError(f"torchvision:{model} expects 3-channel images, got {in_channels}")
    return _strip_classifier(net)


def _strip_classifier(net: nn.Module) -> tuple[nn.Module, int]:
    """Replace the final classifier by identity so the module returns pooled features."""
    for attr in ("fc", "classifier", "head", "heads"):
        head = getattr(net, attr, None)
        if head is None:
            continue
        linear = head if isinstance(head, nn.Linear) else None
        if linear is None and isinstance(head, nn.Sequential):
            linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
            linear = linears[-1] if linears else None
        if linear is not None:
            setattr(net, attr, nn.Identity())
            if hasattr(net, "aux_logits"):
                net.aux_logits = False  # type: ignore[assignment]  # GoogLeNet/Inception: no auxiliary heads
                for aux in ("aux1", "aux2", "AuxLogits"):
                    if hasattr(net, aux):
                        setattr(net, aux, None)
            return net, int(linear.in_features)
    raise DmlbenchError(f"cannot find the classifier of {type(net).__name__} to remove")
