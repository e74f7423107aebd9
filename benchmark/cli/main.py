"""The ``dmlbench`` command line: the parser, and errors mapped to exit codes.

Errors the user can fix print one line (``error: <file>: <key>: <problem>``) and exit with
status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence

from dmlbench import __version__
from dmlbench.errors import DmlbenchError

# Subcommands that live in their own modules: each defines ``add_parser(subparsers)``.
COMMANDS = (
    "dmlbench.cli.run",
    "dmlbench.cli.report",
    "dmlbench.cli.list",
    "dmlbench.cli.validate",
    "dmlbench.cli.sweep",
    "dmlbench.cli.data",
    "dmlbench.cli.cache",
    "dmlbench.cli.search",
    "dmlbench.cli.check",
)


def build_parser() -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(
        prog="dmlbench",
        description="Deep metric learning methods under frozen protocols with equal budgets.",
    )
    parser.add_argument("--version", action="version", version=f"dmlbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for module in COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(
        level=logging.INFO if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from dmlbench.engine.checkpoint import TrainingInterrupted

    try:
        return int(args.func(args))
    except TrainingInterrupted as err:
        print(f"interrupted: {err}", file=sys.stderr)
        return 130
    except DmlbenchError as err:
        if args.debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished records are kept; run the same command to resume",
            file=sys.stderr,
        )
        return 130
