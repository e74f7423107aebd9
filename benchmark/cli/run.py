"""``dmlbench run``: tune, train and evaluate methods under a protocol, then the table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.errors import DmlbenchError

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

EPILOG_RUN = """examples:
  dmlbench run                                    # glyphs-mini, its default methods, all seeds
  dmlbench run --method triplet-semihard,multi-similarity --trials 4
  dmlbench run --protocol glyphs-mini --method multi-similarity --seed 0 --no-search
  dmlbench run --protocol my_protocol.yaml --method all
  dmlbench run --method contrastive --hparam contrastive.margin=0.5
  dmlbench run --method contrastive --seed 0 --no-keep   # no kept weights or embeddings
"""


def cmd_run(args: argparse.Namespace) -> int:
    from dmlbench.cli.options import (
        apply_budget,
        check_run_args,
        reports_folder,
        resolve_methods,
        run_options,
    )
    from dmlbench.engine.distributed import init_from_env
    from dmlbench.methods import load_plugins
    from dmlbench.options import Accel
    from dmlbench.protocol import load_protocol
    from dmlbench.report import write_reports
    from dmlbench.run import run_protocol

    init_from_env()  # under torchrun: one process group, one trial on several GPUs
    load_plugins(args.plugin)
    protocol = apply_budget(load_protocol(args.protocol), args)
    overrides: dict[str, object] = {}
    if args.backbone_override or args.pretrained:
        protocol = _override_backbone(protocol, args, overrides)
    protocol = _override_numeric_path(protocol, args, overrides)
    methods = resolve_methods(protocol, args.method)
    check_run_args(args, methods)
    reports = reports_folder(args)
    seeds = args.seed if args.seed is not None else list(protocol.seeds)
    options = run_options(
        args,
        keep=not args.no_keep,
        hparams=_parse_hparams(args.hparam),
        overrides=overrides,
        accel=Accel(
            num_workers=args.loader_workers,
            amp=args.amp,
        ),
    )
    print(
        f"protocol {protocol.name} v{protocol.version} ({protocol.short_hash}); "
        f"methods: {', '.join(methods)}; seeds: {seeds}; "
        f"budget: {protocol.search.trials} trials per method",
        file=sys.stderr,
    )
    _print_work(protocol, methods, len(seeds), args)
    records = _all_on_disk(run_protocol(protocol, methods, seeds, options), options.results_dir)
    for _, path, text in write_reports(records, reports):
        print(text)
        print(f"written: {path} (and .csv)")
    return 0


def _print_work(
    protocol: Protocol, methods: list[str], seeds: int, args: argparse.Namespace
) -> None:
    """The run's counted work before a long run starts (data sets of published size only)."""
    from dmlbench.engine.cost import protocol_work

    if args.backbone_override or getattr(args, "max_steps", None):
        return  # a smoke run: the protocol's work is not what it does
    work = protocol_work(protocol, methods=len(methods), seeds=seeds)
    if work is not None:
        print(work.summary(), file=sys.stderr)


def protocol_summary(name: str) -> str:
    """What ``run --protocol NAME --help`` adds: the protocol's methods, budget, seeds, work."""
    from dmlbench.engine.cost import protocol_work
    from dmlbench.protocol import load_protocol

    p = load_protocol(name)
    s = p.search
    lines = [
        f"protocol {p.name} v{p.version} ({p.short_hash}): {p.description}",
        f"  methods ({len(p.methods)}): {', '.join(p.methods) or '-'}",
        f"  budget: {s.trials} trials × {s.validation.folds} folds per method ({s.sampler}, "
        f"{s.pruner} pruner); {p.optim.epochs} epochs, batch {p.batch.size}; "
        f"seeds {list(p.seeds)}",
        f"  model: {p.model.backbone} ({p.model.pretrained or 'random init'}), "
        f"{p.model.embedding_size}-d",
    ]
    work = protocol_work(p)
    if work is not None:
        lines.append("  " + work.summary())
    return "\n".join(lines)


class _HelpWithProtocol(argparse.Action):
    """``-h``: the usual help, then the summary of the ``--protocol`` given before it (or of
    the default one), so a user sees what a run of it would do before starting it."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, *_: Any) -> None:
        parser.print_help()
        name = getattr(namespace, "protocol", None)
        if name:
            try:
                print("\n" + protocol_summary(name))
            except DmlbenchError as err:
                print(f"\n(--protocol {name}: {err})")
        parser.exit()


def _all_on_disk(records: list[Any], results_dir: Path) -> list[Any]:
    """Every final record on disk of the protocol hashes this run wrote, not only its own.

    Two processes sharing a results folder each compute part of a protocol (the record locks
    split the work); the table written at the end must hold both parts, not whichever process
    finished last.
    """
    from dmlbench.records import load_records
    from dmlbench.report.build import unique_records

    hashes = {r.protocol.hash for r in records}
    on_disk, _ = load_records(results_dir, skip=("leaderboard",))
    mine = [r for r in on_disk if r.protocol.hash in hashes and r.stage == "final"]
    return unique_records(mine or records)


def _override_backbone(
    protocol: Protocol, args: argparse.Namespace, overrides: dict[str, Any]
) -> Protocol:
    """The protocol with another backbone and/or weights, named ``<name>@backbone=...``.

    The protocol's pretraining is kept unless ``--pretrained`` says otherwise, so
    ``--backbone-override resnet50`` on cub200 trains from ImageNet weights (and fails
    clearly when they cannot be fetched), never silently from random ones. The small CPU
    backbones have only trunks made here (``trunk:NAME``): given other weights, the override
    uses random weights and says so on one line. Such runs are marked in the record and never
    enter a leaderboard.
    """
    from dmlbench.models import NO_PRETRAINED
    from dmlbench.models.trunks import trunk_name

    backbone = args.backbone_override or protocol.model.backbone
    pretrained = protocol.model.pretrained
    if args.pretrained is not None:
        pretrained = (
            None if args.pretrained.lower() in {"none", "null", "random"} else args.pretrained
        )
    elif backbone in NO_PRETRAINED and pretrained and trunk_name(pretrained) is None:
        print(
            f"warning: backbone {backbone} has no pretrained weights; the override trains it "
            f"from random weights (the protocol asks for {pretrained}; --pretrained none "
            "silences this)",
            file=sys.stderr,
        )
        pretrained = None
    overrides["backbone"] = backbone
    overrides["pretrained"] = pretrained
    name = protocol.name + (f"@backbone={backbone}" if args.backbone_override else "")
    if pretrained != protocol.model.pretrained:
        name += f"@pretrained={pretrained or 'none'}"
    if name == protocol.name:
        return protocol
    return protocol.with_overrides(
        {"model.backbone": backbone, "model.pretrained": pretrained}, name=name
    )


def _override_numeric_path(
    protocol: Protocol, args: argparse.Namespace, overrides: dict[str, Any]
) -> Protocol:
    """The protocol with ``--channels-last`` / ``--compile`` in force, named
    ``<name>@channels_last`` / ``<name>@compile``; itself when it already asks for them.

    Both options round differently from the protocol's own path (measured on the CPU: a
    small CNN's losses differ from the first step), so they are derived protocols with their
    own hash, marked in the record like a backbone override, and never averaged with the
    protocol's runs.
    """
    changes = {
        key: True
        for key, asked in (("channels_last", args.channels_last), ("compile", args.compile))
        if asked and not getattr(protocol.model, key)
    }
    if not changes:
        return protocol
    overrides.update(changes)
    name = protocol.name + "".join(f"@{key}" for key in changes)
    return protocol.with_overrides({f"model.{k}": v for k, v in changes.items()}, name=name)


def _parse_hparams(items: list[str] | None) -> dict[str, dict[str, object]]:
    import yaml

    out: dict[str, dict[str, object]] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        method, dot, name = key.partition(".")
        if not sep or not dot:
            raise DmlbenchError(f"--hparam {item!r}: expected METHOD.NAME=VALUE")
        out.setdefault(method, {})[name] = yaml.safe_load(value)
    return out


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
TRAINS = True  # it trains, so it takes --track (cli.main)
ORDER = 10


def add_parser(subparsers: Any) -> None:
    from dmlbench.cli.options import add_budget_options, add_common_options

    run = subparsers.add_parser(
        "run",
        help="train and evaluate methods under a protocol",
        description="Tune each method with the protocol's budget on validation classes "
        "carved out of the training classes (Optuna), retrain the selection on all training "
        "classes for each seed, evaluate on the test classes, write one record per run "
        "and print the results table. Existing records and studies are reused (resume).",
        epilog=EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    run.add_argument(
        "-h",
        "--help",
        action=_HelpWithProtocol,
        help="show this help, then the summary of --protocol (given before -h) and its work",
    )
    add_common_options(run)
    run.add_argument(
        "--hparam",
        action="append",
        metavar="METHOD.NAME=VALUE",
        help="fix one hyper-parameter of one method (repeatable; that method is not tuned and "
        "its records are marked as overridden)",
    )
    run.add_argument(
        "--backbone-override",
        default=None,
        metavar="NAME",
        help="replace the protocol's backbone (smoke tests on CPU; marked in the record, "
        "never a leaderboard number)",
    )
    run.add_argument(
        "--pretrained",
        default=None,
        metavar="WEIGHTS",
        help="weights of the (overridden) backbone: 'none' for random initialisation, or e.g. "
        "'imagenet' (default: the protocol's; an override keeps them)",
    )
    run.add_argument(
        "--loader-workers",
        type=int,
        default=0,
        metavar="N",
        help="DataLoader worker processes per training run (numbers do not depend on it)",
    )
    run.add_argument(
        "--amp",
        choices=["auto", "bf16", "fp16", "off"],
        default="auto",
        help="mixed precision on CUDA (auto = bf16; never used on the CPU)",
    )
    run.add_argument(
        "--channels-last",
        action="store_true",
        help="train in NHWC memory format (faster convolutions); it moves numbers, so the runs "
        "form their own protocol <name>@channels_last, never on a leaderboard",
    )
    run.add_argument(
        "--compile",
        action="store_true",
        help="train through torch.compile; it moves numbers, so the runs form their own "
        "protocol <name>@compile, never on a leaderboard",
    )
    run.add_argument(
        "--no-keep",
        action="store_true",
        help="keep neither the trained weights nor the test embeddings of final runs "
        "(by default they go to artifacts/ next to each record; see `dmlbench embed`)",
    )
    add_budget_options(run)
    run.set_defaults(func=cmd_run)
