"""Command-line options shared by ``run``, ``sweep`` and ``search``: what to run, where, and
the tuning budget — declared once so the three commands cannot drift apart; and the range of
every command's integer flags, checked once for all of them (:func:`check_flags`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.errors import DmlbenchError
from dmlbench.protocol import MAX_BATCH_SIZE, MAX_SEED, MAX_STEPS, MAX_TRIALS

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

MAX_THREADS = 4096  # torch threads, and dmlbench check's --jobs: beyond any machine's cores
MAX_PROCESSES = 1024  # --workers, --loader-workers
# Every integer flag of every command, by argparse ``dest``: its lowest and highest value.
# Checked in one place (check_flags, before any command starts) rather than by argparse, whose
# errors print the usage as well: a bad number is one line naming the flag and its range.
INT_FLAGS: dict[str, tuple[int, int]] = {
    "seed": (0, MAX_SEED),
    "threads": (1, MAX_THREADS),
    "max_steps": (1, MAX_STEPS),
    "loader_workers": (0, MAX_PROCESSES),
    "trials": (0, MAX_TRIALS),
    "workers": (1, MAX_PROCESSES),
    "heartbeat": (1, 86_400),  # seconds: a day
    "batch_size": (1, MAX_BATCH_SIZE),  # embed
    "jobs": (0, MAX_THREADS),  # check (0: the CPUs)
}
# Comma-separated flags that an empty value (``--seed ''``, ``--seed ,``) would turn into
# "nothing to run", which would otherwise exit 0 having run nothing.
LIST_FLAGS = ("seed", "method")


def check_flags(args: argparse.Namespace) -> None:
    """Every integer flag within its range, every list flag non-empty: one line naming the
    flag, before the command reads or writes anything.

    Raises:
        DmlbenchError: the first flag out of range or empty.
    """
    for dest in LIST_FLAGS:
        if getattr(args, dest, None) == []:
            raise DmlbenchError(f"{flag(dest)}: empty; expected comma-separated values")
    for dest, (lowest, highest) in INT_FLAGS.items():
        value = getattr(args, dest, None)
        for number in value if isinstance(value, list) else [value]:
            if number is not None and not lowest <= number <= highest:
                raise DmlbenchError(f"{flag(dest)} {number}: must be in [{lowest}, {highest}]")


def flag(dest: str) -> str:
    """The flag as typed (``max_steps`` -> ``--max-steps``)."""
    return "--" + dest.replace("_", "-")


def reports_folder(args: argparse.Namespace) -> Path:
    """``--reports-dir``, checked before any work: the tables are written last, and a folder
    they cannot go to (a file, read-only) must not be found out after hours of training.

    Raises:
        DmlbenchError: the folder is a file or cannot be written (one line naming it).
    """
    from dmlbench.records import folder_problem

    folder = Path(args.reports_dir)
    if problem := folder_problem(folder, "--reports-dir"):
        raise DmlbenchError(f"{problem}; the tables are written there")
    return folder


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in csv_list(text)]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from err


def add_common_options(
    parser: argparse.ArgumentParser,
    *,
    protocol_default: str | None = "glyphs-mini",
    seeds: bool = True,
    reports: bool = True,
    force: bool = True,
) -> None:
    """--protocol --method [--seed] --results-dir [--reports-dir] --data-root --device
    --max-steps [--force] --plugin --no-progress."""
    if protocol_default is None:
        parser.add_argument("--protocol", required=True, help="shipped protocol name or YAML file")
    else:
        parser.add_argument(
            "--protocol",
            default=protocol_default,
            help=f"shipped protocol name or YAML file (default: {protocol_default})",
        )
    parser.add_argument(
        "--method",
        type=csv_list,
        default=None,
        help="comma-separated methods, or 'all' (default: the protocol's list)",
    )
    if seeds:
        parser.add_argument(
            "--seed",
            type=csv_ints,
            default=None,
            help=f"comma-separated seeds, 0 to {MAX_SEED} (default: the protocol's seeds)",
        )
    parser.add_argument("--results-dir", default="results", help="records (default: results)")
    if reports:
        parser.add_argument("--reports-dir", default="reports", help="tables (default: reports)")
    parser.add_argument("--data-root", default=None, help="data root, overriding the protocol's")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto (default)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads of every training run and search trial, whatever --workers is "
        "(recorded; numbers can differ in the last bits between thread counts; the committed "
        f"leaderboard uses 1) (1 to {MAX_THREADS}; default: torch's, the usable CPUs)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help=f"stop training after N steps, 1 to {MAX_STEPS} (smoke tests; marked in the records)",
    )
    if force:
        parser.add_argument("--force", action="store_true", help="recompute existing records")
    add_plugin_option(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def add_plugin_option(
    parser: argparse.ArgumentParser,
    help: str = "import MODULE to register extra methods (repeatable)",
) -> None:
    """``--plugin MODULE`` (repeatable), one spelling for every command that names methods;
    the command passes ``args.plugin`` to :func:`dmlbench.methods.load_plugins` before it
    resolves a method name, so a plugin's method is known wherever a built-in one is."""
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE", help=help)


def resolve_methods(protocol: Protocol, names: list[str] | None) -> list[str]:
    """``--method``: the protocol's list by default, ``all`` = every registered method of the
    protocol's label kind, else the names given (unknown names fail with "did you mean")."""
    from dmlbench.data import DATASETS
    from dmlbench.methods import METHODS

    if names is None:
        methods = list(protocol.methods)
    elif names == ["all"]:
        kind = DATASETS.get(protocol.data.dataset).label_kind
        methods = [m for m in METHODS.list() if METHODS.get(m).label_kind == kind]
    else:
        methods = list(names)
    if not methods:
        raise DmlbenchError(f"protocol {protocol.name} lists no methods; pass --method")
    for name in methods:
        METHODS.get(name)
    return methods


def check_run_args(args: argparse.Namespace, methods: list[str]) -> None:
    """The device and ``--hparam`` names and values, before any data is read (the numbers
    were checked before the command started: :func:`check_flags`)."""
    import yaml

    from dmlbench.errors import did_you_mean
    from dmlbench.methods import METHODS

    if getattr(args, "device", None) is not None:
        from dmlbench.engine.train import resolve_device

        resolve_device(args.device)
    for item in getattr(args, "hparam", None) or []:
        key, eq, _ = item.partition("=")
        method, dot, name = key.partition(".")
        if not eq or not dot:
            raise DmlbenchError(f"--hparam {item!r}: expected METHOD.NAME=VALUE")
        if method not in methods:
            hint = did_you_mean(method, methods)
            raise DmlbenchError(f"--hparam {item}: method '{method}' is not being run{hint}")
        allowed = sorted({*METHODS.get(method).defaults, "samples_per_class"})
        if name not in allowed:
            hint = did_you_mean(name, allowed)
            raise DmlbenchError(
                f"--hparam {item}: unknown hyper-parameter '{name}' of {method}{hint} "
                f"(it has: {', '.join(allowed)})"
            )
        problem = METHODS.get(method).hparam_problem(name, yaml.safe_load(item.partition("=")[2]))
        if problem:
            raise DmlbenchError(f"--hparam {item}: {problem}")


def add_budget_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """The tuning-budget flags of ``run``, ``sweep`` and ``search``.

    Args:
        parser: the subcommand's parser.
        defaults: offer ``--no-search`` and ``--trials 0`` (the papers' defaults). ``search``
            passes False: it only runs search trials, so a zero budget could only fail there.
    """
    g = parser.add_argument_group(
        "tuning",
        "Each method is tuned with the protocol's budget (search.trials) on validation classes "
        "carved out of the training classes, then retrained for every seed.",
    )
    low, zero = (0, "; 0 = the papers' defaults") if defaults else (1, "")
    g.add_argument(
        "--trials",
        type=int,
        default=None,
        metavar="N",
        help="tuning budget per method instead of the protocol's (a derived protocol: "
        f"own hash, own tables), {low} to {MAX_TRIALS}{zero}",
    )
    if defaults:
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


def apply_budget(protocol: Protocol, args: argparse.Namespace) -> Protocol:
    """The protocol with the budget the command line asks for (a different hash if changed)."""
    trials = 0 if getattr(args, "no_search", False) else args.trials
    if trials is None or trials == protocol.search.trials:
        return protocol
    return protocol.with_trials(trials)


def search_options(args: argparse.Namespace) -> Any:
    from dmlbench.options import SearchOptions

    return SearchOptions(
        storage=args.storage,
        workers=args.workers,
        heartbeat=args.heartbeat,
        plugins=list(getattr(args, "plugin", []) or []),
    )


def add_track_option(parser: argparse.ArgumentParser) -> None:
    """``--track BACKEND:WHERE``: experiment tracking for ``run``, ``search`` and ``sweep``
    (TensorBoard, MLflow or Weights & Biases).

    Declared once here so the three commands accept the same spelling; ``dmlbench``'s main
    opens the tracker around the command (:mod:`dmlbench.engine.tracking`).
    """
    parser.add_argument(
        "--track",
        default=None,
        metavar="BACKEND:WHERE",
        help="log hyper-parameters, per-epoch loss and validation scores of search trials and "
        "final runs, and final metrics, one tracked run per record: tensorboard:DIR (event "
        'files, pip install -e ".[track]"), mlflow:URI (a folder holds an SQLite store, or '
        'sqlite:///FILE or a server http(s)://HOST; ".[mlflow]") or wandb:PROJECT '
        '(WANDB_MODE=offline writes runs for wandb sync; ".[wandb]")',
    )


def run_options(args: argparse.Namespace, **extra: Any) -> Any:
    """The ``RunOptions`` of a command that trains (``run``, ``sweep``), from the shared
    flags; ``extra`` adds what only that command has (hand-set hyper-parameters, …)."""
    from dmlbench.options import RunOptions

    return RunOptions(
        results_dir=Path(args.results_dir),
        data_root=args.data_root,
        device=args.device,
        threads=args.threads,
        max_steps=args.max_steps,
        force=args.force,
        progress=not args.no_progress,
        search=search_options(args),
        **extra,
    )
