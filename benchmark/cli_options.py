"""Command-line options shared by ``run``, ``sweep`` and ``search``: the tuning budget and
where the search runs."""

from __future__ import annotations

import argparse
from typing import Any

from dmlbench.errors import DmlbenchError


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "tuning",
        "Each method is tuned with the protocol's budget (search.trials) on validation classes "
        "carved out of the training classes, then retrained for every seed.",
    )
    g.add_argument(
        "--trials",
        type=int,
        default=None,
        metavar="N",
        help="tuning budget per method instead of the protocol's (a derived protocol: "
        "own hash, own tables); 0 = the papers' defaults",
    )
    g.add_argument(
        "--no-search",
        action="store_true",
        help="use the papers' default hyper-parameters (same as --trials 0)",
    )
    g.add_argument(
        "--storage",
        default=None,
        metavar="URL",
        help="Optuna storage, e.g. postgresql://user@host/db (default: "
        "sqlite:///RESULTS_DIR/optuna.db); workers on other machines use the same URL",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="trial processes on this machine (default: 1)",
    )
    g.add_argument(
        "--heartbeat",
        type=int,
        default=30,
        metavar="SECONDS",
        help="worker heartbeat; a trial silent for 4 heartbeats is retried (default: 30)",
    )


def apply_budget(protocol: Any, args: argparse.Namespace) -> Any:
    """The protocol with the budget the command line asks for (a different hash if changed)."""
    trials = 0 if args.no_search else args.trials
    if trials is None or trials == protocol.search.trials:
        return protocol
    if trials < 0:
        raise DmlbenchError(f"--trials {trials}: must be >= 0")
    return protocol.with_overrides({"search.trials": trials}, name=protocol.name)


def search_options(args: argparse.Namespace) -> Any:
    from dmlbench.search import SearchOptions

    if args.workers < 1:
        raise DmlbenchError(f"--workers {args.workers}: must be >= 1")
    if args.heartbeat < 1:
        raise DmlbenchError(f"--heartbeat {args.heartbeat}: must be >= 1 second")
    return SearchOptions(
        storage=args.storage,
        workers=args.workers,
        heartbeat=args.heartbeat,
        plugins=list(getattr(args, "plugin", []) or []),
    )
