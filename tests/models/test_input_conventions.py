"""Every backbone family's network sees the inputs its weights expect.

The data pipeline gives every backbone RGB in [0, 1]; each test feeds one fixed image through
it and compares the tensor that reaches the network's first layer (a forward pre-hook that
stops the forward pass there) with what the weights' own library makes of the same image:
``pretrainedmodels``' ``TransformImage`` steps for BN-Inception, the torchvision weights'
``transforms()`` for googlenet, resnet50 and ``torchvision:``, timm's ``create_transform`` for
``timm:``. Resizing and cropping are left out on both sides: they are the protocol's.
Nothing is downloaded: networks are built without weights (the convention is the backbone's,
with or without them).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest
import timm
import torch
import torchvision
from PIL import Image
from timm.data import create_transform, resolve_data_config
from torch import nn
from torchvision.transforms import functional as TF

from dmlbench.data.transforms import build_pipeline
from dmlbench.errors import DmlbenchError
from dmlbench.models import create_backbone
from dmlbench.models.normalization import CAFFE_BGR, IMAGENET, InputNormalization
from dmlbench.protocol import TransformSpec

SIZE = 224  # ViTs with a fixed input size check it before their first layer


class Reached(Exception):
    """Raised by the hook: the first layer's input is all a test needs."""


def first_input(model: nn.Module, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The tensor ``layer`` receives when ``model`` runs on ``x`` (the forward pass stops
    there, so large networks cost nothing)."""
    seen: list[torch.Tensor] = []

    def hook(_: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        seen.append(args[0].detach().clone())
        raise Reached

    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad(), pytest.raises(Reached):
            model.eval()(x)
    finally:
        handle.remove()
    return seen[0]


@pytest.fixture(scope="module")
def image() -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8), "RGB")


@pytest.fixture(scope="module")
def batch(image: Image.Image) -> torch.Tensor:
    """The image as the data pipeline hands it to every backbone: RGB in [0, 1]."""
    uint8 = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)
    return build_pipeline(TransformSpec())(uint8).unsqueeze(0)


def test_bn_inception_sees_caffe_bgr_0_255_minus_mean(
    image: Image.Image, batch: torch.Tensor
) -> None:
    # pretrainedmodels' bninception settings: input_space BGR, input_range [0, 255],
    # mean [104, 117, 128], std [1, 1, 1]; TransformImage: ToTensor, ToSpaceBGR, ToRange255,
    # Normalize.
    reference = TF.to_tensor(image)[[2, 1, 0]] * 255
    reference = TF.normalize(reference, [104.0, 117.0, 128.0], [1.0, 1.0, 1.0]).unsqueeze(0)
    net, _ = create_backbone("bn-inception", None, 3)
    seen = first_input(net, net.trunk.conv1_7x7_s2, batch)
    assert torch.allclose(seen, reference, atol=1e-4)


def test_resnet50_sees_its_weights_normalisation(batch: torch.Tensor, image: Image.Image) -> None:
    preprocess = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.transforms()
    reference = TF.normalize(TF.to_tensor(image), preprocess.mean, preprocess.std).unsqueeze(0)
    net, _ = create_backbone("resnet50", None, 3)
    assert torch.allclose(first_input(net, net.trunk[0], batch), reference, atol=1e-6)


def test_googlenet_sees_what_torchvision_feeds_its_ported_weights(
    batch: torch.Tensor, image: Image.Image
) -> None:
    """torchvision's GoogLeNet as it loads IMAGENET1K_V1 (transform_input on), fed that
    weights' preprocessing: its first convolution gets what ours gets."""
    weights = torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1
    preprocess = weights.transforms()
    normalised = TF.normalize(TF.to_tensor(image), preprocess.mean, preprocess.std).unsqueeze(0)
    theirs = torchvision.models.googlenet(
        weights=None, aux_logits=True, transform_input=True, init_weights=False
    )
    reference = first_input(theirs, theirs.conv1, normalised)
    net, _ = create_backbone("googlenet", None, 3)
    assert torch.allclose(first_input(net, net.trunk.net.conv1, batch), reference, atol=1e-5)


@pytest.mark.parametrize(
    "model",
    [
        "resnet18",  # ImageNet mean/std
        "vit_tiny_patch16_224",  # augreg: mean 0.5, std 0.5
        "convnext_atto",
        "resnet18d.ra4_e3600_r224_in1k",  # a tag whose mean/std differ from the default tag's
    ],
)
def test_timm_network_sees_timms_own_preprocessing(
    model: str, batch: torch.Tensor, image: Image.Image
) -> None:
    reference_net = timm.create_model(model, pretrained=False)
    transform = create_transform(**resolve_data_config({}, model=reference_net))
    steps = [t for t in transform.transforms if type(t).__name__ in {"MaybeToTensor", "Normalize"}]
    assert len(steps) == 2, transform  # timm's preprocessing, minus resizing and cropping
    reference: Image.Image | torch.Tensor = image
    for step in steps:
        reference = step(reference)
    assert isinstance(reference, torch.Tensor)
    net, _ = create_backbone(f"timm:{model}", None, 3)
    pretrained_cfg = cast(dict[str, Any], reference_net.pretrained_cfg)  # set by create_model
    first = net.net.get_submodule(pretrained_cfg["first_conv"])
    assert torch.allclose(first_input(net, first, batch), reference.unsqueeze(0), atol=1e-6)


def test_timm_conventions_differ_where_the_weights_do() -> None:
    """The cases above are not all ImageNet's: a ViT and one resnet18d tag use 0.5/0.5."""
    means = {
        name: create_backbone(f"timm:{name}", None, 3)[0].norm.mean.flatten().tolist()
        for name in ("resnet18", "vit_tiny_patch16_224", "resnet18d.ra4_e3600_r224_in1k")
    }
    assert means["resnet18"] == pytest.approx(IMAGENET.mean)
    assert means["vit_tiny_patch16_224"] == pytest.approx([0.5] * 3)
    assert means["resnet18d.ra4_e3600_r224_in1k"] == pytest.approx([0.5] * 3)


def test_torchvision_network_sees_its_weights_normalisation(
    batch: torch.Tensor, image: Image.Image
) -> None:
    preprocess = torchvision.models.ResNet18_Weights.DEFAULT.transforms()
    reference = TF.normalize(TF.to_tensor(image), preprocess.mean, preprocess.std).unsqueeze(0)
    net, dim = create_backbone("torchvision:resnet18", None, 3)
    assert dim == 512
    assert torch.allclose(first_input(net, net.net.conv1, batch), reference, atol=1e-6)


def test_torchvision_convention_is_the_named_weights(
    batch: torch.Tensor, image: Image.Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VGG-16's IMAGENET1K_FEATURES expect 0-255 minus a mean (std 1/255), unlike its default
    weights: the tag, not the architecture, decides. (A small network stands in for VGG-16:
    only the weights enum matters here.)"""
    weights = torchvision.models.VGG16_Weights.IMAGENET1K_FEATURES
    monkeypatch.setattr(
        torchvision.models, "get_model", lambda name, **kw: torchvision.models.resnet18()
    )
    net, _ = create_backbone("torchvision:vgg16", None, 3)
    assert net.norm.mean.flatten().tolist() == pytest.approx(IMAGENET.mean)
    net, _ = create_backbone("torchvision:vgg16", "IMAGENET1K_FEATURES", 3)
    preprocess = weights.transforms()
    reference = TF.normalize(TF.to_tensor(image), preprocess.mean, preprocess.std).unsqueeze(0)
    assert torch.allclose(first_input(net, net.net.conv1, batch), reference, atol=1e-3)
    assert reference.abs().max() > 100  # the 0-255 range, not [0, 1]


def test_torchvision_architecture_does_not_depend_on_loading_weights() -> None:
    """GoogLeNet's ported weights need ``transform_input``, which torchvision sets only when it
    loads them: set without weights too, so a network rebuilt to load kept weights computes
    what the trained one did."""
    net, _ = create_backbone("torchvision:googlenet", None, 3)
    assert net.net.transform_input


def test_kept_weights_bring_their_convention() -> None:
    """A network rebuilt without pretrained weights (to load kept ones) starts from the
    default tag's convention; loading the state of one trained from another tag restores
    that tag's mean and std."""
    trained, _ = create_backbone("timm:resnet18d.ra4_e3600_r224_in1k", None, 3)
    rebuilt, _ = create_backbone("timm:resnet18d", None, 3)
    assert rebuilt.norm.mean.flatten().tolist() == pytest.approx(IMAGENET.mean)
    rebuilt.load_state_dict(trained.state_dict(), strict=True)
    assert rebuilt.norm.mean.flatten().tolist() == pytest.approx([0.5] * 3)


def test_one_channel_images_get_the_channel_averages() -> None:
    net, _ = create_backbone("timm:resnet18", None, 1)
    assert net.norm.mean.flatten().tolist() == pytest.approx([sum(IMAGENET.mean) / 3])
    assert net.norm.std.flatten().tolist() == pytest.approx([sum(IMAGENET.std) / 3])
    with pytest.raises(DmlbenchError, match="3-channel images, got 2 channels"):
        IMAGENET.for_channels(2)


def test_normalization_module() -> None:
    rgb = torch.tensor([0.2, 0.4, 0.6]).view(1, 3, 1, 1)
    bgr = InputNormalization(CAFFE_BGR)(rgb).view(3)
    expected = torch.tensor([0.6 * 255 - 104, 0.4 * 255 - 117, 0.2 * 255 - 128])
    assert torch.allclose(bgr, expected, atol=1e-4)
    imagenet = InputNormalization(IMAGENET)(rgb).view(3)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    assert torch.allclose(imagenet, (torch.tensor([0.2, 0.4, 0.6]) - mean) / std)
    assert InputNormalization(IMAGENET).state_dict() == {}  # converted checkpoints keep keys
    assert set(InputNormalization(IMAGENET, persistent=True).state_dict()) == {"mean", "std"}
