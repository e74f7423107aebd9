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
