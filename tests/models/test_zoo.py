"""googlenet / resnet50 backbones: shapes, pooling, weight loading, no silent fallback."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest
import torch
import torchvision

from dmlbench.errors import DmlbenchError
from dmlbench.models import create_backbone, zoo


def test_resnet50_features_and_pooling() -> None:
    torch.manual_seed(0)
    net, dim = create_backbone("resnet50", None, 3)
    assert dim == 2048
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        maps = net.eval().trunk(net.norm(x))
        assert maps.shape == (2, 2048, 2, 2)
        assert torch.allclose(net(x), maps.mean(dim=(2, 3)), atol=1e-5)
    assert zoo.resnet50(None, 3, pooling="avgmax")[0].pool.kind == "avgmax"


def test_googlenet_loads_torchvision_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(2)
    reference = torchvision.models.googlenet(weights=None, aux_logits=True, init_weights=False)
    state = reference.state_dict()
    urls = []

    def fetch(weights: zoo.Weights, what: str) -> dict[str, torch.Tensor]:
        urls.append(weights.url)
        return state

    monkeypatch.setattr(zoo, "fetch_state_dict", fetch)
    net, dim = create_backbone("googlenet", "imagenet", 3)
    assert dim == 1024 and urls == [torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1.url]
    assert torch.equal(
        net.trunk.net.inception5b.branch1.conv.weight, state["inception5b.branch1.conv.weight"]
    )
    assert net.trunk.net.aux1 is None
    with torch.no_grad():
        assert net.eval()(torch.rand(1, 3, 32, 32)).shape == (1, 1024)


def test_fetch_failure_names_url_and_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.hub, "_hub_dir", str(tmp_path / "hub"))

    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    url = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url
    with pytest.raises(DmlbenchError) as err:
        create_backbone("resnet50", "imagenet", 3)
    assert url in str(err.value)
    assert str(tmp_path / "hub" / "checkpoints" / url.rsplit("/", 1)[-1]) in str(err.value)
