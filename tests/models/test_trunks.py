"""Trunks made here: recipe, deterministic pretraining, checked weights, the protocol hash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dmlbench.engine.pretrain import pretrain, save_weights
from dmlbench.errors import DmlbenchError
from dmlbench.models import build_model, trunks
from dmlbench.protocol import load_protocol

RECIPE = """\
name: tiny
description: a test trunk
data: {dataset: glyphs, params: {image_size: 16, num_classes: 12, seed: 0}}
backbone: small-cnn
steps: 4
batch_size: 16
lr: 1.0e-3
"""


@pytest.fixture
def trunk_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "trunks"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(RECIPE, encoding="utf-8")
    monkeypatch.setattr(trunks, "trunk_dir", lambda: folder)
    return folder


def _made(folder: Path) -> str:
    recipe = trunks.load_recipe("tiny")
    with torch.random.fork_rng():
        state = pretrain(recipe, progress=False).state
    sha = save_weights(state, folder / "tiny.safetensors")
    path = folder / "tiny.yaml"
    path.write_text(path.read_text(encoding="utf-8") + f"sha256: '{sha}'\n", encoding="utf-8")
    return sha


def test_pretraining_is_deterministic(trunk_dir: Path) -> None:
    recipe = trunks.load_recipe("tiny")
    first, second = pretrain(recipe, progress=False), pretrain(recipe, progress=False)
    assert first.state.keys() == second.state.keys()
    assert all(torch.equal(first.state[k], second.state[k]) for k in first.state)
    assert 0.0 <= first.source_recall_at_1 <= 1.0
    other = pretrain(recipe.model_copy(update={"seed": 1}), progress=False)
    assert not torch.equal(other.state["features.0.weight"], first.state["features.0.weight"])


def test_a_protocol_starts_from_the_trunk_and_hashes_it(trunk_dir: Path) -> None:
    sha = _made(trunk_dir)
    base = load_protocol("glyphs")  # random weights (glyphs-mini starts from a shipped trunk)
    protocol = base.with_overrides({"model.pretrained": "trunk:tiny"})
    assert trunks.identity("tiny") == {
        "trunk": "tiny",
        "recipe": trunks.load_recipe("tiny").hash,
        "sha256": sha,
    }
    net = build_model(protocol.model, in_channels=1)
    saved = trunks.load_state("tiny")
    grey = saved["features.0.weight"].sum(dim=1, keepdim=True)
    assert torch.equal(net.backbone.state_dict()["features.0.weight"], grey)
    # the grey network is the RGB one on the grey image repeated: timm's in_chans=1
    rgb = build_model(protocol.model, in_channels=3)
    x = torch.rand(2, 1, 16, 16)
    net.eval(), rgb.eval()
    torch.testing.assert_close(net.backbone(x), rgb.backbone(x.expand(-1, 3, -1, -1)))
    assert protocol.hash != base.hash
    # other weights under the same name: another protocol
    before = protocol.hash
    recipe = trunk_dir / "tiny.yaml"
    recipe.write_text(recipe.read_text().replace(sha, "f" * 64), encoding="utf-8")
    assert protocol.hash != before


def test_weights_that_are_not_the_recipes_are_refused(trunk_dir: Path) -> None:
    _made(trunk_dir)
    weights = trunk_dir / "tiny.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1
    weights.write_bytes(bytes(blob))
    with pytest.raises(DmlbenchError, match=r"tiny.safetensors: SHA-256 .* not the recipe's"):
        trunks.load_state("tiny")


def test_a_trunk_without_weights_names_the_command(trunk_dir: Path) -> None:
    with pytest.raises(DmlbenchError, match=r"dmlbench pretrain tiny --write"):
        trunks.load_state("tiny")


def test_unknown_trunks_and_foreign_weights_are_one_line(trunk_dir: Path) -> None:
    from dmlbench.errors import ProtocolError

    base = load_protocol("glyphs")
    with pytest.raises(ProtocolError, match=r"unknown trunk 'tinny' \(did you mean 'tiny'"):
        base.with_overrides({"model.pretrained": "trunk:tinny"})
    with pytest.raises(ProtocolError, match=r"small-cnn' has no weights 'imagenet'"):
        base.with_overrides({"model.pretrained": "imagenet"})
    with pytest.raises(ProtocolError, match=r"trunk 'tiny' is a small-cnn, not a small-resnet"):
        load_protocol("poses").with_overrides({"model.pretrained": "trunk:tiny"})


def test_recipe_errors_name_the_file(trunk_dir: Path) -> None:
    (trunk_dir / "tiny.yaml").write_text(RECIPE + "stepz: 3\n", encoding="utf-8")
    with pytest.raises(DmlbenchError, match=r"tiny.yaml: .*stepz"):
        trunks.load_recipe("tiny")


def test_the_shipped_trunks_load_with_their_hash() -> None:
    for name in trunks.trunk_names():
        recipe = trunks.load_recipe(name)
        assert recipe.sha256 is not None, f"{name}: no weights committed"
        state = trunks.load_state(name)
        assert all(np.isfinite(v.numpy()).all() for v in state.values())
