"""Two training steps and a full evaluation on every real-data fixture, through the runner.

The shipped protocols (cub200, cars196, sop, inshop and their -ms512 variants) are used as
they are, except for what a CPU test cannot afford, passed as overrides that the record keeps:
the small CNN instead of BN-Inception, 32-pixel crops, batches of 4 classes × 2 images.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dmlbench.options import RunOptions
from dmlbench.protocol import load_protocol
from dmlbench.run import run_protocol
from tests.data.fixtures import (
    make_cars_csv,
    make_cars_mat,
    make_cub,
    make_inshop,
    make_sop,
    small_images,
)

FIXTURES: dict[str, Callable[..., Path]] = {
    "cub200": make_cub,
    "cars196": make_cars_mat,
    "sop": make_sop,
    "inshop": make_inshop,
}


def cpu_protocol(name: str):
    overrides = {
        "model.backbone": "small-cnn",
        "model.pretrained": None,
        "batch.size": 8,
        "batch.samples_per_class": 2,
        "metrics.recall_at": [1, 2],  # the fixtures' galleries hold a handful of images
        "search.trials": 0,
    }
    return small_images(load_protocol(name).with_overrides(overrides))


@pytest.mark.parametrize("name,make", [*FIXTURES.items(), ("cars196-ms512", make_cars_csv)])
def test_two_steps_and_evaluation(name: str, make: Callable[..., Path], tmp_path: Path) -> None:
    root = make(tmp_path / "data", train=4, test=3, per_class=4)
    protocol = cpu_protocol(name)
    options = RunOptions(
        results_dir=tmp_path / "results",
        data_root=str(root),
        max_steps=2,
        progress=False,
        overrides={"backbone": "small-cnn"},
    )
    records = run_protocol(protocol, ["contrastive"], [0], options)
    assert [r.method for r in records] == ["pixels", "untrained", "contrastive"]
    trained = records[-1]
    assert trained.timings.steps == 2
    assert trained.overrides == {"backbone": "small-cnn", "max_steps": 2}
    assert not trained.leaderboard_eligible
    assert 0.0 <= trained.metrics["recall@1"] <= 1.0 and "nmi" in trained.metrics
    if name.startswith("inshop"):
        assert trained.metrics["queries"] == 3 * 2  # 3 test items × 2 query images
    else:
        assert trained.metrics["queries"] == 3 * 4
    assert trained.data_fingerprint == records[0].data_fingerprint != ""


def test_ms512_variant_trains_with_its_own_crops(tmp_path: Path) -> None:
    root = make_cub(tmp_path / "data", train=4, test=2, per_class=4)
    protocol = cpu_protocol("cub200-ms512")
    assert protocol.images.train.random_resized_crop == 32 and protocol.model.embedding_size == 512
    records = run_protocol(
        protocol,
        ["multi-similarity"],
        [0],
        RunOptions(
            results_dir=tmp_path / "r",
            data_root=str(root),
            max_steps=2,
            progress=False,
            overrides={"backbone": "small-cnn"},
        ),
    )
    assert records[-1].timings.steps == 2 and "recall@1" in records[-1].metrics
