"""The data-pipeline benchmark runs end to end on a tiny fixture and prints its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.perf import data as perf


def test_runs_on_a_tiny_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--images",
        "12",
        "--width",
        "48",
        "--height",
        "40",
        "--resize",
        "36",
        "--crop",
        "32",
        "--batch-size",
        "4",
        "--workers",
        "0",
        "--epochs",
        "3",
        "--workdir",
        str(tmp_path),
    ]
    assert perf.main(args) == 0
    out = capsys.readouterr().out
    for line in (
        "torchvision ImageFolder + PIL",
        "dmlbench cached uint8",
        "speed-up",
        "one-time cache build",
    ):
        assert line in out
    assert list(tmp_path.iterdir()) == []  # the fixture is removed


def test_result_fields_are_consistent(tmp_path: Path) -> None:
    r = perf.run(
        images=8,
        width=40,
        height=30,
        resize=24,
        crop=16,
        batch_size=4,
        workers=0,
        epochs=1,
        workdir=tmp_path,
    )
    assert r["images"] == 8 and r["cached_images_per_s"] > 0 and r["imagefolder_images_per_s"] > 0
    assert r["speedup"] == pytest.approx(r["cached_images_per_s"] / r["imagefolder_images_per_s"])
    assert r["cache_build_images_per_s"] == pytest.approx(8 / r["cache_build_s"])
