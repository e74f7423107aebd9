"""The counted work of a real protocol: data counts × budget by hand, FLOPs against a
published figure, the docs table kept equal to the code, and the CLI showing it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.engine.cost import MEASURED, backbone_gflop, protocol_work, work_table
from dmlbench.protocol import ModelSpec, builtin_names, load_protocol

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocols.md"


def test_cub200_work_is_the_budget_times_the_published_counts() -> None:
    w = protocol_work(load_protocol("cub200"))
    assert w is not None
    # CUB-200-2011: 5,864 training and 5,924 test images; batch 120; 60 epochs; 30 trials ×
    # 4 folds (each fold holds out a quarter of the classes); seeds 0-2; 12 methods.
    steps = 5864 // 120
    assert (w.steps_per_epoch, w.search_trainings, w.final_runs) == (steps, 120, 3)
    per_training = steps * 120 * 60
    assert w.trained_images == 12 * per_training * (120 * 0.75 + 3)
    assert w.embedded_images == 12 * (120 * 60 * round(0.25 * 5864) + 3 * 5924)
    hours = w.hours("NVIDIA H200", "bf16")
    assert hours == pytest.approx(
        w.trained_images / MEASURED["NVIDIA H200"][("bn-inception", "bf16")] / 3600
    )
    assert w.hours("a CPU", "fp32") is None  # never hours from an unmeasured device


def test_a_synthetic_data_set_has_no_published_size() -> None:
    assert protocol_work(load_protocol("glyphs-mini")) is None


def test_counted_flops_match_torchvisions_published_figure() -> None:
    """torchvision's ResNet-50 card: 4.089 G multiply-adds per 224² image; the counter counts
    two FLOPs per multiply-add, and the 512-d head adds 2 × 2048 × 512."""
    from torchvision.models import ResNet50_Weights

    spec = ModelSpec(backbone="resnet50", pretrained=None, embedding_size=512)
    both, forward = backbone_gflop(spec, 224)
    published = ResNet50_Weights.IMAGENET1K_V1.meta["_ops"]
    assert forward == pytest.approx(2 * published + 2 * 2048 * 512 / 1e9, rel=0.01)
    assert 2.5 * forward < both < 3.5 * forward  # backward ≈ twice the forward


def test_docs_table_is_the_counted_one() -> None:
    assert work_table(builtin_names()) in DOCS.read_text(encoding="utf-8")


def test_run_help_for_a_protocol_shows_its_budget_and_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--protocol", "cub200", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "protocol cub200 v" in out
    assert "budget: 30 trials × 4 folds per method" in out and "seeds [0, 1, 2]" in out
    assert re.search(r"work of cub200 .* \d+ h on an NVIDIA H200 \(bf16\)", out)


def test_run_prints_its_work_before_it_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DMLBENCH_DATA", raising=False)
    assert main(["run", "--protocol", "cub200", "--method", "margin", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    work = err.index("work of cub200 (upper bound")
    assert "1 method × (120 search trainings + 1 final run)" in err
    assert work < err.index("error:")  # printed before the data are even looked for
