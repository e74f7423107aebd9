"""``dmlbench list``: registered methods, protocols, backbones and data sets."""

from __future__ import annotations

import argparse
from typing import Any

from dmlbench.errors import DmlbenchError, did_you_mean, name_matches


def check_some_match(kind: str, pattern: str, matched: list[str], known: list[str]) -> None:
    """A PATTERN that matches nothing is an error, not an empty table with exit 0: a mistyped
    name (``multisimilarity``) would otherwise read as "not a method of dmlbench".

    Raises:
        DmlbenchError: nothing matched; the closest known name is suggested.
    """
    if not matched:
        hint = did_you_mean(pattern, known)
        raise DmlbenchError(
            f"no {kind} matches '{pattern}'{hint}; `dmlbench list {kind}s` lists all"
        )


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from dmlbench.methods import METHODS, load_plugins
        from dmlbench.methods.pml import PREFIX, list_pml, loss_classes

        load_plugins(args.plugin)
        names = METHODS.list(args.pattern)
        refused: dict[str, str] = {}
        if args.pattern.casefold().startswith("pml:"):  # built on demand: listed from the library
            found = list_pml(args.pattern)
            refused = {n: why for n, why in found if why}
            names = [n for n, why in found if not why]
            known = [PREFIX + n for n in loss_classes()]
            check_some_match("method", args.pattern, [n for n, _ in found], known)
        else:
            check_some_match("method", args.pattern, names, METHODS.list())
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

        known = builtin_names()
        names = [n for n in known if name_matches(n, args.pattern)]
        check_some_match("protocol", args.pattern, names, known)
        for name in names:
            p = load_protocol(name)
            print(f"{name:16} v{p.version}  {p.short_hash}  {p.description}")
    elif args.what == "backbones":
        from dmlbench.models import BACKBONES

        names = BACKBONES.list(args.pattern)
        check_some_match("backbone", args.pattern, names, BACKBONES.list())
        for name in names:
            print(name)
        print("timm:<name>         any timm model (timm.list_models())")
        print("torchvision:<name>  any torchvision classification model")
    elif args.what == "trunks":
        from dmlbench.models.trunks import load_recipe, trunk_names

        names = [n for n in trunk_names() if name_matches(n, args.pattern)]
        check_some_match("trunk", args.pattern, names, trunk_names())
        for name in names:
            recipe = load_recipe(name)
            sha = (recipe.sha256 or "no weights yet")[:12]
            print(f"{name:16} {sha:12}  {recipe.description}")
    else:
        from dmlbench.data import DATASETS

        names = DATASETS.list(args.pattern)
        check_some_match("dataset", args.pattern, names, DATASETS.list())
        for name in names:
            print(f"{name:16} {DATASETS.get(name).description}")
    return 0


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 80


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_plugin_option

    lst = subparsers.add_parser(
        "list",
        help="list methods, protocols, backbones, trunks or data sets",
        description="List registered components; PATTERN is a shell-style "
        "pattern, matched regardless of case, e.g. dmlbench list methods '*Proxy*'.",
    )
    lst.add_argument("what", choices=["methods", "protocols", "backbones", "trunks", "datasets"])
    lst.add_argument("pattern", nargs="?", default="*", help="filter (default: *)")
    add_plugin_option(lst, help="import MODULE first (its methods are listed too)")
    lst.add_argument(
        "--sources",
        action="store_true",
        help="methods: also print where each default (and learning-rate multiplier) is from",
    )
    lst.set_defaults(func=cmd_list)
