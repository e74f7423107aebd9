"""``dmlbench search``: join or inspect a tuning study without running the final runs.

``dmlbench run`` tunes and then retrains; this command is for the other machines of a
distributed search (``dmlbench search --protocol P --method M --storage postgresql://…`` on
each of them) and for looking at a study (``--status``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.errors import DmlbenchError

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

EPILOG = """examples:
  dmlbench search --protocol glyphs-mini --method contrastive --trials 8 --workers 2
  dmlbench search --protocol glyphs-mini --method contrastive --storage postgresql://u@db/optuna
  dmlbench search --protocol glyphs-mini --method contrastive,multi-similarity --status
  dmlbench search --protocol glyphs-mini --method contrastive --study 1

A protocol with search.studies: T has T independent studies per method (the same budget,
their own sampler seeds); this command runs them all, one after the other, or only --study K.
"""


def cmd_search(args: argparse.Namespace) -> int:
    from dmlbench.cli.options import apply_budget, resolve_methods, search_options
    from dmlbench.methods import load_plugins
    from dmlbench.options import RunOptions
    from dmlbench.protocol import load_protocol

    load_plugins(args.plugin)
    protocol = apply_budget(load_protocol(args.protocol), args)
    if protocol.search.trials == 0:
        raise DmlbenchError(f"protocol {protocol.name} has no tuning budget (search.trials: 0)")
    methods = resolve_methods(protocol, args.method)
    indices = _studies(protocol, args.study)
    overrides: dict[str, Any] = {} if args.max_steps is None else {"max_steps": args.max_steps}
    run = RunOptions(
        results_dir=Path(args.results_dir),
        data_root=args.data_root,
        device=args.device,
        threads=args.threads,
        max_steps=args.max_steps,
        progress=not args.no_progress,
        overrides=overrides,
        search=search_options(args),
    )
    if args.status:
        return _status(protocol, methods, run, indices)
    from dmlbench.data import load_data
    from dmlbench.search import tune

    data = load_data(protocol, run.data_root)
    for name in methods:
        for index in indices:
            sel = tune(protocol, name, data.train, data.fingerprint, run, index)
            which = f" (study {index})" if protocol.search.studies > 1 else ""
            print(
                f"{name}{which}: best trial {sel.trial} of {sel.trials}, {sel.metric} "
                f"{sel.value:.4f}, epochs {sel.epochs}, {sel.hparams}"
            )
    return 0


def _studies(protocol: Protocol, study: int | None) -> list[int]:
    """The study indices to run or show: ``--study K``, else all ``search.studies``."""
    total = protocol.search.studies
    if study is None:
        return list(range(total))
    if not 0 <= study < total:
        raise DmlbenchError(
            f"--study {study}: protocol {protocol.name} has search.studies: {total} "
            f"(studies 0 to {total - 1})"
        )
    return [study]


def _status(protocol: Protocol, methods: list[str], run: Any, indices: list[int]) -> int:
    import optuna

    from dmlbench.search.storage import open_storage, quiet_optuna, storage_url
    from dmlbench.search.study import count_trials, study_name

    quiet_optuna()
    missing = _missing_database(run.search.storage, run.results_dir)
    if missing is not None:  # a query creates nothing: opening would write an empty database
        print(f"no study: {missing} does not exist (`dmlbench search` or `dmlbench run` makes it)")
        return 0
    url = storage_url(run.search, run.results_dir)
    storage = open_storage(url, run.search)
    known = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    print(f"protocol {protocol.name} ({protocol.short_hash}), budget {protocol.search.trials}")
    for name, index in ((m, i) for m in methods for i in indices):
        study = study_name(protocol, name, run.overrides, index)
        label = f"{name} (study {index})" if protocol.search.studies > 1 else name
        if study not in known:
            print(f"{label:22} not started")
            continue
        s = optuna.load_study(study_name=study, storage=storage)
        states: dict[str, int] = {}
        for t in s.trials:
            states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
        counts = count_trials(s)
        done = [t for t in s.trials if t.value is not None and t.state.name == "COMPLETE"]
        best = max(done, key=lambda t: t.value or 0.0) if done else None
        tail = f"best {best.value:.4f} (trial {best.number})" if best else "no complete trial"
        detail = ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
        print(f"{label:22} {counts.finished}/{protocol.search.trials} finished ({detail}); {tail}")
    return 0


def _missing_database(storage: str | None, results_dir: Path) -> Path | None:
    """The SQLite file a status query would read, when it does not exist (else ``None``).

    Opening a storage creates it (the default ``RESULTS_DIR/optuna.db`` and its folder, or the
    file of a ``sqlite:///`` URL), which a question about a study must not do. A server URL
    (PostgreSQL) is left to the query, which creates no file.
    """
    if storage is None:
        path = Path(results_dir) / "optuna.db"
    elif storage.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        database = make_url(storage).database
        if not database or database == ":memory:":
            return None
        path = Path(database)
    else:
        return None
    return None if path.exists() else path


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
TRAINS = True  # it trains, so it takes --track (cli.main)
ORDER = 20


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_budget_options, add_common_options

    p = subparsers.add_parser(
        "search",
        help="tune methods (join a distributed study) or show a study's status",
        description="Run search trials for each method until the protocol's budget is "
        "finished, without the final runs (`dmlbench run` does both). Several processes and "
        "machines may run this against one storage: trials are claimed under a lock, a killed "
        "worker's trial is retried.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(p, seeds=False, reports=False, force=False)
    p.add_argument(
        "--status",
        action="store_true",
        help="print each study's state and exit (0, also with no study yet; creates no file)",
    )
    p.add_argument(
        "--study",
        type=int,
        default=None,
        metavar="K",
        help="only study K (0 to T - 1) of a protocol with search.studies: T; default: all T, "
        "one after the other (each its own sampler seeds and the full search.trials budget)",
    )
    add_budget_options(p, defaults=False)  # search trials only: a zero budget has none
    p.set_defaults(func=cmd_search)
