"""``dmlbench validate``: protocol files checked, and the shipped ones against their lock."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_validate(args: argparse.Namespace) -> int:
    from dmlbench.methods import load_plugins
    from dmlbench.protocol import load_protocol
    from dmlbench.protocols import check_lock, write_lock

    load_plugins(args.plugin)  # a protocol may name a plugin's method, as `run` accepts it
    if args.lock:
        print(f"written: {write_lock()}")
        return 0
    if not args.files:
        problems = check_lock()
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        if not problems:
            print("shipped protocols: all valid and locked")
        return 2 if problems else 0
    for f in args.files:
        p = load_protocol(f)
        print(f"{f}: ok — {p.name} v{p.version}, hash {p.hash}")
    return 0


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 90


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_plugin_option

    val = subparsers.add_parser(
        "validate",
        help="check protocol files",
        description="Validate protocol FILEs (unknown keys, wrong types, missing "
        "fields, unknown methods/backbones/data sets). Without FILE, check the "
        "shipped protocols against protocols.lock.",
    )
    val.add_argument("files", nargs="*", metavar="FILE", help="protocol YAML files")
    val.add_argument(
        "--lock",
        action="store_true",
        help="rewrite protocols.lock (refuses content changes without a version bump)",
    )
    add_plugin_option(
        val,
        help="import MODULE first, so that a protocol naming its methods validates (repeatable)",
    )
    val.set_defaults(func=cmd_validate)
