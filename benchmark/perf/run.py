"""Wall time of one method and seed on one core, against the embedded protocols' target.

``python -m dmlbench.perf.run --protocol emoji-mini`` trains and evaluates one method (default
multi-similarity) under its paper defaults (``--no-search``), one seed after another, each on
one torch thread in a temporary results folder, and prints per seed the record's own
``timings``: the whole run, its training and its evaluation. The last row compares the median
run with the target of the class-label embedded protocols, 30 seconds on one core (ratio =
ours / target, ≤ 1 meets it). It has no peer: the figure is what one entry of a board costs.

Why the record's times and not the process's: a board's regeneration runs hundreds of runs in
one process, so interpreter start-up, imports and the data cache's first load are paid once
there, not per run; the record's ``wall_seconds`` is the part every run pays. The seeds are the
rounds (median, min and max): on a shared virtual machine the same run varies by a fifth from
one minute to the next, which one figure would hide.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from dmlbench.metrics.catalogue import RECALL
from dmlbench.perf._common import (
    Row,
    Spread,
    add_common_options,
    emit,
    machine_info,
    markdown_table,
    refuse_if_busy,
)

# issue "Boards that measure metric learning", its cost item (5 s before the boards were
# fine-tuned from a trunk to convergence)
TARGET_SECONDS = 30.0


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of seeds: {text!r}") from None
    if len(seeds) < 3:
        raise argparse.ArgumentTypeError("at least 3 seeds (median, min and max)")
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--protocol", default="emoji-mini")
    parser.add_argument("--method", default="multi-similarity")
    parser.add_argument("--seeds", type=_seeds, default=[0, 1, 2, 3, 4], help="e.g. 0,1,2,3,4")
    parser.add_argument(
        "--max-steps", type=int, default=None, help="a smoke test: not the protocol's figure"
    )
    add_common_options(parser)
    args = parser.parse_args(argv)
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    from dmlbench.options import RunOptions
    from dmlbench.protocol import load_protocol
    from dmlbench.run import run_protocol

    info = machine_info()
    protocol = load_protocol(args.protocol).without_search()
    times: dict[str, list[float]] = {"wall": [], "train": [], "eval": []}
    recall: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            run_options = RunOptions(
                results_dir=Path(tmp),
                progress=False,
                keep=False,
                threads=1,
                max_steps=args.max_steps,
            )
            [record] = [
                r
                for r in run_protocol(protocol, [args.method], [seed], run_options)
                if r.method == args.method
            ]
            times["wall"].append(record.timings.wall_seconds)
            times["train"].append(record.timings.train_seconds)
            times["eval"].append(record.timings.eval_seconds)
            recall.append(record.metrics[RECALL.at(1)])
    wall = Spread.of(times["wall"])
    rows = [
        Row.timed(f"{args.method}: {what} s per seed", Spread.of(values))
        for what, values in (
            ("training", times["train"]),
            ("evaluation", times["eval"]),
        )
    ]
    rows.append(Row(f"{RECALL.label}1 per seed", " ".join(f"{r:.4f}" for r in recall)))
    rows.append(
        Row.timed(
            f"{args.method}: whole run, s per seed (peer: the target)",
            wall,
            Spread(TARGET_SECONDS, TARGET_SECONDS, TARGET_SECONDS),
        )
    )
    body = (
        f"{protocol.name} (v{protocol.version}, {protocol.short_hash}), {args.method}, seeds "
        f"{', '.join(map(str, args.seeds))} one after another, one torch thread (target: a "
        f"run in ≤ {TARGET_SECONDS:g} s on one core):\n\n" + markdown_table(rows) + "\n"
    )
    emit("dmlbench.perf.run", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
