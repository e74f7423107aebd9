"""What a numeric path costs: training steps and evaluation, the portable setting against a peer.

``python -m dmlbench.perf.simd`` trains contrastive on glyphs-mini for ``--steps`` steps at one
torch thread and evaluates the test split, in a fresh process per measurement (MKL reads its
branch once, at its first call), under the setting of :mod:`dmlbench.simd` (ours) and under
the peer ``--peer`` names:

- ``mkl-auto``: ``MKL_CBWR=AUTO``, MKL's own choice for this CPU (what the portable branch costs);
- ``onednn-off``: ``torch.backends.mkldnn`` off, so convolutions run in ATen (im2col and MKL's
  matrix product) instead of oneDNN: the candidate for one path across vendors that was
  measured and not adopted (docs/leaderboard.md).

The rest of the setting (oneDNN, ATen and faiss at AVX2) is the same on both sides. The sides
take turns, reversed every other round; figures are medians of the rounds.
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

#: --peer -> (what it is, the environment of its side); ours is the portable setting as is
PEERS = {
    "mkl-auto": ("`MKL_CBWR=AUTO` (MKL's choice for this CPU)", {"MKL_CBWR": "AUTO"}),
    "onednn-off": (
        "`torch.backends.mkldnn` off (convolutions in ATen)",
        {"DMLBENCH_PERF_ONEDNN": "0"},
    ),
}
SIDES = ("ours", "peer")


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
    if os.environ.get("DMLBENCH_PERF_ONEDNN") == "0":
        torch.backends.mkldnn.set_flags(False)
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
        "convolutions": "oneDNN" if torch.backends.mkldnn.enabled else "ATen",
    }


def measure(side: str, peer: str, steps: int) -> dict[str, float | str | None]:
    env = {**os.environ, **(PEERS[peer][1] if side == "peer" else {})}
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
    parser.add_argument(
        "--peer", choices=sorted(PEERS), default="mkl-auto", help="what to compare with"
    )
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
            runs[side].append(measure(side, args.peer, args.steps))
    rows = []
    for key, figure, scale in (
        ("step", "training step, ms (glyphs-mini batch, contrastive, one thread)", 1000.0),
        ("evaluate", "evaluation of the test split, s (embedding and every metric)", 1.0),
    ):
        ours, peer = (Spread.of([float(m[key] or 0) for m in runs[s]], scale) for s in SIDES)
        rows.append(Row.timed(figure, ours, peer))
    for key, figure in (("mkl", "MKL branch reported by MKL"), ("convolutions", "convolutions in")):
        seen = {s: ", ".join(sorted({str(m[key]) for m in runs[s]})) for s in SIDES}
        rows.append(Row(figure, seen["ours"], seen["peer"]))
    body = (
        f"Ours: the portable setting (`dmlbench.simd`); peer: {PEERS[args.peer][0]}; "
        f"{args.rounds} rounds of {args.steps} steps and one evaluation per side, a fresh "
        "process each:\n\n" + markdown_table(rows)
    )
    emit("dmlbench.perf.simd", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
