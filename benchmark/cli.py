"""The ``dmlbench`` command line: run, report, list, validate.

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
from pathlib import Path
from typing import Any

from dmlbench import __version__
from dmlbench.errors import DmlbenchError

EPILOG_RUN = """examples:
  dmlbench run                                    # glyphs-mini, its default methods, all seeds
  dmlbench run --method triplet-semihard,multi-similarity --trials 4
  dmlbench run --protocol glyphs-mini --method multi-similarity --seed 0 --no-search
  dmlbench run --protocol my_protocol.yaml --method all
  dmlbench run --method contrastive --hparam contrastive.margin=0.5
"""


def cmd_run(args: argparse.Namespace) -> int:
    from dmlbench.cli_options import apply_budget, check_run_args, resolve_methods, search_options
    from dmlbench.distributed import init_from_env
    from dmlbench.methods import load_plugins
    from dmlbench.protocol import load_protocol
    from dmlbench.report import write_reports
    from dmlbench.runner import RunOptions, run_protocol
    from dmlbench.train import Accel

    init_from_env()  # under torchrun: one process group, one trial on several GPUs
    load_plugins(args.plugin)
    protocol = apply_budget(load_protocol(args.protocol), args)
    overrides: dict[str, object] = {}
    if args.backbone_override or args.pretrained:
        protocol = _override_backbone(protocol, args, overrides)
    methods = resolve_methods(protocol, args.method)
    check_run_args(args, methods)
    seeds = args.seed if args.seed is not None else list(protocol.seeds)
    options = RunOptions(
        results_dir=Path(args.results_dir),
        data_root=args.data_root,
        device=args.device,
        threads=args.threads,
        max_steps=args.max_steps,
        force=args.force,
        progress=not args.no_progress,
        hparams=_parse_hparams(args.hparam),
        overrides=overrides,
        accel=Accel(
            num_workers=args.loader_workers,
            amp=args.amp,
            channels_last=args.channels_last,
            compile_model=args.compile,
        ),
        search=search_options(args),
    )
    print(
        f"protocol {protocol.name} v{protocol.version} ({protocol.short_hash}); "
        f"methods: {', '.join(methods)}; seeds: {seeds}; "
        f"budget: {protocol.search.trials} trials per method",
        file=sys.stderr,
    )
    records = _all_on_disk(run_protocol(protocol, methods, seeds, options), options.results_dir)
    for _, path, text in write_reports(records, Path(args.reports_dir)):
        print(text)
        print(f"written: {path} (and .csv)")
    return 0


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


def _override_backbone(protocol: Any, args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """The protocol with another backbone and/or weights, named ``<name>@backbone=...``.

    The protocol's pretraining is kept unless ``--pretrained`` says otherwise, so
    ``--backbone-override resnet50`` on cub200 trains from ImageNet weights (and fails
    clearly when they cannot be fetched), never silently from random ones. The small CPU
    backbones have no pretrained weights at all: for them the override uses random weights
    and says so on one line. Such runs are marked in the record and never enter a leaderboard.
    """
    from dmlbench.models import NO_PRETRAINED

    backbone = args.backbone_override or protocol.model.backbone
    pretrained = protocol.model.pretrained
    if args.pretrained is not None:
        pretrained = (
            None if args.pretrained.lower() in {"none", "null", "random"} else args.pretrained
        )
    elif backbone in NO_PRETRAINED and pretrained:
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


def cmd_report(args: argparse.Namespace) -> int:
    from dmlbench.records import load_records
    from dmlbench.report.build import build_reports

    root = Path(args.results_dir)
    if not root.is_dir():
        raise DmlbenchError(f"{root}: no results folder (run `dmlbench run` first)")
    # The committed leaderboard (results/leaderboard) is its own board: mixed into a user's
    # results it would count its seeds a second time. Read only when asked for.
    skip = () if args.include_leaderboard else ("leaderboard",)
    records, problems = load_records(root, skip=skip)
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    if args.protocol:
        records = [r for r in records if r.protocol.name == args.protocol]
    if not records:
        raise DmlbenchError(f"{root}: no records found")
    written = build_reports(records, Path(args.reports_dir), root / "published")
    for path in written:
        if path.suffix == ".md" and not path.stem.endswith("-published"):
            print(path.read_text(encoding="utf-8"))
    print(f"written: {len(written)} files to {args.reports_dir} (.md .csv .tex .html .png .svg)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from dmlbench.methods import METHODS, load_plugins
        from dmlbench.methods.pml import list_pml

        load_plugins(args.plugin)
        names = METHODS.list(args.pattern)
        refused: dict[str, str] = {}
        if args.pattern.startswith("pml:"):  # built on demand, so listed from the library
            found = list_pml(args.pattern)
            refused = {n: why for n, why in found if why}
            names = [n for n, why in found if not why]
        print(f"{'name':34} {'labels':8} {'lr×':>5}  paper (lr×: the loss parameters' multiplier)")
        for name in names:
            cls = METHODS.get(name)
            mult = cls.defaults.get(cls.lr_mult_key) if cls.lr_mult_key else None
            shown = "—" if mult is None else f"{float(mult):g}"
            print(f"{name:34} {cls.label_kind:8} {shown:>5}  {cls.paper}")
            if args.sources:
                print(f"{'':50}defaults: {cls.defaults_source}")
        for name, why in refused.items():
            print(f"{name:34} refused: {why}")
        if args.pattern == "*":
            print("pml:<Loss>[+<Miner>]  any pytorch-metric-learning loss: list methods 'pml:*'")
    elif args.what == "protocols":
        from dmlbench.protocol import builtin_names, load_protocol

        for name in builtin_names():
            p = load_protocol(name)
            if Path(name).match(args.pattern):
                print(f"{name:16} v{p.version}  {p.short_hash}  {p.description}")
    elif args.what == "backbones":
        from dmlbench.models import BACKBONES

        for name in BACKBONES.list(args.pattern):
            print(name)
        print("timm:<name>         any timm model (timm.list_models())")
        print("torchvision:<name>  any torchvision classification model")
    else:
        from dmlbench.data import DATASETS

        for name in DATASETS.list(args.pattern):
            print(f"{name:16} {DATASETS.get(name).description}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from dmlbench.protocol import check_lock, load_protocol, write_lock

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


# Subcommands that live in their own modules: each defines ``add_parser(subparsers)``.
EXTRA_COMMANDS = (
    "dmlbench.sweep",
    "dmlbench.data.prepare",
    "dmlbench.data.cache_cli",
    "dmlbench.search_cli",
    "dmlbench.check",
)


def build_parser() -> argparse.ArgumentParser:
    from dmlbench.cli_options import add_budget_options, add_common_options

    parser = argparse.ArgumentParser(
        prog="dmlbench",
        description="Deep metric learning methods under frozen protocols with equal budgets.",
    )
    parser.add_argument("--version", action="version", version=f"dmlbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="train and evaluate methods under a protocol",
        description="Tune each method with the protocol's budget on validation classes "
        "carved out of the training classes (Optuna), retrain the selection on all training "
        "classes for each seed, evaluate on the test classes, write one record per run "
        "and print the results table. Existing records and studies are reused (resume).",
        epilog=EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    run.add_argument("--channels-last", action="store_true", help="NHWC memory format (GPU)")
    run.add_argument("--compile", action="store_true", help="torch.compile the model")
    add_budget_options(run)
    run.set_defaults(func=cmd_run)

    report = sub.add_parser(
        "report",
        help="tables of the records in a results folder",
        description="Read every record under --results-dir, group by protocol hash and write "
        "per hash a Markdown/CSV/LaTeX table, a bar plot, reported-vs-reproduced and budget "
        "tables and an HTML page, plus ranking.md.",
    )
    report.add_argument(
        "--results-dir", default="results", help="records to read (default: results)"
    )
    report.add_argument("--reports-dir", default="reports", help="output folder (default: reports)")
    report.add_argument("--protocol", default=None, help="only this protocol name")
    report.add_argument(
        "--include-leaderboard",
        action="store_true",
        help="also read RESULTS_DIR/leaderboard (the committed board; by default left out so "
        "that its seeds are not counted beside yours; `--results-dir results/leaderboard` "
        "reports it alone)",
    )
    report.set_defaults(func=cmd_report)

    lst = sub.add_parser(
        "list",
        help="list methods, protocols, backbones or data sets",
        description="List registered components; PATTERN is a shell-style "
        "pattern, e.g. dmlbench list methods '*proxy*'.",
    )
    lst.add_argument("what", choices=["methods", "protocols", "backbones", "datasets"])
    lst.add_argument("pattern", nargs="?", default="*", help="filter (default: *)")
    lst.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (its methods are listed too)",
    )
    lst.add_argument(
        "--sources",
        action="store_true",
        help="methods: also print where each default (and learning-rate multiplier) is from",
    )
    lst.set_defaults(func=cmd_list)

    val = sub.add_parser(
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
    val.set_defaults(func=cmd_validate)

    for module in EXTRA_COMMANDS:
        if importlib.util.find_spec(module) is not None:
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
    from dmlbench.checkpoint import TrainingInterrupted

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
