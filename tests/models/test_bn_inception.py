"""BN-Inception: architecture, converted-weight loading, hash checks, no silent fallback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from dmlbench.errors import DmlbenchError
from dmlbench.models import bn_inception as bni
from dmlbench.models import build_model, create_backbone
from dmlbench.protocol import ModelSpec


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(torch.hub, "_hub_dir", str(tmp_path / "hub"))
    return tmp_path / "hub" / "checkpoints"


def test_architecture() -> None:
    net, dim = create_backbone("bn-inception", None, 3)
    assert dim == 1024
    trunk = net.trunk
    assert sum(p.numel() for p in trunk.parameters()) == 10_270_240
    keys = trunk.state_dict().keys()
    for key in (
        "conv1_7x7_s2.weight",
        "conv2_3x3_bn.running_var",
        "inception_3c_double_3x3_2.bias",
        "inception_5b_pool_proj_bn.weight",
        "inception_4e_3x3_bn.running_mean",
    ):
        assert key in keys
    assert not any("pool_proj" in k for k in keys if k.startswith(("inception_3c", "inception_4e")))
    shapes = bni.BNInception().to("meta")  # shapes only, no arithmetic
    for side in (224, 227):  # the Fehervari and the multi-similarity crops
        assert shapes(torch.empty(1, 3, side, side, device="meta")).shape == (1, 1024, 7, 7)
    with torch.no_grad():
        assert net.eval()(torch.rand(2, 3, 64, 64)).shape == (2, 1024)


def test_pooling_options() -> None:
    net, _ = bni.bn_inception(None, 3, pooling="avgmax")
    assert net.pool.kind == "avgmax"
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        maps = net.eval().trunk(net.norm(x))
        assert maps.shape == (2, 1024, 2, 2)
        assert torch.allclose(net.pool(maps), maps.mean(dim=(2, 3)) + maps.amax(dim=(2, 3)))
        assert torch.allclose(bni.GlobalPool("avg")(maps), maps.mean(dim=(2, 3)))
    with pytest.raises(DmlbenchError, match="unknown pooling"):
        bni.bn_inception(None, 3, pooling="gem")


def converted_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    """A state dict in the layout of the converted file: BN tensors (1, C), a last_linear."""
    torch.manual_seed(1)
    source = bni.BNInception().state_dict()
    converted = {
        k: (v.reshape(1, -1) if "_bn." in k else v)
        for k, v in source.items()
        if not k.endswith("num_batches_tracked")
    }
    converted["last_linear.weight"] = torch.zeros(1000, 1024)
    converted["last_linear.bias"] = torch.zeros(1000)
    torch.save(converted, path)
    return source


def named_by_hash(path: Path, prefix: str | None = None) -> Path:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    target = path.with_name(f"bn_inception-{prefix or digest[:9]}.pth")
    path.rename(target)
    return target


def test_loads_converted_weights_with_hash_check(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = converted_checkpoint(tmp_path / "w.pth")
    served = named_by_hash(tmp_path / "w.pth")
    monkeypatch.setattr(bni, "IMAGENET", bni.Weights(served.as_uri()))
    net, _ = create_backbone("bn-inception", "imagenet", 3)
    loaded = net.trunk.state_dict()
    for key in ("conv1_7x7_s2.weight", "inception_5b_pool_proj_bn.running_var"):
        assert torch.equal(loaded[key], source[key])
    assert (hub / served.name).is_file()  # cached where the error messages say
    digest = hashlib.sha256(served.read_bytes()).hexdigest()
    monkeypatch.setattr(bni, "IMAGENET", bni.Weights(served.as_uri(), sha256=digest))
    create_backbone("bn-inception", "imagenet", 3)  # the cached file passes the full check
    monkeypatch.setattr(bni, "IMAGENET", bni.Weights(served.as_uri(), sha256="0" * 64))
    with pytest.raises(DmlbenchError, match=f"{hub / served.name}: SHA-256 .* is not the expected"):
        create_backbone("bn-inception", "imagenet", 3)


def test_wrong_hash_prefix_is_an_error_not_random_weights(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted_checkpoint(tmp_path / "w.pth")
    served = named_by_hash(tmp_path / "w.pth", prefix="0123456789")
    monkeypatch.setattr(bni, "IMAGENET", bni.Weights(served.as_uri()))
    with pytest.raises(DmlbenchError) as err:
        create_backbone("bn-inception", "imagenet", 3)
    assert served.as_uri() in str(err.value) and str(hub / served.name) in str(err.value)
    assert not (hub / served.name).exists()


def test_unreachable_weights_name_url_and_file_to_place(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "offline" / "bn_inception-52deb4733.pth").as_uri()
    monkeypatch.setattr(bni, "IMAGENET", bni.Weights(url, bni.IMAGENET.sha256))
    spec = ModelSpec(backbone="bn-inception", pretrained="imagenet", embedding_size=8)
    with pytest.raises(DmlbenchError) as err:
        build_model(spec, 3)  # the whole model path raises: no fallback to random weights
    message = str(err.value)
    assert url in message and str(hub / "bn_inception-52deb4733.pth") in message


def test_real_weights_are_the_commonly_used_file() -> None:
    assert bni.IMAGENET.url.endswith("/bn_inception-52deb4733.pth")
    assert bni.IMAGENET.sha256 is not None and bni.IMAGENET.sha256.startswith("52deb4733")


def test_bad_arguments() -> None:
    with pytest.raises(DmlbenchError, match="no weights 'places365'"):
        create_backbone("bn-inception", "places365", 3)
    with pytest.raises(DmlbenchError, match="3-channel"):
        create_backbone("bn-inception", None, 1)


def test_frozen_batchnorm_through_the_model_spec() -> None:
    spec = ModelSpec(backbone="bn-inception", embedding_size=8, frozen_bn=True)
    model = build_model(spec, 3)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and all(not p.requires_grad for m in bns for p in m.parameters())
    model.train()
    assert not any(m.training for m in bns)
