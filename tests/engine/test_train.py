"""The training loop: determinism, non-finite losses, the epoch hook."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from dmlbench.data import load_data
from dmlbench.engine.train import train
from dmlbench.errors import NonFiniteLossError
from dmlbench.methods import create_method
from dmlbench.options import RunOptions
from dmlbench.run import run_protocol


def test_same_seed_same_weights_and_metrics(tiny_glyphs_protocol, tmp_path: Path) -> None:
    opts = dict(max_steps=6, progress=False, force=True)
    a = run_protocol(
        tiny_glyphs_protocol,
        ["multi-similarity"],
        [0],
        RunOptions(results_dir=tmp_path / "a", **opts),
    )
    b = run_protocol(
        tiny_glyphs_protocol,
        ["multi-similarity"],
        [0],
        RunOptions(results_dir=tmp_path / "b", **opts),
    )
    assert [r.metrics for r in a] == [r.metrics for r in b]
    assert a[1].curve == b[1].curve
    c = run_protocol(
        tiny_glyphs_protocol,
        ["multi-similarity"],
        [1],
        RunOptions(results_dir=tmp_path / "c", **opts),
    )
    assert c[1].metrics != a[1].metrics


class ExplodingLoss(nn.Module):
    def forward(self, emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return emb.sum() * float("nan")


def test_non_finite_loss_stops_with_the_step(
    tiny_glyphs_protocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = load_data(tiny_glyphs_protocol)
    method = create_method("contrastive", None, data.train.num_classes, 64)
    monkeypatch.setattr(method, "build_loss", lambda: ExplodingLoss())
    with pytest.raises(NonFiniteLossError, match="non-finite loss at step 0"):
        train(tiny_glyphs_protocol, method, data.train, seed=0, progress=False)


def test_epoch_hook_adds_to_the_curve(tiny_glyphs_protocol) -> None:
    protocol = tiny_glyphs_protocol.with_overrides({"optim.epochs": 2})
    data = load_data(protocol)
    method = create_method("contrastive", None, data.train.num_classes, 64)
    calls = []

    def hook(epoch: int, model: nn.Module) -> dict[str, float]:
        calls.append(epoch)
        assert model.training  # the trainer switches to eval itself when it embeds
        return {"val_recall@1": 0.5 + epoch}

    result = train(protocol, method, data.train, seed=0, on_epoch_end=hook, progress=False)
    assert calls == [0, 1]
    assert [p["val_recall@1"] for p in result.curve] == [0.5, 1.5]
    assert result.steps == 2 * (len(data.train) // protocol.batch.size)


def _moved(protocol, steps: int = 3) -> dict[str, float]:
    """The largest change of the backbone's and of the head's parameters after ``steps``."""
    from dmlbench.engine.train import image_channels, init_model

    data = load_data(protocol)
    method = create_method("contrastive", None, data.train.num_classes, 64)
    start = init_model(protocol, method, image_channels(data.train), 0).state_dict()
    result = train(protocol, method, data.train, seed=0, max_steps=steps, progress=False)
    moved = {"backbone": 0.0, "head": 0.0}
    for name, p in result.model.named_parameters():
        part = "backbone" if name.startswith("backbone.") else "head"
        moved[part] = max(moved[part], float((p.detach() - start[name]).abs().max()))
    return moved


def test_backbone_lr_drives_the_backbone_only(tiny_glyphs_protocol) -> None:
    one_rate = _moved(tiny_glyphs_protocol)
    assert one_rate["backbone"] > 1e-4 and one_rate["head"] > 1e-4
    slow = _moved(tiny_glyphs_protocol.with_overrides({"optim.backbone_lr": 1e-9}))
    assert slow["backbone"] < 1e-7  # Adam's steps are about the rate in size
    assert slow["head"] > 1e-4


def test_backbone_lr_groups_and_their_schedule(tiny_glyphs_protocol) -> None:
    from dmlbench.engine.train import make_optimizer, make_scheduler, network_groups
    from dmlbench.models.head import EmbeddingNet

    protocol = tiny_glyphs_protocol.with_overrides({"optim.backbone_lr": 1e-4, "optim.lr": 1e-2})
    net = EmbeddingNet(nn.Sequential(nn.Flatten(), nn.Linear(4, 3)), 3, 2)
    groups = network_groups(protocol, net)
    assert [len(g["params"]) for g in groups] == [2, 2]  # backbone's weight, bias; head's
    assert groups[1]["params"][0] is net.head.weight
    opt = make_optimizer(protocol, groups)
    assert [g["lr"] for g in opt.param_groups] == [1e-4, 1e-2]
    sched = make_scheduler(protocol, opt)
    opt.step()
    sched.step()  # one epoch of one: the cosine reaches 0 for both rates alike
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.0, 0.0])
    assert len(network_groups(tiny_glyphs_protocol, net)) == 1


def test_backbone_lr_needs_a_backbone(tiny_glyphs_protocol) -> None:
    from dmlbench.engine.train import network_groups
    from dmlbench.errors import DmlbenchError

    protocol = tiny_glyphs_protocol.with_overrides({"optim.backbone_lr": 1e-4})
    with pytest.raises(DmlbenchError, match=r"optim.backbone_lr: .* no module named 'backbone'"):
        network_groups(protocol, nn.Linear(2, 2))
