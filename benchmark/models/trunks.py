"""Trunks made here: the embedded protocols' backbones, pretrained by ``dmlbench pretrain``.

The papers never train a metric from scratch: they fine-tune an ImageNet network and report it,
unfine-tuned, as the baseline. ImageNet weights cannot be fetched for the CPU-sized backbones
(``small-cnn``, ``small-resnet``), so the starting point is made here, once, from a recipe
(``protocols/trunks/NAME.yaml``: source data set, backbone, steps, batch, learning rate, seed)
on images disjoint from every board's test classes, and its weights are committed beside the
recipe (``NAME.safetensors``, about 1 MB). A protocol names it as ``pretrained: trunk:NAME``.

The weights are what every fine-tuning starts from, so their SHA-256 is checked whenever they
load, and the recipe's hash and the weights' SHA-256 both enter the protocol hash
(:func:`identity`): new weights under an old name are another protocol. Rebuilding them with
``dmlbench pretrain NAME`` reproduces the same bits on the machine kind that made them (the
training is deterministic at one thread); on another CPU vendor it may not, which is why the
file is committed rather than rebuilt on first use.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import torch
import yaml
from pydantic import Field, ValidationError

from dmlbench.errors import DmlbenchError, did_you_mean, format_validation_error
from dmlbench.protocol import TRUNK_PREFIX as PREFIX
from dmlbench.protocol import DataSpec, Float, Int, StrictModel, builtin_dir

TRUNK_BACKBONES = ("small-cnn", "small-resnet")


class TrunkRecipe(StrictModel):
    """How a trunk is pretrained: normalised-softmax classification (Zhai & Wu, BMVC 2019)
    of the source's training classes, with random crops, channel shuffles and greyscale so
    that the trunk does not key on colour or position alone.

    Attributes:
        data: the source images (a registered data set; its training split is used, its test
            split only to report how well the trunk retrieves unseen classes).
        sha256: SHA-256 of the weights file; written by ``dmlbench pretrain NAME --write``.
    """

    name: str
    description: str = ""
    data: DataSpec
    backbone: Literal["small-cnn", "small-resnet"]
    steps: Int = Field(gt=0, le=1_000_000)
    batch_size: Int = Field(gt=1, le=4096)
    lr: Float = Field(gt=0.0)
    temperature: Float = Field(0.05, gt=0.0)
    pad: Int = Field(2, ge=0, le=64)
    seed: Int = Field(0, ge=0, le=2**31 - 1)
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @property
    def hash(self) -> str:
        """SHA-256 of what can move the weights (not the description or the weights' hash)."""
        content = self.model_dump(mode="json", exclude={"description", "sha256"})
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def trunk_dir() -> Path:
    return builtin_dir() / "trunks"


def trunk_names() -> list[str]:
    return sorted(p.stem for p in trunk_dir().glob("*.yaml"))


def trunk_name(pretrained: str | None) -> str | None:
    """The trunk a ``pretrained`` value names (``trunk:NAME``), or None for anything else."""
    if pretrained is not None and pretrained.startswith(PREFIX):
        return pretrained[len(PREFIX) :]
    return None


def recipe_path(name: str) -> Path:
    return trunk_dir() / f"{name}.yaml"


def weights_path(name: str) -> Path:
    return trunk_dir() / f"{name}.safetensors"


def load_recipe(name: str) -> TrunkRecipe:
    """The recipe of trunk ``name``; one line naming the file for anything wrong."""
    path = recipe_path(name)
    if not path.is_file():
        hint = did_you_mean(name, trunk_names())
        known = ", ".join(trunk_names()) or "none"
        raise DmlbenchError(f"unknown trunk '{name}'{hint} (no {path.name}); shipped: {known}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        recipe = TrunkRecipe.model_validate(raw)
    except yaml.YAMLError as err:
        raise DmlbenchError(f"{path}: not valid YAML ({err})") from None
    except ValidationError as err:
        raise DmlbenchError(f"{path}: {format_validation_error(err, TrunkRecipe)}") from None
    if recipe.name != name:
        raise DmlbenchError(f"{path}: name: is {recipe.name!r}, the file says {name!r}")
    return recipe


def sha256_of(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def file_sha256(path: Path) -> str:
    return sha256_of(path.read_bytes())


def identity(name: str) -> dict[str, Any]:
    """What the protocol hash holds for ``pretrained: trunk:NAME``: the recipe's hash and the
    weights' SHA-256 (as the recipe states it; :func:`load_state` checks the file)."""
    recipe = load_recipe(name)
    return {"trunk": name, "recipe": recipe.hash, "sha256": recipe.sha256}


def load_state(name: str) -> dict[str, torch.Tensor]:
    """The weights of trunk ``name`` (trained on RGB images), checked against the recipe.

    Raises:
        DmlbenchError: the trunk has no weights yet, or the file's SHA-256 is not the
            recipe's.
    """
    from safetensors.torch import load_file

    recipe = load_recipe(name)
    path = weights_path(name)
    if recipe.sha256 is None or not path.is_file():
        raise DmlbenchError(
            f"trunk '{name}' has no weights yet: run `dmlbench pretrain {name} --write` "
            f"(writes {path.name} and its sha256 into {recipe_path(name).name})"
        )
    if (actual := file_sha256(path)) != recipe.sha256:
        raise DmlbenchError(
            f"{path}: SHA-256 {actual[:12]}… is not the recipe's {recipe.sha256[:12]}…; "
            f"restore the file or rebuild it with `dmlbench pretrain {name} --write`"
        )
    return load_file(str(path))
