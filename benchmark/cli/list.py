"""``dmlbench list``: registered methods, protocols, backbones and data sets."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from dmlbench.methods import METHODS, load_plugins
        from dmlbench.methods.pml import list_pml

        load_plugins(args.plugin)
        names = METHODS.list(args.pattern)
        refused: dict[str, str] = {}
        if args.pattern.startswith("pml:"):  # built on demand, so listed from the library
            found = list_pml(args.pattern)
            refused = {n: why for n, why in found if why}
            names = [n for n, why in found if not why]
        rows = []
        for name in names:
            cls = METHODS.get(name)
            mult = cls.defaults.get(cls.lr_mult_key) if cls.lr_mult_key else None
            shown = "—" if mult is None else f"{float(mult):g}"
            rows.append((name, cls.label_kind, shown, cls.paper, cls.defaults_source))
        # Widths from the cells themselves: a fixed width cut for "class" pushed every
        # "continuous" row (and a long pml: name) one column out of line.
        wide = max([len("name"), *(len(r[0]) for r in rows), *(len(n) for n in refused)])
        kind = max([len("labels"), *(len(r[1]) for r in rows)])
        mult_w = max([len("lr×"), *(len(r[2]) for r in rows)])
        indent = " " * (wide + 1 + kind + 1 + mult_w + 2)  # where the paper column starts
        head = f"{'name':{wide}} {'labels':{kind}} {'lr×':>{mult_w}}"
        print(f"{head}  paper (lr×: the loss parameters' multiplier)")
        for name, label_kind, shown, paper, source in rows:
            print(f"{name:{wide}} {label_kind:{kind}} {shown:>{mult_w}}  {paper}")
            if args.sources:
                print(f"{indent}defaults: {source}")
        for name, why in refused.items():
            print(f"{name:{wide}} refused: {why}")
        if args.pattern == "*":
            print("pml:<Loss>[+<Miner>]  any pytorch-metric-learning loss: list methods 'pml:*'")
    elif args.what == "protocols":
        from dmlbench.protocol import builtin_names, load_protocol

        for name in builtin_names():
            p = load_protocol(name)
            if Path(name).match(args.pattern):
                print(f"{name:16} v{p.version}  {p.short_hash}  {p.description}")
    elif args.what == "backbones":
        from dmlbench.models import BACKBONES

        for name in BACKBONES.list(args.pattern):
            print(name)
        print("timm:<name>         any timm model (timm.list_models())")
        print("torchvision:<name>  any torchvision classification model")
    else:
        from dmlbench.data import DATASETS

        for name in DATASETS.list(args.pattern):
            print(f"{name:16} {DATASETS.get(name).description}")
    return 0


def add_parser(subparsers: Any) -> None:
    lst = subparsers.add_parser(
        "list",
        help="list methods, protocols, backbones or data sets",
        description="List registered components; PATTERN is a shell-style "
        "pattern, e.g. dmlbench list methods '*proxy*'.",
    )
    lst.add_argument("what", choices=["methods", "protocols", "backbones", "datasets"])
    lst.add_argument("pattern", nargs="?", default="*", help="filter (default: *)")
    lst.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (its methods are listed too)",
    )
    lst.add_argument(
        "--sources",
        action="store_true",
        help="methods: also print where each default (and learning-rate multiplier) is from",
    )
    lst.set_defaults(func=cmd_list)
