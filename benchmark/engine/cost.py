"""What a protocol's run costs before it starts: steps, images, FLOPs, and hours where measured.

A researcher about to run ``cub200`` on a GPU wants to know whether that is an afternoon or a
week. Everything here is counted, not guessed: the data set's published image counts (the
``expected`` counts its loader checks), the protocol's budget (trials × folds searches, seeds
final runs, epochs, batch size), and the backbone's FLOPs per image, counted by running one
forward and backward pass under ``torch.utils.flop_counter.FlopCounterMode``. Every figure is
an upper bound on what a run does: the pruner stops trials early and a final run trains only
to the epoch its search selected.

Hours are given only for a device whose training throughput was measured for that backbone
(:data:`MEASURED`, from ``python -m dmlbench.perf.gpu``; ``reports/perf/gpu.md``): a CPU step
time says nothing about a GPU's, and FLOPs alone do not make hours (the measured harness runs far
below the card's arithmetic peak). They cover training; embedding the
validation and test images is forward-only work and is left out of the hours, not the FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from dmlbench.protocol import ModelSpec, Protocol

# Training images/s of ``engine.train.train`` (multi-similarity, batch 120, 224² crops, 512-d,
# channels-last), measured with ``python -m dmlbench.perf.gpu`` on 2026-11-26: reports/perf/gpu.md.
MEASURED: dict[str, dict[tuple[str, str], float]] = {
    "NVIDIA H200": {
        ("bn-inception", "fp32"): 2520,
        ("bn-inception", "bf16"): 2385,
        ("resnet50", "fp32"): 2484,
        ("resnet50", "bf16"): 2777,
        ("googlenet", "fp32"): 2982,
        ("googlenet", "bf16"): 2827,
    }
}


@dataclass(frozen=True)
class Work:
    """The work of one protocol's full run (every listed method, search and final runs).

    Attributes:
        train_images: images in the training split (the data set's published count).
        eval_images: images embedded to score the test split (query + gallery for In-shop).
        steps_per_epoch: optimisation steps of one epoch on the full training split.
        search_trainings: trainings per method in the search (trials × folds).
        final_runs: trainings per method on all training classes (one per seed).
        trained_images: images through forward and backward, all methods, search included.
        embedded_images: images through forward only (validation after every epoch of every
            search training, and the test split after every final run).
        gflop_train: FLOPs of one image's forward and backward pass, in 10⁹.
        gflop_embed: FLOPs of one image's forward pass, in 10⁹.
    """

    protocol: str
    backbone: str
    image_size: int
    methods: int
    train_images: int
    eval_images: int
    steps_per_epoch: int
    search_trainings: int
    final_runs: int
    trained_images: int
    embedded_images: int
    gflop_train: float
    gflop_embed: float

    @property
    def pflop(self) -> float:
        """Total work in 10¹⁵ FLOPs."""
        train = self.trained_images * self.gflop_train
        return (train + self.embedded_images * self.gflop_embed) / 1e6

    def hours(self, device: str, precision: str) -> float | None:
        """Training hours at the throughput measured on ``device``, or ``None`` if unmeasured."""
        rate = MEASURED.get(device, {}).get((self.backbone, precision))
        return None if rate is None else self.trained_images / rate / 3600

    def summary(self) -> str:
        """One line for a terminal, before the run starts (hours at ``--amp auto``: bf16)."""
        timed = [
            f"{h:.0f} h on an {device} (bf16)"
            for device in MEASURED
            if (h := self.hours(device, "bf16")) is not None
        ]
        hours = "; training time as measured: " + ", ".join(timed) if timed else ""
        return (
            f"work of {self.protocol} (upper bound: no pruning, every epoch): {self.methods} "
            f"method{_s(self.methods)} × ({self.search_trainings} search trainings + "
            f"{self.final_runs} final run{_s(self.final_runs)}) × {self.steps_per_epoch} "
            "steps/epoch; "
            f"{self.trained_images / 1e6:.1f} M "
            f"images trained, {self.embedded_images / 1e6:.1f} M embedded, {self.pflop:,.0f} "
            f"PFLOP ({self.backbone}, {self.gflop_train:.1f} GFLOP per trained image){hours}"
        )


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def known_sizes(protocol: Protocol) -> dict[str, int] | None:
    """The data set's published split sizes, or ``None`` (synthetic sets: sized by params)."""
    from dmlbench.data import DATASETS

    if protocol.data.dataset not in DATASETS:
        return None
    expected = getattr(DATASETS.get(protocol.data.dataset), "expected", None)
    return dict(expected) if expected else None


def protocol_work(
    protocol: Protocol, methods: int | None = None, seeds: int | None = None
) -> Work | None:
    """The run's work, or ``None`` when the data set has no published size.

    Args:
        methods, seeds: how many this run trains (default: the protocol's lists).
    """
    from dmlbench.data.transforms import output_size

    sizes = known_sizes(protocol)
    if sizes is None:
        return None
    n_train = sizes["train"]
    n_eval = sum(v for k, v in sizes.items() if k != "train")
    o, s = protocol.optim, protocol.search
    steps = o.steps_per_epoch or n_train // protocol.batch.size
    folds = s.validation.folds
    # k folds each hold out 1/k of the classes; one fold holds out ``fraction``.
    held_out = 1 / folds if folds > 1 else s.validation.fraction
    search_trainings = s.trials * folds
    per_training = steps * protocol.batch.size * o.epochs
    n_methods = len(protocol.methods) if methods is None else methods
    n_seeds = len(protocol.seeds) if seeds is None else seeds
    trained = n_methods * per_training * (search_trainings * (1 - held_out) + n_seeds)
    embedded = n_methods * (
        search_trainings * o.epochs * round(held_out * n_train) + n_seeds * n_eval
    )
    size = output_size(protocol.images.train) or output_size(protocol.images.test) or 224
    train_flop, embed_flop = backbone_gflop(protocol.model, size)
    return Work(
        protocol=protocol.name,
        backbone=protocol.model.backbone,
        image_size=size,
        methods=n_methods,
        train_images=n_train,
        eval_images=n_eval,
        steps_per_epoch=steps,
        search_trainings=search_trainings,
        final_runs=n_seeds,
        trained_images=math.ceil(trained),
        embedded_images=math.ceil(embedded),
        gflop_train=train_flop,
        gflop_embed=embed_flop,
    )


@cache
def backbone_gflop(model: ModelSpec, image_size: int) -> tuple[float, float]:
    """(forward + backward, forward) GFLOPs per image of the protocol's network, counted.

    Random weights (the count does not depend on them) and two images (BatchNorm needs more
    than one in training mode); the counter's total is divided by two.
    """
    from torch.utils.flop_counter import FlopCounterMode

    from dmlbench.models import build_model

    net = build_model(model.model_copy(update={"pretrained": None}), 3)
    x = torch.rand(2, 3, image_size, image_size)
    forward = FlopCounterMode(display=False)
    with forward:
        net(x)
    both = FlopCounterMode(display=False)
    with both:
        net(x).sum().backward()
    return both.get_total_flops() / 2e9, forward.get_total_flops() / 2e9


def work_table(names: list[str]) -> str:
    """The Markdown table of docs/protocols.md: one row per protocol of published size."""
    from dmlbench.protocol import load_protocol

    head = (
        "| protocol | backbone, crop | methods | steps/epoch | search trainings + final runs "
        "(per method) | images trained | images embedded | PFLOP | training hours, H200 bf16 |"
    )
    lines = [head, "|" + " --- |" * 9]
    for name in names:
        w = protocol_work(load_protocol(name))
        if w is None:
            continue
        hours = w.hours("NVIDIA H200", "bf16")
        lines.append(
            f"| {name} | {w.backbone}, {w.image_size} | {w.methods} | {w.steps_per_epoch} | "
            f"{w.search_trainings} + {w.final_runs} | {w.trained_images / 1e6:.1f} M | "
            f"{w.embedded_images / 1e6:.1f} M | {w.pflop:,.0f} | "
            f"{'—' if hours is None else f'{hours:.0f}'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from dmlbench.protocol import builtin_names

    print(work_table(builtin_names()))
