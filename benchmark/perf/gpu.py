"""What the real protocols cost on a GPU: training throughput, peak memory, evaluation at SOP scale.

``python -m dmlbench.perf.gpu`` measures, on one device (default ``cuda``):

- **training**: images/s of ``engine.train.train`` (the harness ``dmlbench run`` uses, so the
  step includes the loss, the optimizer and the harness's own per-step work) for each real
  backbone (BN-Inception, ResNet-50, GoogLeNet: the ones the shipped real protocols and the
  papers they reproduce use) at the protocol's crop size and batch, in fp32 and in bf16
  autocast (``--amp auto``), each with and without channels-last; the images sit in memory,
  already cropped, so the data pipeline is not what is timed. Weights are random: they do not
  change the arithmetic, and the GPU machine cannot download any. Peak GPU memory is
  ``torch.cuda.max_memory_allocated`` over the run (the allocator's, not nvidia-smi's).
- **evaluation** at Stanford Online Products' test size (60,502 × 512, 11,316 classes):
  ``metrics.retrieval.embedding_metrics`` (its k-NN search on this GPU when faiss has GPU support,
  else on the CPU, as the log says) against pytorch-metric-learning's ``AccuracyCalculator``
  on the same device, and the floor: one exact k-NN search (k = largest class) done with
  torch on the GPU in blocks. NMI (a CPU k-means in both) is timed by ``perf.evaluate``.
- **the GPU path against the old one** (#49): the evaluation's retrieval metrics with its exact
  k-NN in torch on the device (:class:`~dmlbench.metrics.knn.TorchFlatL2`, what a run on a GPU
  uses when faiss has no GPU support) against faiss on the CPU, with the two results compared
  (they must be equal); and a training batch moved to the device as uint8 from pinned memory
  and converted there (:class:`~dmlbench.data.base.Uint8Batches`) against float32 converted on
  the CPU and copied from pageable memory, as before.

Without a CUDA device the script says so on its first line ("no CUDA device: measured on CPU,
not the GPU figures") and measures on the CPU: the comparisons then show that the paths run
and agree, not what they are worth on a card. ``--parts`` picks what to measure.

Each timed figure is the median of ``--rounds`` interleaved rounds (min and max beside). The
ratio columns compare like with like in the same run: bf16 / fp32 and channels-last / plain
throughput, ours / peer evaluation time. On a CPU the script runs (tests use tiny sizes) but
says nothing about GPU hours.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from dmlbench.perf._common import (
    Row,
    Spread,
    add_common_options,
    emit,
    interleaved,
    machine_info,
    markdown_table,
    refuse_if_busy,
    rounds_option,
)

BACKBONES = ("bn-inception", "resnet50", "googlenet")
CONFIGS = (("fp32", False), ("fp32", True), ("bf16", False), ("bf16", True))
SOP = "60502,512,11316"
PARTS = ("training", "evaluation", "knn", "transfer")
NO_CUDA = "no CUDA device: measured on CPU, not the GPU figures"


def synthetic_split(images: int, classes: int, size: int, seed: int) -> Any:
    """A class-labelled split of random uint8 images (3, size, size), held in memory as the
    embedded data sets hold theirs."""
    from dmlbench.data.base import ArrayImages, Split

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(images, 3, size, size), dtype=np.uint8)
    return Split(images=ArrayImages(x), labels=np.arange(images) % classes)


def training_protocol(
    backbone: str, batch: int, size: int, embedding: int, channels_last: bool = False
) -> Any:
    """cub200 with another backbone, no weights, no image transform (the images come cropped),
    in NCHW or NHWC memory format."""
    from dmlbench.protocol import ImagesSpec, load_protocol

    p = load_protocol("cub200")
    return p.model_copy(
        update={
            "images": ImagesSpec(),
            "model": p.model.model_copy(
                update={
                    "backbone": backbone,
                    "pretrained": None,
                    "embedding_size": embedding,
                    "channels_last": channels_last,
                }
            ),
            "batch": p.batch.model_copy(update={"size": batch, "samples_per_class": None}),
        }
    )


def train_call(
    backbone: str, precision: str, channels_last: bool, split: Any, args: argparse.Namespace
) -> Callable[[], tuple[float, float]]:
    """A call that trains ``args.steps`` steps and returns (images/s, peak GPU memory GiB)."""
    from dmlbench.engine.train import train
    from dmlbench.methods import create_method
    from dmlbench.options import Accel

    protocol = training_protocol(
        backbone, args.batch, args.image_size, args.embedding, channels_last
    )
    accel = Accel(amp="auto" if precision == "bf16" else "off")
    cuda = torch.device(args.device).type == "cuda"

    def call() -> tuple[float, float]:
        method = create_method(args.method, None, split.num_classes, args.embedding)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        result = train(
            protocol, method, split, 0, device=args.device, max_steps=args.steps,
            progress=False, accel=accel,
        )  # fmt: skip
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
        return result.images_per_second, peak

    return call


def training_rows(args: argparse.Namespace) -> tuple[list[str], list[Row]]:
    """The throughput table (one line per backbone and setting) and the ratio rows."""
    split = synthetic_split(args.batch * 4, max(args.batch // 4, 2), args.image_size, 0)
    header = ("backbone", "precision", "channels-last", "images/s", "min – max", "peak GPU GiB")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    rows: list[Row] = []
    cuda = torch.device(args.device).type == "cuda"
    configs = CONFIGS if cuda else CONFIGS[:2]  # autocast is off on a CPU: no bf16 rows
    for backbone in args.backbones:
        calls = {cfg: train_call(backbone, *cfg, split, args) for cfg in configs}
        for call in calls.values():
            call()  # cuDNN autotuning and first-call costs are not timed
        fns = {f"{p} {c}": call for (p, c), call in calls.items()}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
        for _ in range(args.rounds):
            _, last = interleaved(fns, repeats=1, warmup=0)
            for name, value in last.items():
                results[name].append(value)
        speed = {name: Spread.of([r[0] for r in rs]) for name, rs in results.items()}
        for name, rs in results.items():
            precision, cl = name.split()
            s, peak = speed[name], max(r[1] for r in rs)
            memory = f"{peak:.2f}" if cuda else "—"
            lines.append(
                f"| {backbone} | {precision} | {'yes' if cl == 'True' else 'no'} | "
                f"{s.median:.0f} | {s.low:.0f} – {s.high:.0f} | {memory} |"
            )
        best = "bf16" if cuda else "fp32"
        if cuda:
            rows.append(
                Row(f"{backbone}: bf16 / fp32 images/s", speed["bf16 False"].median,
                    speed["fp32 False"].median)
            )  # fmt: skip
        rows.append(
            Row(f"{backbone}: {best} channels-last / {best} images/s",
                speed[f"{best} True"].median, speed[f"{best} False"].median)
        )  # fmt: skip
    return lines, rows


def torch_knn_floor(x: np.ndarray, k: int, device: str) -> Callable[[], Any]:
    """One exact k-NN search (inner product of unit vectors) with torch, in query blocks."""
    from dmlbench.metrics.retrieval import l2_normalize

    xt = torch.from_numpy(l2_normalize(x)).to(device)

    def search() -> dict[str, float]:
        for start in range(0, len(xt), 4096):
            torch.topk(xt[start : start + 4096] @ xt.T, k, dim=1)
        if xt.is_cuda:
            torch.cuda.synchronize()
        return {}

    return search


def evaluation_rows(args: argparse.Namespace) -> list[Row]:
    """Ours vs pytorch-metric-learning (retrieval metrics) and the torch k-NN floor."""
    from dmlbench.metrics.catalogue import MAP_AT_R
    from dmlbench.perf.evaluate import PAIRS, make_embeddings, ours_calls, peer_calls

    n, dim, classes = (int(v) for v in args.eval_size.split(","))
    x, labels = make_embeddings(n, dim, classes, 1.4, 0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device.index or 0)
        torch.zeros(1, device=device)  # CUDA initialised: faiss follows this device
    ours, peer = ours_calls(x, labels, 0), peer_calls(x, labels, 0, device)
    k = int(np.bincount(labels).max())
    calls = {
        "floor": torch_knn_floor(x, k, args.device),
        "ours": ours["retrieval"],
        "peer": peer["retrieval"],
    }
    times, results = interleaved(calls, repeats=args.rounds, warmup=1)
    t = {name: Spread.of(v) for name, v in times.items()}
    map_r = MAP_AT_R.name
    gap = abs(results["ours"][map_r] - float(results["peer"][PAIRS[map_r]]))
    return [
        Row.timed(f"evaluation {n}×{dim}: retrieval metrics, s", t["ours"], t["peer"]),
        Row.timed(
            f"evaluation {n}×{dim}: floor, one torch k-NN (k={k}) on {device.type}, s; "
            "ratio = ours / floor",
            t["floor"],
            None,
            t["ours"].median / t["floor"].median,
        ),
        Row(
            f"evaluation {n}×{dim}: {MAP_AT_R.label}, absolute difference ours − peer",
            gap,
            digits=2,
        ),
    ]


def knn_rows(args: argparse.Namespace) -> list[Row]:
    """The evaluation's retrieval metrics with the torch k-NN on the device vs faiss (CPU)."""
    from dmlbench.metrics.knn import torch_search
    from dmlbench.perf.evaluate import make_embeddings, ours_calls

    n, dim, classes = (int(v) for v in args.eval_size.split(","))
    x, labels = make_embeddings(n, dim, classes, 1.4, 0)
    retrieval = ours_calls(x, labels, 0)["retrieval"]

    def on_device() -> Any:
        with torch_search(args.device):
            out = retrieval()
        if torch.device(args.device).type == "cuda":
            torch.cuda.synchronize()
        return out

    times, results = interleaved(
        {"torch": on_device, "faiss": retrieval}, repeats=args.rounds, warmup=1
    )
    t = {name: Spread.of(v) for name, v in times.items()}
    equal = results["torch"] == results["faiss"]
    return [
        Row.timed(
            f"evaluation {n}×{dim}: retrieval metrics, torch k-NN on {args.device} (ours) vs "
            "faiss on the CPU (peer), s",
            t["torch"],
            t["faiss"],
        ),
        Row(f"evaluation {n}×{dim}: every metric equal, torch k-NN vs faiss",
            "yes" if equal else "NO"),
    ]  # fmt: skip


def transfer_rows(args: argparse.Namespace) -> list[Row]:
    """One training batch to the device: uint8 from pinned memory, converted there (new) vs
    float32 converted on the CPU, copied from pageable memory (old)."""
    from dmlbench.data.base import uint8_batches

    device = torch.device(args.device)
    split = synthetic_split(args.batch, max(args.batch // 4, 2), args.image_size, 1)
    raw = uint8_batches(split.images)
    assert raw is not None
    indices = list(range(args.batch))
    pinned = raw.__getitems__(indices).pin_memory() if device.type == "cuda" else None

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def old() -> torch.Tensor:
        x = split.images.__getitems__(indices).to(device)
        sync()
        return x

    def new() -> torch.Tensor:
        x = pinned if pinned is not None else raw.__getitems__(indices)
        y = raw.to_float(x.to(device, non_blocking=True))
        sync()
        return y

    times, results = interleaved({"new": new, "old": old}, repeats=args.rounds * 5, warmup=2)
    t = {name: Spread.of(v) for name, v in times.items()}
    same = bool(torch.equal(results["new"].cpu(), results["old"].cpu()))
    where = f"{args.batch} × 3 × {args.image_size}²"
    return [
        Row.timed(
            f"training batch {where} to {args.device}: uint8 pinned, converted there (ours) vs "
            "float32 from the CPU (peer), s",
            t["new"],
            t["old"],
        ),
        Row(f"training batch {where}: the same float images", "yes" if same else "NO"),
    ]


def gpu_info(device: str) -> dict[str, str]:
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return {"gpu": "none (figures are the CPU's; they say nothing about GPU hours)"}
    props = torch.cuda.get_device_properties(torch.device(device))
    return {
        "gpu": f"{props.name}, {props.total_memory / 2**30:.0f} GiB, "
        f"{props.multi_processor_count} SMs, CUDA {torch.version.cuda}",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlbench.perf.gpu", description=__doc__)
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--backbones", nargs="+", default=list(BACKBONES))
    parser.add_argument("--method", default="multi-similarity", help="the loss trained")
    parser.add_argument("--batch", type=int, default=120, help="batch size (cub200's: 120)")
    parser.add_argument("--image-size", type=int, default=224, help="crop side (cub200's: 224)")
    parser.add_argument("--embedding", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed run")
    parser.add_argument("--eval-size", default=SOP, help="N,DIM,CLASSES (default SOP's test)")
    rounds_option(parser, "--rounds", 3, "interleaved rounds (median reported)")
    add_common_options(parser)
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="what to measure (default all): training throughput, the SOP-scale evaluation, "
        "the torch k-NN vs faiss, the uint8 pinned vs float transfer",
    )
    args = parser.parse_args(argv)
    if (status := refuse_if_busy(args)) is not None:
        return status
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        print(NO_CUDA, flush=True)
        args.device = "cpu"
    torch.backends.cudnn.benchmark = True
    info = {**machine_info(), **gpu_info(args.device)}
    start = time.perf_counter()
    body = NO_CUDA + "\n\n" if args.device == "cpu" else ""
    rows: list[Row] = []
    if "training" in args.parts:
        lines, train_ratios = training_rows(args)
        print("\n".join(lines), flush=True)  # seen even if the evaluation below fails
        body += (
            f"Training ({args.method}, batch {args.batch}, {args.image_size}² crops, "
            f"{args.embedding}-d, {args.steps} steps per run):\n\n" + "\n".join(lines) + "\n\n"
        )
        rows += train_ratios
    if "evaluation" in args.parts:
        rows += evaluation_rows(args)
    if "knn" in args.parts:
        rows += knn_rows(args)
    if "transfer" in args.parts:
        rows += transfer_rows(args)
    body += (
        markdown_table(rows)
        + f"\n\nWall time of the script: {time.perf_counter() - start:.0f} s.\n"
    )
    emit(f"GPU throughput and memory on {args.device}", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
