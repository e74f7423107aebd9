"""Images/s of one training epoch through ``engine.train.train`` against a bare PyTorch loop.

``python -m dmlbench.perf.train`` loads a protocol (default ``glyphs-mini``) with one epoch
and, for each method (default: the protocol's), runs in the same process, taking turns:

- harness: ``dmlbench.engine.train.train(protocol, method, split, seed, progress=False)`` on the
  training split, the way ``dmlbench run`` trains (sampler, DataLoader, non-finite check,
  progress bar object, scheduler, epoch hook plumbing);
- floor: a minimal hand-written loop on the same things: the model from ``init_model`` (same
  seed, so the same weights), the method's loss, the same optimizer and parameter groups
  (``make_optimizer`` / ``param_groups``), the batches of the same sampler for the same seed
  and epoch, and the split's own uint8 image tensor indexed directly — forward, loss,
  zero_grad, backward, step.

Both count images from the first batch to the end of the epoch (the harness's
``images_per_second``; model construction is outside both), after an untimed warm-up of three
batches. The two compute the same steps, so their mean losses must be equal: the table shows
both as a check. The ratio is harness / floor (target ≥ 0.9): the two take turns (floor
first, then harness first, ...) and the ratio is the median over the ``--repeats``
back-to-back pairs (at least 3), each run under about the same load; the images/s shown are
each side's median epoch, with min and max beside.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

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

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol


def one_epoch(protocol: Protocol, batch_size: int | None = None) -> Protocol:
    """The protocol with one epoch (and another batch size when given)."""
    update: dict[str, Any] = {"optim": protocol.optim.model_copy(update={"epochs": 1})}
    if batch_size is not None:
        update["batch"] = protocol.batch.model_copy(update={"size": batch_size})
    return protocol.model_copy(update=update)


def harness_epoch(protocol: Protocol, name: str, split: Any, seed: int) -> tuple[float, float]:
    """(images/s, mean loss) of one epoch of ``dmlbench.engine.train.train``."""
    from dmlbench.engine.train import train
    from dmlbench.methods import method_for

    method = method_for(protocol, name, None, _classes(split))
    result = train(protocol, method, split, seed, progress=False)
    return result.images_per_second, float(result.curve[-1]["loss"])


def floor_epoch(
    protocol: Protocol, name: str, split: Any, seed: int, max_batches: int | None = None
) -> tuple[float, float]:
    """(images/s, mean loss) of the same epoch in a bare loop (its first batches only when
    ``max_batches`` is given: a warm-up)."""
    from dmlbench.engine.train import (
        image_channels,
        init_model,
        make_optimizer,
        network_groups,
        training_targets,
    )
    from dmlbench.methods import method_for

    method = method_for(protocol, name, None, _classes(split))
    model = init_model(protocol, method, image_channels(split), seed)
    loss_fn = method.build_loss()
    groups = network_groups(protocol, model) + method.param_groups(loss_fn, protocol.optim.lr)
    opt = make_optimizer(protocol, groups)
    sampler = method.batch_sampler(
        split, protocol.batch.size, protocol.batch.samples_per_class, seed
    )
    sampler.set_epoch(0)
    images, targets = split.images.images, training_targets(split)
    model.train()
    loss_fn.train()
    start, count, total = time.perf_counter(), 0, 0.0
    batches = list(sampler)[:max_batches]
    for indices in batches:
        idx = torch.as_tensor(indices)
        x = images[idx].float().div_(255.0)
        loss = loss_fn(model(x), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
        count += len(indices)
    seconds = time.perf_counter() - start
    return count / seconds, total / len(batches)


def _classes(split: Any) -> int:
    return len(np.unique(split.labels))


def main(argv: Sequence[str] | None = None) -> int:
    from dmlbench.data import load_data
    from dmlbench.protocol import load_protocol

    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--protocol", default="glyphs-mini")
    parser.add_argument("--method", action="append", help="methods (default: the protocol's)")
    rounds_option(parser, "--repeats", 3, "epochs timed per side, ≥ 3 (median, min, max shown)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-images", type=int, default=None, help="use only the first N training images"
    )
    parser.add_argument("--batch-size", type=int, default=None, help="instead of the protocol's")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (default: torch's); 1 is steadier on a busy machine",
    )
    add_common_options(parser)
    args = parser.parse_args(argv)
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    protocol = one_epoch(load_protocol(args.protocol), args.batch_size)
    split = load_data(protocol).train
    if args.max_images is not None:
        from dmlbench.data.base import ArrayImages, Split

        keep = np.arange(min(args.max_images, len(split)))
        split = Split(ArrayImages(split.images.images[keep].numpy()), split.labels[keep])
    info = machine_info()
    rows: list[Row] = []
    for name in args.method or protocol.methods:
        floor_epoch(protocol, name, split, args.seed, max_batches=3)  # warm-up, not timed
        rates: dict[str, list[float]] = {"harness": [], "floor": []}
        loss = {"harness": float("nan"), "floor": float("nan")}
        sides = [("floor", floor_epoch), ("harness", harness_epoch)]
        for repeat in range(args.repeats):  # floor, harness, harness, floor, ...
            for side, fn in sides if repeat % 2 == 0 else sides[::-1]:
                rate, loss[side] = fn(protocol, name, split, args.seed)
                rates[side].append(rate)
        pairs = [h / f for h, f in zip(rates["harness"], rates["floor"], strict=True)]
        rows.append(
            Row.timed(
                f"{name}: images/s, median epoch (ratio: median over back-to-back pairs)",
                Spread.of(rates["harness"]),
                Spread.of(rates["floor"]),
                float(np.median(pairs)),
            )
        )
        rows.append(
            Row(f"{name}: harness / floor of each pair", " ".join(f"{p:.2f}" for p in pairs))
        )
        rows.append(
            Row(
                f"{name}: mean loss of the epoch (same steps: equal)",
                loss["harness"],
                loss["floor"],
                digits=6,
            )
        )
    body = (
        f"{args.protocol}, one epoch of {len(split)} training images, batch "
        f"{protocol.batch.size}, {torch.get_num_threads()} torch thread(s); ours = "
        "dmlbench.engine.train.train, peer = the bare loop (target ratio ≥ 0.9):\n\n"
        + markdown_table(rows)
        + "\n"
    )
    emit("dmlbench.perf.train", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
