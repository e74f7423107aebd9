"""``dmlbench sweep``: run a protocol over several values of one key.

Each value makes a derived protocol, ``Protocol.with_overrides({key: value})`` named
``<protocol>@<key>=<value>``; it validates like any protocol and has its own hash, written
into every record, so a derived protocol's numbers are never mixed with the base protocol's.
Records go where ``dmlbench run`` puts them; the command then writes one table per derived
protocol and a plot of every metric against the swept value, one line per method
(``reports/sweep-<protocol>-<key>.png`` and ``.svg``). Kim et al.'s Fig. 5 (performance versus
embedding dimension, Kim et al. 2019) is::

    dmlbench sweep --protocol poses --over model.embedding_size=16,32,64,128 \\
        --method log-ratio,triplet-dense
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dmlbench.errors import DmlbenchError

EPILOG = """examples:
  dmlbench sweep --protocol poses --over model.embedding_size=16,32,64,128 \\
      --method log-ratio,triplet-dense
  dmlbench sweep --protocol glyphs-mini --over optim.lr=1e-4,1e-3 --method contrastive --seed 0
"""


def parse_over(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"model.embedding_size=16,32"`` → (key, [("16", 16), ("32", 32)]): text and value."""
    from dmlbench.report.plots import parse_value

    key, eq, rest = text.partition("=")
    tokens = [t.strip() for t in rest.split(",") if t.strip()]
    if not eq or not key.strip() or not tokens:
        raise DmlbenchError(f"--over {text!r}: expected KEY=VALUE1,VALUE2,...")
    if len(set(tokens)) != len(tokens):
        raise DmlbenchError(f"--over {text!r}: a value is repeated")
    return key.strip(), [(t, parse_value(t)) for t in tokens]


def sweep_protocols(protocol: Any, key: str, values: list[tuple[str, Any]]) -> list[Any]:
    """The derived protocols, validated (an unknown key or a bad value fails before any run)."""
    from dmlbench.report.plots import sweep_name

    return [
        protocol.with_overrides({key: value}, name=sweep_name(protocol.name, key, token))
        for token, value in values
    ]


def run_sweep(
    protocol: Any,
    key: str,
    values: list[tuple[str, Any]],
    methods: list[str],
    seeds: list[int],
    options: Any,
) -> list[Any]:
    """Run every derived protocol (``runner.run_protocol`` resumes) and return the records."""
    from dmlbench.runner import run_protocol

    records = []
    for derived in sweep_protocols(protocol, key, values):
        print(f"sweep: {derived.name} ({derived.short_hash})", file=sys.stderr)
        records += run_protocol(derived, methods, seeds, options)
    return records


def cmd_sweep(args: argparse.Namespace) -> int:
    from dmlbench.cli_options import apply_budget, resolve_methods, search_options
    from dmlbench.methods import load_plugins
    from dmlbench.protocol import load_protocol
    from dmlbench.report import write_reports
    from dmlbench.report.plots import sweep_points, write_sweep_plots
    from dmlbench.runner import RunOptions

    load_plugins(args.plugin)
    protocol = apply_budget(load_protocol(args.protocol), args)
    key, values = parse_over(args.over)
    methods = resolve_methods(protocol, args.method)
    seeds = args.seed if args.seed is not None else list(protocol.seeds)
    options = RunOptions(
        results_dir=Path(args.results_dir),
        data_root=args.data_root,
        device=args.device,
        threads=args.threads,
        max_steps=args.max_steps,
        force=args.force,
        progress=not args.no_progress,
        search=search_options(args),
    )
    sweep_protocols(protocol, key, values)  # fail fast on a bad key or value
    records = run_sweep(protocol, key, values, methods, seeds, options)
    reports = Path(args.reports_dir)
    for _, path, text in write_reports(records, reports):
        print(text)
        print(f"written: {path} (and .csv)")
    for path in write_sweep_plots(sweep_points(records), reports):
        print(f"written: {path} (and .svg)")
    return 0


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
    from dmlbench.cli_options import add_budget_options, add_common_options

    add_common_options(p, protocol_default=None)
    p.add_argument(
        "--over",
        required=True,
        metavar="KEY=V1,V2,...",
        help="dotted protocol key and its values, e.g. model.embedding_size=16,32",
    )
    add_budget_options(p)
    p.set_defaults(func=cmd_sweep)
