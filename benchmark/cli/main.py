"""The ``dmlbench`` command line: the parser, logging, and errors mapped to exit codes.

Errors the user can fix print one line (``error: <file>: <key>: <problem>``) and exit with
status 2; ``--debug`` shows the traceback instead. Global options decide what reaches stderr
(``-q``: warnings and errors; default: also progress lines; ``-v``: also info messages) and
``--log-file`` keeps progress lines and warnings with timestamps, e.g. for a run left overnight.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from dmlbench import __version__
from dmlbench.errors import DmlbenchError


def command_modules() -> list[ModuleType]:
    """The modules of this package that define a command, in ``dmlbench --help``'s order.

    Commands are found the way methods, data sets and backbones are: every module of
    :mod:`dmlbench.cli` whose name does not start with ``_`` is imported, and one that defines
    ``add_parser(subparsers)`` is a command (``main`` and ``options`` define none), so a new
    command is its module. Each says its place in the help with ``ORDER`` (the order a study
    meets them: run, search, sweep, evaluate, embed, report, check, then the housekeeping),
    which a folder scan cannot know.
    """
    import dmlbench.cli as package

    modules = [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]
    commands = [m for m in modules if hasattr(m, "add_parser")]
    return sorted(commands, key=lambda m: (m.ORDER, m.__name__))


def build_parser() -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(
        prog="dmlbench",
        description="Deep metric learning methods under frozen protocols with equal budgets.",
    )
    parser.add_argument("--version", action="version", version=f"dmlbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", help="only warnings and errors on stderr"
    )
    loud.add_argument("-v", "--verbose", action="store_true", help="also info messages")
    parser.add_argument(
        "--log-file",
        default=None,
        metavar="PATH",
        help="append every progress line and warning, with timestamps, to PATH",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands = command_modules()
    for module in commands:
        module.add_parser(sub)
    _add_track(sub, commands)
    return parser


def _add_track(sub: argparse._SubParsersAction, commands: list[ModuleType]) -> None:
    """``--track`` on the commands that train (``TRAINS = True`` in their module, which is
    named as its command: :func:`command_name`), from the one shared declaration."""
    from dmlbench.cli.options import add_track_option

    for module in commands:
        if getattr(module, "TRAINS", False):
            add_track_option(sub.choices[command_name(module)])


def command_name(module: ModuleType) -> str:
    """The command a module defines: its name, ``_`` written ``-`` (``search_images``)."""
    return module.__name__.rpartition(".")[2].replace("_", "-")


def _setup_logging(args: argparse.Namespace) -> None:
    """stderr threshold from -q/-v (``--debug`` also shows info, as it always did)."""
    from dmlbench.engine.progress import PROGRESS, configure_logging

    level = PROGRESS
    if args.quiet:
        level = logging.WARNING
    elif args.verbose or args.debug:
        level = logging.INFO
    try:
        configure_logging(level, args.log_file)
    except OSError as err:
        raise DmlbenchError(f"--log-file {args.log_file}: cannot write ({err.strerror})") from None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """stdout's reader stopped early (``dmlbench run --help | head``): end quietly with the
    status of a process that SIGPIPE ended, as ``cat`` does, instead of a traceback. What is
    still buffered goes to /dev/null, or the interpreter fails again flushing it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no file descriptor (redirected in-process)
        pass
    return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from dmlbench.cli.options import check_flags
    from dmlbench.engine.checkpoint import TrainingInterrupted
    from dmlbench.engine.tracking import activated, open_tracker

    try:
        check_flags(args)
        _setup_logging(args)
        with activated(open_tracker(getattr(args, "track", None))):
            return int(args.func(args))
    except TrainingInterrupted as err:
        return _fail(f"interrupted: {err}", 130)
    except DmlbenchError as err:
        if args.debug:
            raise
        return _fail(f"error: {err}", 2)
    except KeyboardInterrupt:
        return _fail("interrupted: finished records are kept; run the same command to resume", 130)


def _fail(text: str, status: int) -> int:
    """The last line on stderr, and in the log file (an unattended run's log says how it ended)."""
    from dmlbench.engine.progress import note_in_log_file

    print(text, file=sys.stderr)
    note_in_log_file(text)
    return status
