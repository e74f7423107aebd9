"""Backbone registry: a small CNN for the embedded protocols, timm and torchvision by name.

A backbone factory returns ``(module, feature_dim)``: the module maps images (B, C, H, W) to
features (B, feature_dim). Names ``timm:<model>`` and ``torchvision:<model>`` are resolved
on demand, so every model those libraries know is available without registering it here.

Pretrained weights are loaded only when the protocol asks (``model.pretrained``), and never
fall back silently to random weights: a failure to fetch them is an error naming the weights
and where to put them. ``imagenet`` (or ``default``) asks for the library's default weights of
the model; any other value is a weights tag, which is checked before anything loads: timm's
``<model>.<tag>`` (``pretrained: augreg_in21k`` for ``timm:vit_tiny_patch16_224``) or a member
of torchvision's weights enum (``pretrained: IMAGENET1K_V2`` for ``torchvision:resnet50``).

Images arrive as RGB in [0, 1]; a timm or torchvision network gets the mean and std that its
library preprocesses those weights with (timm's ``resolve_data_config``, the torchvision
weights' ``transforms()``) as its first layer (:class:`NormalizedBackbone`). Without
pretrained weights the network keeps the convention of the weights it names (the default
ones), so a network rebuilt to load kept weights sees what the trained one saw.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from dmlbench.errors import DmlbenchError, Registry, did_you_mean
from dmlbench.models.normalization import IMAGENET, InputConvention, InputNormalization
from dmlbench.models.trunks import PREFIX as TRUNK_PREFIX
from dmlbench.models.trunks import TRUNK_BACKBONES, load_recipe, load_state, trunk_name

if TYPE_CHECKING:  # torchvision costs about 2 s to import: only when such a backbone is built
    from torchvision.models import WeightsEnum

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
    net = SmallCNN(in_channels)
    load_trunk(net, "small-cnn", pretrained, in_channels)
    return net, net.out_dim


def load_trunk(net: nn.Module, backbone: str, pretrained: str | None, in_channels: int) -> None:
    """Load the trunk ``pretrained: trunk:NAME`` names into ``net`` (a CPU-sized backbone).

    Trunks are trained on RGB; a one-channel protocol gets the first convolution's weights
    summed over the three colours (what timm does for ``in_chans=1``): exactly the RGB network
    applied to the grey image repeated three times.

    Raises:
        DmlbenchError: weights other than a trunk made here, or a trunk that does not fit.
    """
    if pretrained is None:
        return
    check_trunk(backbone, pretrained)
    name = str(trunk_name(pretrained))
    state = load_state(name)
    first = next(n for n, m in net.named_modules() if isinstance(m, nn.Conv2d)) + ".weight"
    if in_channels == 1 and state[first].shape[1] == 3:
        state[first] = state[first].sum(dim=1, keepdim=True)
    elif state[first].shape[1] != in_channels:
        raise DmlbenchError(f"trunk '{name}' takes 3-channel images, not {in_channels}")
    net.load_state_dict(state)


def check_trunk(backbone: str, pretrained: str) -> None:
    """Refuse weights other than a shipped trunk of this backbone, without loading them."""
    name = trunk_name(pretrained)
    if name is None:
        raise DmlbenchError(
            f"backbone '{backbone}' has no weights {pretrained!r}; use pretrained: "
            f"{TRUNK_PREFIX}NAME (a trunk made by `dmlbench pretrain`) or null"
        )
    recipe = load_recipe(name)
    if recipe.backbone != backbone:
        raise DmlbenchError(f"trunk '{name}' is a {recipe.backbone}, not a {backbone}")


# Backbones whose only weights are trunks made here (CPU-sized; ``pretrained: trunk:NAME``).
NO_PRETRAINED = frozenset(TRUNK_BACKBONES)
# ``pretrained`` values asking for the library's default weights of a timm/torchvision model.
DEFAULT_WEIGHTS = frozenset({"imagenet", "default"})
# torchvision models whose weights are ported with ``transform_input=True`` (torchvision sets it
# only when loading them): set with or without weights, so the architecture never depends on
# whether weights were loaded.
TRANSFORM_INPUT = frozenset(
    {"googlenet", "inception_v3", "quantized_googlenet", "quantized_inception_v3"}
)


class NormalizedBackbone(nn.Module):
    """Input normalisation, then a timm or torchvision network returning pooled features.

    The mean and std are saved with the weights (persistent buffers): they depend on the
    weights tag, which a network rebuilt without pretrained weights to load kept ones into does
    not know.
    """

    def __init__(self, net: nn.Module, convention: InputConvention) -> None:
        super().__init__()
        self.norm = InputNormalization(convention, persistent=True)
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(x))


def backbone_exists(name: str) -> bool:
    if name in BACKBONES:
        return True
    lib, _, model = name.partition(":")
    if lib == "timm" and model:
        import timm

        if "." in model:  # a tagged name: timm.is_model ignores the tag
            return model in timm.list_pretrained(model)
        return bool(timm.is_model(model))
    if lib == "torchvision" and model:
        import torchvision

        return model in torchvision.models.list_models()
    return False


def backbone_hint(name: str) -> str:
    """``" (did you mean 'x'?)"`` for an unknown backbone name, or an empty string.

    A bare library model name (``resnet18``) is most likely meant as that library's model, so
    ``timm:<name>`` (or else ``torchvision:<name>``) is suggested when the library knows it,
    before the closest registered name: the fuzzy match alone said ``resnet50``, a different
    network.
    """
    if ":" not in name:
        for lib in ("timm", "torchvision"):
            if backbone_exists(f"{lib}:{name}"):
                return f" (did you mean '{lib}:{name}'?)"
    return did_you_mean(name, BACKBONES.list())


def create_backbone(
    name: str, pretrained: str | None, in_channels: int, pooling: str = "avg"
) -> tuple[nn.Module, int]:
    """Build a backbone by registered name, ``timm:<name>`` or ``torchvision:<name>``.

    ``pooling`` other than ``avg`` is passed to factories that take it (bn-inception,
    googlenet, resnet50); any other backbone refuses it rather than ignoring it.

    Raises:
        DmlbenchError: one line for weights that do not exist (before anything loads) or
            cannot be loaded, and for options the backbone does not support.
    """
    check_weights(name, pretrained)
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
    if lib == "timm" and backbone_exists(name):
        return _timm(model, pretrained, in_channels)
    if lib == "torchvision" and backbone_exists(name):
        return _torchvision(model, pretrained, in_channels)
    known = ", ".join(BACKBONES.list())
    raise DmlbenchError(
        f"unknown backbone '{name}'{backbone_hint(name)}; known: {known}, timm:<model>, "
        "torchvision:<model>"
    )


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


def check_weights(name: str, pretrained: str | None) -> None:
    """Refuse a ``pretrained`` tag that a timm or torchvision backbone has no weights for.

    One line naming the key, the tag and the tags there are, closest first, before anything
    is built or fetched (a registered backbone's factory checks its own few values).

    Raises:
        DmlbenchError: the backbone has no weights of that tag, or none at all.
    """
    if pretrained is not None and name in NO_PRETRAINED:
        check_trunk(name, pretrained)
    if pretrained is None or name in BACKBONES or not backbone_exists(name):
        return  # an unknown name is an error of its own
    lib, _, model = name.partition(":")
    if lib == "timm":
        _timm_name(model, pretrained)
    else:
        _torchvision_weights(model, pretrained)


def _closest_first(tag: str, tags: list[str]) -> str:
    def likeness(other: str) -> float:
        return difflib.SequenceMatcher(None, tag.lower(), other.lower()).ratio()

    return ", ".join(sorted(tags, key=likeness, reverse=True))


def _timm_name(model: str, pretrained: str | None) -> str:
    """The timm name to create: ``<model>.<tag>`` when ``pretrained`` is a tag, else ``model``.

    Raises:
        DmlbenchError: an unknown tag, a tag other than the one the name carries, or a model
            without pretrained weights asked for some.
    """
    import timm

    if pretrained is None:
        return model
    arch, _, named = model.partition(".")
    tags = [n.partition(".")[2] for n in timm.list_pretrained(f"{arch}.*")]
    if not tags:
        raise DmlbenchError(
            f"model.pretrained: timm:{model} has no pretrained weights (asked for "
            f"{pretrained!r}); set pretrained: null"
        )
    if pretrained in DEFAULT_WEIGHTS:
        return model
    if named and named != pretrained:
        raise DmlbenchError(
            f"model.pretrained: {pretrained!r} contradicts the tag of timm:{model}; use "
            f"pretrained: imagenet with a tagged name, or name timm:{arch}"
        )
    if pretrained not in tags:
        raise DmlbenchError(
            f"model.pretrained: timm:{arch} has no weights tagged {pretrained!r}; its tags, "
            f"closest first: {_closest_first(pretrained, tags)}"
        )
    return f"{arch}.{pretrained}"


def _timm(model: str, pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    import timm
    from timm.data import resolve_data_config

    name = _timm_name(model, pretrained)
    if pretrained:
        _require_timm_weights(name)
    try:
        net = timm.create_model(
            name, pretrained=bool(pretrained), num_classes=0, in_chans=in_channels
        )
    except Exception as err:  # network, missing file
        if pretrained:
            raise DmlbenchError(
                f"pretrained weights for timm:{name} could not be loaded ({type(err).__name__}: "
                f"{err}); put them in the Hugging Face cache (HF_HOME) or set pretrained: null"
            ) from None
        raise
    config = resolve_data_config({}, model=net)  # the tag's mean/std, as timm preprocesses
    convention = InputConvention(
        f"timm:{name}", mean=tuple(config["mean"]), std=tuple(config["std"])
    )
    dim = int(net.num_features)  # type: ignore[arg-type]
    return NormalizedBackbone(net, convention.for_channels(in_channels)), dim


def _torchvision_weights(model: str, pretrained: str | None) -> WeightsEnum:
    """The weights ``pretrained`` names; with ``pretrained`` null, the default ones, whose input
    convention a randomly initialised network keeps.

    Raises:
        DmlbenchError: ``pretrained`` is not a member of the model's weights enum.
    """
    import torchvision

    enum = torchvision.models.get_model_weights(model)
    tag = "DEFAULT" if pretrained is None or pretrained in DEFAULT_WEIGHTS else pretrained
    if tag not in enum.__members__:
        raise DmlbenchError(
            f"model.pretrained: torchvision:{model} has no weights {pretrained!r}; its "
            f"weights, closest first: {_closest_first(tag, list(enum.__members__))}"
        )
    return enum[tag]


def _torchvision(model: str, pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    import torchvision

    if in_channels != 3:
        raise DmlbenchError(f"torchvision:{model} expects 3-channel images, got {in_channels}")
    weights = _torchvision_weights(model, pretrained)
    options = {"transform_input": True} if model in TRANSFORM_INPUT else {}
    try:
        net = torchvision.models.get_model(
            model, weights=weights if pretrained else None, **options
        )
    except Exception as err:
        if pretrained:
            hub = torch.hub.get_dir()
            raise DmlbenchError(
                f"pretrained weights {weights} for torchvision:{model} could not be fetched "
                f"({type(err).__name__}); download {weights.url} into {hub}/checkpoints/"
            ) from None
        raise
    preprocess = weights.transforms()  # the library's own preprocessing of these weights
    convention = InputConvention(
        f"torchvision:{model}.{weights.name}",
        mean=tuple(getattr(preprocess, "mean", IMAGENET.mean)),
        std=tuple(getattr(preprocess, "std", IMAGENET.std)),
    )
    net, dim = _strip_classifier(net)
    return NormalizedBackbone(net, convention), dim


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
