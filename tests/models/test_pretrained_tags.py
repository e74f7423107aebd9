"""``model.pretrained`` tags are honoured or refused, never hashed and then ignored.

A known tag reaches timm's factory as ``<model>.<tag>`` and torchvision's as that weights enum
member; an unknown one is one line, exit 2, naming the key, the tag and the tags there are,
closest first, before anything is built or fetched. The factories are monkeypatched so nothing
downloads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import timm
import torchvision
from torch import nn

from dmlbench.cli.main import main
from dmlbench.errors import DmlbenchError
from dmlbench.models import backbone_exists, backbones, check_weights, create_backbone

TINY = """\
name: glyphs-tiny
version: 1
data: {{dataset: glyphs, params: {{image_size: 16, num_classes: 8, instances_per_font: 1}}}}
model: {{backbone: '{backbone}', pretrained: {pretrained}, embedding_size: 8}}
batch: {{size: 16, samples_per_class: 4}}
optim: {{lr: 1.0e-3, epochs: 1}}
metrics: {{recall_at: [1, 2], nmi: false}}
search: {{trials: 0}}
seeds: [0]
methods: [contrastive]
"""


@pytest.fixture
def timm_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Calls of ``timm.create_model`` (name, pretrained); the network is built without weights."""
    calls: list[tuple[str, bool]] = []
    create = timm.create_model

    def fake(name: str, pretrained: bool = False, **kwargs: Any) -> nn.Module:
        calls.append((name, pretrained))
        return create(name, pretrained=False, **kwargs)

    monkeypatch.setattr(timm, "create_model", fake)
    monkeypatch.setattr(backbones, "_require_timm_weights", lambda name: None)
    return calls


@pytest.fixture
def torchvision_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``weights`` of each ``torchvision.models.get_model`` call; built without them."""
    calls: list[object] = []
    get_model = torchvision.models.get_model

    def fake(name: str, weights: object = None, **kwargs: Any) -> nn.Module:
        calls.append(weights)
        return get_model(name, weights=None, **kwargs)

    monkeypatch.setattr(torchvision.models, "get_model", fake)
    return calls


def test_timm_tag_reaches_the_factory(timm_calls: list[tuple[str, bool]]) -> None:
    net, _ = create_backbone("timm:resnet18d", "ra4_e3600_r224_in1k", 3)
    assert timm_calls == [("resnet18d.ra4_e3600_r224_in1k", True)]
    assert net.norm.mean.flatten().tolist() == pytest.approx([0.5] * 3)  # that tag's convention
    create_backbone("timm:resnet18d", "imagenet", 3)  # timm's default weights
    create_backbone("timm:resnet18d.ra2_in1k", "imagenet", 3)  # the tag the name carries
    create_backbone("timm:resnet18d.ra2_in1k", "ra2_in1k", 3)
    create_backbone("timm:resnet18d", None, 3)
    assert timm_calls[1:] == [
        ("resnet18d", True),
        ("resnet18d.ra2_in1k", True),
        ("resnet18d.ra2_in1k", True),
        ("resnet18d", False),
    ]


def test_timm_tag_refusals_come_before_the_factory(timm_calls: list[tuple[str, bool]]) -> None:
    with pytest.raises(DmlbenchError) as err:
        create_backbone("timm:resnet18", "in21k", 3)
    assert str(err.value).startswith(
        "model.pretrained: timm:resnet18 has no weights tagged 'in21k'"
    )
    listed = str(err.value).split("closest first: ")[1].split(", ")
    assert sorted(listed) == sorted(n.partition(".")[2] for n in timm.list_pretrained("resnet18.*"))
    with pytest.raises(DmlbenchError, match=r"closest first: a2_in1k, "):
        create_backbone("timm:resnet18", "a2_in1", 3)
    with pytest.raises(DmlbenchError, match=r"contradicts the tag of timm:resnet18\.a1_in1k"):
        create_backbone("timm:resnet18.a1_in1k", "a2_in1k", 3)
    assert timm_calls == []
    assert not backbone_exists("timm:resnet18.in21k")  # timm.is_model ignores the tag
    assert backbone_exists("timm:resnet18.a1_in1k")


def test_torchvision_tag_reaches_the_factory(torchvision_calls: list[object]) -> None:
    weights = torchvision.models.ResNet18_Weights
    create_backbone("torchvision:resnet18", "IMAGENET1K_V1", 3)
    create_backbone("torchvision:resnet18", "imagenet", 3)
    create_backbone("torchvision:resnet18", None, 3)
    assert torchvision_calls == [weights.IMAGENET1K_V1, weights.DEFAULT, None]


def test_torchvision_unknown_tag_is_refused(torchvision_calls: list[object]) -> None:
    with pytest.raises(DmlbenchError) as err:
        create_backbone("torchvision:resnet50", "imagenet1k_v2", 3)
    assert str(err.value) == (
        "model.pretrained: torchvision:resnet50 has no weights 'imagenet1k_v2'; its weights, "
        "closest first: IMAGENET1K_V2, IMAGENET1K_V1, DEFAULT"
    )
    assert torchvision_calls == []


def test_check_weights_builds_and_fetches_nothing(
    timm_calls: list[tuple[str, bool]], torchvision_calls: list[object]
) -> None:
    """What a protocol check can call: tags looked up in the libraries' lists only."""
    check_weights("timm:vit_tiny_patch16_224", "augreg_in21k")
    check_weights("torchvision:resnet50", "IMAGENET1K_V2")
    check_weights("bn-inception", "imagenet")  # a registered factory checks its own values
    check_weights("timm:no_such_model", "x")  # an unknown backbone is an error of its own
    with pytest.raises(DmlbenchError, match="closest first: augreg_in21k, "):
        check_weights("timm:vit_tiny_patch16_224", "augreg_in21")
    assert timm_calls == [] and torchvision_calls == []


@pytest.mark.parametrize(
    ("backbone", "pretrained", "fragments"),
    [
        ("timm:resnet18", "in21k", ["timm:resnet18", "'in21k'", "closest first: a1_in1k"]),
        ("torchvision:resnet50", "IMAGENET1K_V3", ["'IMAGENET1K_V3'", "IMAGENET1K_V1, "]),
    ],
)
def test_unknown_tag_through_the_cli_is_one_line_exit_2(
    backbone: str,
    pretrained: str,
    fragments: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    protocol = tmp_path / "tagged.yaml"
    protocol.write_text(TINY.format(backbone=backbone, pretrained=pretrained), encoding="utf-8")
    argv = ["run", "--protocol", str(protocol), "--max-steps", "1", "--no-progress"]
    assert main([*argv, "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("protocol ")]
    assert len(errors) == 1 and errors[0].startswith("error: "), err
    assert f"{protocol}: model.pretrained: " in errors[0]
    for fragment in fragments:
        assert fragment in errors[0]
    assert not list((tmp_path / "results").rglob("*.json"))  # failed before any run
    assert main(["validate", str(protocol)]) == 2  # validate refuses it too
    assert "model.pretrained: " in capsys.readouterr().err
