"""``dmlbench evaluate``: score a file of embeddings of a protocol's test split.

Bring your own model: embeddings made anywhere are scored with the protocol's metrics, on its
test classes, and written as an ``external`` record beside the protocol's runs, which boards
show in a section of their own and never rank (:mod:`dmlbench.engine.external`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EPILOG_EVALUATE = """examples:
  dmlbench embed --record results/glyphs-mini/HASH/contrastive-seed0-final.json \\
      --images test --out test.npz
  dmlbench evaluate --protocol glyphs-mini --embeddings test.npz   # that run's metrics again
  dmlbench evaluate --protocol glyphs-mini --no-search --embeddings test.npz   # @defaults board
  dmlbench evaluate --protocol glyphs-mini --embeddings mine.npz \\
      --model-name my-net --trained-by "me" --trained-on "ImageNet-1k"
"""
FLAGS = {"model_name": "--model-name", "trained_by": "--trained-by", "trained_on": "--trained-on"}


def cmd_evaluate(args: argparse.Namespace) -> int:
    from dmlbench.engine.external import save_external, score_file
    from dmlbench.errors import DmlbenchError
    from dmlbench.metrics.catalogue import interval_of
    from dmlbench.protocol import load_protocol
    from dmlbench.records import folder_problem
    from dmlbench.report.tables import HIDDEN

    if problem := folder_problem(Path(args.results_dir), "--results-dir"):
        raise DmlbenchError(f"{problem}; the record is written there")  # before any work
    protocol = load_protocol(args.protocol)
    if args.no_search:  # the board `dmlbench run --no-search` writes (<protocol>@defaults)
        protocol = protocol.with_trials(0)
    path = Path(args.embeddings)

    def describe(arrays: dict[str, Any], size: int, sha256: str) -> Any:
        return _model(args, arrays, path, size, sha256)

    record = score_file(protocol, path, describe, args.seed, args.data_root)
    written = save_external(record, Path(args.results_dir))
    metrics = {k: v for k, v in record.metrics.items() if k not in HIDDEN}
    shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if interval_of(k) is None)
    print(f"{record.method} on {protocol.name} (external): {shown}")
    print(f"written: {written}", file=sys.stderr)
    return 0


def _model(
    args: argparse.Namespace, arrays: dict[str, Any], path: Path, size: int, sha256: str
) -> Any:
    """The flags, else the file's own ``model_name``/``trained_by``/``trained_on``."""
    from dmlbench.engine.external import external_model
    from dmlbench.errors import DmlbenchError

    values = {}
    for key, flag in FLAGS.items():
        value = getattr(args, key) or (str(arrays[key]) if key in arrays else None)
        if not value:
            raise DmlbenchError(f"{flag} is required: {path} has no {key!r} array to default to")
        values[key] = value
    return external_model(
        values["model_name"], values["trained_by"], values["trained_on"], size, sha256
    )


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 40


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "evaluate",
        help="score a file of embeddings of a protocol's test split (a model of your own)",
        description="Score the embeddings in an .npz file with the protocol's metrics on its "
        "test split and write an external record beside the protocol's runs: reports show "
        "it in a section of its own, never ranked against methods trained under the "
        "protocol's budget. The file must carry the split's order (split, split_fingerprint, "
        "index), as `dmlbench embed --images test` writes it; see docs/evaluate.md.",
        epilog=EPILOG_EVALUATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--protocol", required=True, help="shipped protocol name or YAML file")
    p.add_argument(
        "--no-search",
        action="store_true",
        help="score beside the papers'-defaults board (<protocol>@defaults, as `dmlbench run "
        "--no-search` writes it); same test split",
    )
    p.add_argument("--embeddings", required=True, metavar="FILE.npz", help="the embeddings file")
    help_from = "(default: the file's {} array; required without it)"
    p.add_argument(
        "--model-name", help="the model's name, a slug " + help_from.format("model_name")
    )
    p.add_argument("--trained-by", help="who trained it " + help_from.format("trained_by"))
    p.add_argument(
        "--trained-on", help="the data it was trained on " + help_from.format("trained_on")
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of NMI's k-means and the Recall@1 interval (default: the file's seed "
        "array, else 0)",
    )
    p.add_argument("--results-dir", default="results", help="records (default: results)")
    p.add_argument("--data-root", default=None, help="data root, overriding the protocol's")
    p.set_defaults(func=cmd_evaluate)
