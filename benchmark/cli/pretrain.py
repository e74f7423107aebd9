"""``dmlbench pretrain NAME``: make (or re-make and compare) a trunk the protocols start from."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_pretrain(args: argparse.Namespace) -> int:
    import yaml

    from dmlbench.engine.pretrain import pretrain, save_weights
    from dmlbench.models.trunks import load_recipe, recipe_path, weights_path
    from dmlbench.options import torch_threads

    recipe = load_recipe(args.name)
    print(f"pretraining {recipe.name} ({recipe.steps} steps, one thread)", file=sys.stderr)
    with torch_threads(1):  # the committed weights were made at one thread: the same bits
        made = pretrain(recipe, progress=not args.no_progress)
    print(
        f"{recipe.name}: {made.seconds:.0f} s, final loss {made.final_loss:.3f}, Recall@1 on "
        f"the source's test classes {100 * made.source_recall_at_1:.1f}"
    )
    if not args.write:
        from safetensors.torch import save

        from dmlbench.models.trunks import sha256_of

        sha = sha256_of(save(made.state))
        same = "the same bits as" if sha == recipe.sha256 else "NOT the same bits as"
        print(f"sha256 {sha}: {same} the committed weights ({recipe.sha256 or 'none yet'})")
        return 0 if sha == recipe.sha256 else 1
    sha = save_weights(made.state, weights_path(recipe.name))
    path = recipe_path(recipe.name)
    text = path.read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if not ln.startswith("sha256:")]
    path.write_text("\n".join([*lines, f"sha256: '{sha}'"]) + "\n", encoding="utf-8")
    yaml.safe_load(path.read_text(encoding="utf-8"))  # still one mapping
    print(f"written: {weights_path(recipe.name)} (sha256 {sha}) and its hash into {path.name}")
    return 0


ORDER = 105  # its place in dmlbench --help (cli.main)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pretrain",
        help="make a trunk the embedded protocols fine-tune from",
        description="Train the trunk NAME from its recipe (protocols/trunks/NAME.yaml) at one "
        "thread. Without --write, compare the result with the committed weights (exit 1 when "
        "the bits differ, e.g. on another CPU vendor); with --write, replace them and write "
        "their SHA-256 into the recipe (every protocol starting from it changes hash).",
    )
    p.add_argument("name", metavar="NAME", help="trunk name (dmlbench list trunks)")
    p.add_argument("--write", action="store_true", help="write the weights and their hash")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_pretrain)
