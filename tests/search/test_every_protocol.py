"""Search works on every shipped protocol: one tiny trial of each through ``tune()``.

Real-data protocols run on fixtures written in their exact on-disk layouts (CUB, Cars196, SOP,
In-shop, the MPII thin-slicing bundle); the embedded ones on shrunk generator parameters. What
a CPU test cannot afford is overridden (small CNN, 32-pixel crops, two steps); everything else,
validation carving and scoring included, is the protocol's own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dmlbench.data import load_data
from dmlbench.options import RunOptions
from dmlbench.protocol import builtin_dir, builtin_names, load_protocol
from dmlbench.search import tune
from tests.data import test_mpii
from tests.data.fixtures import make_cars_mat, make_cub, make_inshop, make_sop, small_images

FIXTURES: dict[str, Callable[..., Path]] = {
    "cub200": make_cub,
    "cars196": make_cars_mat,
    "sop": make_sop,
    "inshop": make_inshop,
}
GENERATED: dict[str, dict[str, Any]] = {
    "glyphs": {"data.params.num_classes": 40},
    "poses": {"data.params.train_poses": 8, "data.params.test_poses": 4},
}


def make_mpii(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundle with 60 training images: a validation fold of 15 leaves 44 neighbours."""
    monkeypatch.setattr(test_mpii, "N_TRAIN", 60)
    monkeypatch.setattr(test_mpii, "N_TEST", 20)
    test_mpii.make_bundle(root)
    return root


def tiny(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str | None]:
    """The shipped protocol with CPU-sized overrides, and the data root of its fixture."""
    protocol = load_protocol(name)
    base = name.split("-")[0]
    continuous = protocol.metrics.ndcg_at != []
    overrides: dict[str, Any] = {
        "optim.epochs": 1,
        "optim.steps_per_epoch": None,
        "search.trials": 1,
        "model.backbone": "small-resnet" if continuous else "small-cnn",
        "model.pretrained": None,
    }
    if continuous:
        overrides |= {"batch.size": 20, "metrics.ndcg_at": [1, 5], "metrics.label_distance_at": [1]}
    else:
        overrides |= {"batch.size": 8, "batch.samples_per_class": 2, "metrics.recall_at": [1, 2]}
    root: Path | None = None
    if base in FIXTURES:
        root = FIXTURES[base](tmp_path / "data", train=8, test=3, per_class=4)
    elif name == "mpii-pose":
        root = make_mpii(tmp_path / "data", monkeypatch)
        overrides["data.params.num_queries"] = 3
    else:  # generated (shrunk) or rendered from installed packages (emoji, icons: as shipped)
        overrides |= GENERATED.get(base, {})
    derived = protocol.with_overrides(overrides)
    if root is not None:
        derived = small_images(derived)
    return derived, (str(root) if root is not None else None)


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("name", builtin_names())
def test_one_tiny_trial_of_every_shipped_protocol(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol, root = tiny(name, tmp_path, monkeypatch)
    data = load_data(protocol, root)
    run = RunOptions(results_dir=tmp_path / "results", max_steps=2, progress=False)
    method = protocol.methods[0]
    selection = tune(protocol, method, data.train, data.fingerprint, run)
    assert selection.hparams
    trials = list((tmp_path / "results").rglob(f"{method}-trial*-search-trial*.json"))
    assert len(trials) == 1, f"{name}: {trials}"


@pytest.mark.slow
@pytest.mark.heavy  # the every-protocol sweep's CLI case
def test_mpii_pose_run_with_search_completes_on_the_bundle_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dmlbench run --protocol mpii-pose --trials 2 --max-steps 3 --backbone-override
    small-cnn` on the bundle layout. The protocol file includes mpii-pose and shrinks only what
    the fixture cannot hold (its 1,919 queries, 288-pixel images, nDCG@100, batches of 150)."""
    root = make_mpii(tmp_path / "mpii", monkeypatch)
    protocol = tmp_path / "mpii-fixture.yaml"
    protocol.write_text(
        f"include: {builtin_dir() / 'mpii-pose.yaml'}\n"
        "name: mpii-fixture\n"
        "data: {params: {num_queries: 3}}\n"
        "images: {train: {resize: 36, random_crop: 32}, test: {resize: 36, center_crop: 32}}\n"
        "metrics: {ndcg_at: [1, 5, 10], label_distance_at: [1, 5]}\n"
        "batch: {size: 20}\n"
    )
    results = tmp_path / "results"
    cmd = [
        sys.executable, "-m", "dmlbench", "run", "--protocol", str(protocol),
        "--data-root", str(root), "--trials", "2", "--max-steps", "3",
        "--backbone-override", "small-cnn", "--seed", "0", "--no-progress",
        "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    for method in ("log-ratio", "triplet-dense", "triplet-binary"):
        assert len(list(results.rglob(f"{method}-trial*-search-trial*.json"))) == 2, method
        assert len(list(results.rglob(f"{method}-seed0-final*.json"))) == 1, method
