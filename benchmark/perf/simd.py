"""What the portable numeric path costs: training steps and evaluation, MKL's reproducible
branch against the branch MKL picks for this CPU.

``python -m dmlbench.perf.simd`` trains contrastive on glyphs-mini for ``--steps`` steps at one
torch thread and evaluates the test split, in a fresh process per measurement (MKL reads its
branch once, at its first call), under ``MKL_CBWR=COMPATIBLE,STRICT`` (ours: the setting of
:mod:`dmlbench.simd`) and under ``MKL_CBWR=AUTO`` (the peer: MKL's own choice for this CPU).
The rest of the setting (oneDNN, ATen and faiss at AVX2) is the same on both sides: on a CPU
whose best level is AVX2 it costs nothing, and on an AVX-512 CPU its cost is the speed
AVX-512 would have added. The sides take turns, reversed every other round; figures are
medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from dmlbench.perf._common import (
    Row,
    Spread,
    add_common_options,
    emit,
    machine_info,
    markdown_table,
    refuse_if_busy,
    rounds_option,
)

SIDES = {"ours": "COMPATIBLE,STRICT", "peer": "AUTO"}


def child(steps: int) -> dict[str, float | str | None]:
    """One measurement in this process: seconds per training step and of one evaluation."""
    import torch

    from dmlbench.data import load_data
    from dmlbench.engine.evaluation import evaluate
    from dmlbench.engine.train import embed, train
    from dmlbench.methods import create_method
    from dmlbench.protocol import load_protocol
    from dmlbench.simd import mkl_branch

    torch.set_num_threads(1)
    protocol = load_protocol("glyphs-mini")
    data = load_data(protocol)
    method = create_method(
        "contrastive", None, data.train.num_classes, protocol.model.embedding_size
    )
    result = train(protocol, method, data.train, 0, max_steps=steps, progress=False)
    start = time.perf_counter()
    evaluate(protocol.metrics, embed(result.model, data.test), data.test, 0, query_hits=True)
    return {
        "step": result.train_seconds / result.steps,
        "evaluate": time.perf_counter() - start,
        "mkl": mkl_branch(),
    }


def measure(side: str, steps: int) -> dict[str, float | str | None]:
    env = {**os.environ, "MKL_CBWR": SIDES[side]}
    out = subprocess.run(
        [sys.executable, "-m", "dmlbench.perf.simd", "--child", "--steps", str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.simd",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rounds_option(parser, "--rounds", 3, "measurements per side, ≥ 3 (median, min, max shown)")
    parser.add_argument("--steps", type=int, default=100, help="training steps per measurement")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_common_options(parser)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.steps)))
        return 0
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    info = machine_info()
    runs: dict[str, list[dict[str, float | str | None]]] = {side: [] for side in SIDES}
    for r in range(args.rounds):
        for side in list(SIDES) if r % 2 == 0 else list(reversed(SIDES)):
            runs[side].append(measure(side, args.steps))
    rows = []
    for key, figure, scale in (
        ("step", "training step, ms (glyphs-mini batch, contrastive, one thread)", 1000.0),
        ("evaluate", "evaluation of the test split, s (embedding and every metric)", 1.0),
    ):
        ours, peer = (Spread.of([float(m[key] or 0) for m in runs[s]], scale) for s in SIDES)
        rows.append(Row.timed(figure, ours, peer))
    branches = {s: sorted({str(m["mkl"]) for m in runs[s]}) for s in SIDES}
    rows.append(
        Row("MKL branch reported by MKL", ", ".join(branches["ours"]), ", ".join(branches["peer"]))
    )
    body = (
        f"Ours: `MKL_CBWR={SIDES['ours']}` (the portable setting); peer: `MKL_CBWR="
        f"{SIDES['peer']}` (MKL's choice for this CPU); {args.rounds} rounds of {args.steps} "
        "steps and one evaluation per side, a fresh process each:\n\n" + markdown_table(rows)
    )
    emit("dmlbench.perf.simd", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
