"""``dmlbench search-images``: the nearest neighbours of new images under a kept model.

Not ``dmlbench search`` (the hyper-parameter search): this embeds a folder of images with the
network a final run kept and prints each image's k nearest items of the run's test split (with
their class labels) or of a gallery folder (with their files), through
:func:`dmlbench.engine.neighbours.load_index`.
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Any

EPILOG = """examples:
  dmlbench search-images --record results/glyphs-mini@defaults/HASH/contrastive-seed0-final.json \\
      --images my_letters -k 3                      # neighbours among the run's test split
  dmlbench search-images --record R.json --images new/ --gallery catalogue/ -k 5 --csv out.csv
"""
COLUMNS = ("query", "rank", "index", "distance", "label", "path")


def cmd_search_images(args: argparse.Namespace) -> int:
    from dmlbench.engine.neighbours import load_index
    from dmlbench.engine.train import resolve_device
    from dmlbench.errors import DmlbenchError
    from dmlbench.methods import load_plugins

    if args.k < 1:
        raise DmlbenchError(f"-k {args.k}: must be at least 1")
    load_plugins(args.plugin)
    index = load_index(args.record, args.gallery, resolve_device(args.device), args.batch_size)
    results = index.search(args.images, min(args.k, len(index)))
    rows = [
        (r.query, rank, n.index, f"{n.distance:.6f}", n.label, n.path)
        for r in results
        for rank, n in enumerate(r.neighbours, start=1)
    ]
    shown = [c for c in COLUMNS if c not in ({"path"} if args.gallery is None else {"label"})]
    out = open(args.csv, "w", newline="", encoding="utf-8") if args.csv else sys.stdout  # noqa: SIM115
    try:
        writer = csv.writer(out, delimiter="," if args.csv else "\t", lineterminator="\n")
        writer.writerow(shown)
        for row in rows:
            writer.writerow([v for c, v in zip(COLUMNS, row, strict=True) if c in shown])
    finally:
        if args.csv:
            out.close()
            print(f"written: {args.csv} ({len(rows)} neighbours)", file=sys.stderr)
    return 0


ORDER = 55  # its place in dmlbench --help (cli.main)


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_plugin_option

    p = subparsers.add_parser(
        "search-images",
        help="nearest neighbours of new images under the network a final run kept",
        description="Embed a folder of images with the network a final run kept (weights "
        "checked against the SHA-256 in its record) and list each image's k nearest items "
        "of the run's test split (its kept embeddings, with class labels) or of a gallery "
        "folder, by the evaluation's exact k-NN. (`dmlbench search` is the hyper-parameter "
        "search.)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--record", required=True, help="a final record (.json) with kept files")
    p.add_argument("--images", required=True, help="a folder of .jpg/.png query images")
    p.add_argument(
        "--gallery", default=None, help="a folder of images to search (default: the test split)"
    )
    p.add_argument("-k", type=int, default=5, help="neighbours per image (default 5)")
    p.add_argument("--csv", default=None, help="write the neighbours to this CSV file")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1 or auto")
    p.add_argument("--batch-size", type=int, default=256, help="images per forward pass")
    add_plugin_option(
        p, help="import MODULE to register the record's method when it is a plugin (repeatable)"
    )
    p.set_defaults(func=cmd_search_images)
