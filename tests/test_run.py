"""The rows that need no learning, checked against computations of their own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.data import load_data
from dmlbench.options import RunOptions
from dmlbench.run import run_protocol


def _recall_at_1(x: np.ndarray, labels: np.ndarray) -> float:
    """Leave-one-out nearest neighbour by cosine similarity, ties to the lower index."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    np.fill_diagonal(sim, -np.inf)
    return float((labels[sim.argmax(axis=1)] == labels).mean())


def test_pixels_row_is_nearest_neighbours_on_the_test_images(
    tmp_path: Path, tiny_glyphs_protocol
) -> None:
    records = run_protocol(
        tiny_glyphs_protocol, [], [0], RunOptions(results_dir=tmp_path, progress=False)
    )
    assert sorted(r.method for r in records) == ["pixels", "untrained"]
    pixels = next(r for r in records if r.method == "pixels")
    test = load_data(tiny_glyphs_protocol).test
    images = np.stack([test.images[i].numpy().ravel() for i in range(len(test))])
    expected = _recall_at_1(images.astype(np.float64), np.asarray(test.labels))
    assert pixels.metrics["recall@1"] == pytest.approx(expected, abs=1e-9)
    assert pixels.hparams == {} and pixels.timings.steps == 0 and pixels.curve == []


def test_pretrained_row_is_the_trunks_features(
    tmp_path: Path, tiny_glyphs_protocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``pretrained: trunk:NAME`` the run gets a ``pretrained`` row: the trunk's pooled
    features of the test images, no head, no fine-tuning."""
    import torch

    from dmlbench.engine.pretrain import pretrain, save_weights
    from dmlbench.models import trunks
    from dmlbench.models.backbones import SmallCNN

    folder = tmp_path / "trunks"
    folder.mkdir()
    recipe = folder / "t.yaml"
    recipe.write_text(
        "name: t\ndata: {dataset: fractals, params: {image_size: 16, num_classes: 8, "
        "per_class: 2}}\nbackbone: small-cnn\nsteps: 2\nbatch_size: 8\nlr: 1.0e-3\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(trunks, "trunk_dir", lambda: folder)
    state = pretrain(trunks.load_recipe("t"), progress=False).state
    sha = save_weights(state, folder / "t.safetensors")
    recipe.write_text(recipe.read_text() + f"sha256: '{sha}'\n", encoding="utf-8")
    protocol = tiny_glyphs_protocol.with_overrides({"model.pretrained": "trunk:t"})
    records = run_protocol(protocol, [], [0], RunOptions(results_dir=tmp_path, progress=False))
    assert sorted(r.method for r in records) == ["pixels", "pretrained", "untrained"]
    row = next(r for r in records if r.method == "pretrained")
    net = SmallCNN(1)
    grey = dict(state, **{"features.0.weight": state["features.0.weight"].sum(1, keepdim=True)})
    net.load_state_dict(grey)
    net.eval()
    test = load_data(protocol).test
    with torch.no_grad():
        feats = net(torch.stack([test.images[i] for i in range(len(test))])).numpy()
    expected = _recall_at_1(feats.astype(np.float64), np.asarray(test.labels))
    assert row.metrics["recall@1"] == pytest.approx(expected, abs=1e-9)
    # the untrained row stays the random network, trunk or not
    random = run_protocol(
        tiny_glyphs_protocol, [], [0], RunOptions(results_dir=tmp_path / "r", progress=False)
    )
    untrained = [r.metrics for r in (*records, *random) if r.method == "untrained"]
    assert untrained[0] == untrained[1]
