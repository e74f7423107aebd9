"""``dmlbench embed``: embed images with the network a final run kept.

``--images test`` / ``train`` re-embeds that split of the record's protocol (training images
through the test pipeline, without augmentation); a folder of .jpg/.png files is embedded with
the protocol's test pipeline and the file names go into the output. The weights are checked
against the SHA-256 in the record before use.

A split's file also says which split it embeds, in which order, and which model made it
(:func:`dmlbench.engine.external.order_arrays`, :func:`describe_kept`), so ``dmlbench evaluate``
scores it as it is: the test split's file of a final run gives that run's metrics again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EPILOG_EMBED = """examples:
  dmlbench embed --record results/glyphs-mini/HASH/contrastive-seed0-final.json \\
      --images test --out test.npz          # the test split again, ready for dmlbench evaluate
  dmlbench embed --record R.json --images my_images/ --out mine.npz   # embeddings, files
"""
SPLITS = ("test", "train")


def cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np

    from dmlbench.atomic import atomic_savez
    from dmlbench.engine.artifacts import split_arrays
    from dmlbench.engine.external import order_arrays
    from dmlbench.engine.inference import build_network, folder_split, kept_split, open_kept
    from dmlbench.engine.train import embed, resolve_device
    from dmlbench.errors import DmlbenchError
    from dmlbench.methods import load_plugins

    out = Path(args.out)
    if out.suffix != ".npz":
        raise DmlbenchError(f"--out {out}: must end in .npz")
    load_plugins(args.plugin)
    device = resolve_device(args.device)
    kept = open_kept(Path(args.record))
    model = build_network(kept).to(device).eval()  # weights first: a bad file fails fast
    arrays: dict[str, Any]
    if args.images in SPLITS:
        split = kept_split(kept, args.images, args.data_root)
        arrays = split_arrays(embed(model, split, device, args.batch_size), split)
        record = kept.record
        arrays |= order_arrays(split, record.data_fingerprint, args.images, kept.protocol.name)
        arrays |= describe_kept(record)
    else:
        split, names = folder_split(kept, Path(args.images))
        arrays = {"embeddings": embed(model, split, device, args.batch_size)}
        arrays["files"] = np.asarray(names, dtype=str)
    atomic_savez(out, **arrays)
    n, d = arrays["embeddings"].shape
    print(f"written: {out} ({n} embeddings of {d} dimensions)", file=sys.stderr)
    return 0


def describe_kept(record: Any) -> dict[str, Any]:
    """What ``dmlbench evaluate`` records of the model by default: the run that trained it."""
    from dmlbench.engine.external import model_arrays

    p = record.protocol
    return model_arrays(record.method, p.name, p.hash, record.seed)


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 50


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_plugin_option

    p = subparsers.add_parser(
        "embed",
        help="embed images with the network a final run kept",
        description="Load the weights a final run kept (checked against the SHA-256 in its "
        "record), rebuild its network from the protocol it ran under, and embed a split of "
        "that protocol or a folder of image files into an .npz file (embeddings, and labels "
        "or file names).",
        epilog=EPILOG_EMBED,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--record", required=True, help="a final record (.json) with kept files")
    p.add_argument(
        "--images",
        required=True,
        metavar="test|train|FOLDER",
        help="a split of the record's protocol (training images without augmentation), or "
        "a folder of .jpg/.png files (embedded with the protocol's test pipeline)",
    )
    p.add_argument("--out", required=True, help="output .npz file (written atomically)")
    p.add_argument("--data-root", default=None, help="data root, overriding the protocol's")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1 or auto")
    p.add_argument("--batch-size", type=int, default=256, help="images per forward pass")
    add_plugin_option(
        p, help="import MODULE to register the record's method when it is a plugin (repeatable)"
    )
    p.set_defaults(func=cmd_embed)
