"""``dmlbench sweep``: run a protocol over several values of one key (:mod:`dmlbench.run`)."""

from __future__ import annotations

import argparse
from typing import Any

EPILOG = """examples:
  dmlbench sweep --protocol poses --over model.embedding_size=16,32,64,128 \\
      --method log-ratio,triplet-dense
  dmlbench sweep --protocol glyphs-mini --over optim.lr=1e-4,1e-3 --method contrastive --seed 0
"""


def cmd_sweep(args: argparse.Namespace) -> int:
    from dmlbench.cli.options import apply_budget, reports_folder, resolve_methods, run_options
    from dmlbench.methods import load_plugins
    from dmlbench.protocol import load_protocol
    from dmlbench.report import write_reports
    from dmlbench.report.plots import sweep_points, write_sweep_plots
    from dmlbench.run import parse_over, run_sweep, sweep_protocols

    load_plugins(args.plugin)
    protocol = apply_budget(load_protocol(args.protocol), args)
    key, values = parse_over(args.over)
    methods = resolve_methods(protocol, args.method)
    seeds = args.seed if args.seed is not None else list(protocol.seeds)
    options = run_options(args)
    reports = reports_folder(args)
    sweep_protocols(protocol, key, values)  # fail fast on a bad key or value
    records = run_sweep(protocol, key, values, methods, seeds, options)
    for _, path, text in write_reports(records, reports):
        print(text)
        print(f"written: {path} (and .csv)")
    for path in write_sweep_plots(sweep_points(records), reports):
        print(f"written: {path} (and .svg)")
    return 0


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
TRAINS = True  # it trains, so it takes --track (cli.main)
ORDER = 30


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="run a protocol over several values of one key and plot the result",
        description="Derive one protocol per value of KEY (named PROTOCOL@KEY=VALUE, with its "
        "own hash), run the methods under each, write the tables and a plot of every metric "
        "against the value.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from dmlbench.cli.options import add_budget_options, add_common_options

    add_common_options(p, protocol_default=None)
    p.add_argument(
        "--over",
        required=True,
        metavar="KEY=V1,V2,...",
        help="dotted protocol key and its values, e.g. model.embedding_size=16,32",
    )
    add_budget_options(p)
    p.set_defaults(func=cmd_sweep)
