"""The training loop: one protocol, one method, one seed → a trained embedding network.

Seeding covers python, numpy, torch and the data order (the batch sampler's order depends on
(seed, epoch) only), so the same seed on the same machine gives the same numbers. The device
is the CPU unless CUDA is available and asked for; mixed precision is used only on CUDA.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dmlbench.data.base import Split, uint8_batches
from dmlbench.engine import progress as progress_lines
from dmlbench.engine.checkpoint import (
    Progress,
    TrainingInterrupted,
    interrupt_guard,
    load_checkpoint,
    save_checkpoint,
)
from dmlbench.engine.tracking import NullRun, RunLog
from dmlbench.errors import DmlbenchError, NonFiniteLossError, PluginLossError
from dmlbench.methods import Method
from dmlbench.models import build_model
from dmlbench.options import Accel
from dmlbench.protocol import Protocol
from dmlbench.records import PIXELS, PRETRAINED

EpochHook = Callable[[int, nn.Module], dict[str, float]]


@dataclass
class TrainResult:
    model: nn.Module
    loss_module: nn.Module
    curve: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    train_seconds: float = 0.0
    images_per_second: float = 0.0


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(name: str = "auto") -> torch.device:
    """The device to train on; a device that does not exist here is one line, before any work
    (a CUDA request without a driver used to fail the first search trial and cost the budget)."""
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        from dmlbench.engine.distributed import current

        return torch.device("cuda", current().local_rank)  # torchrun: one GPU per rank
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise DmlbenchError(f"--device {name}: not a device (cpu, cuda, cuda:N or auto)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DmlbenchError(f"--device {name}: no CUDA device is available here; use cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DmlbenchError(
                f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here"
            )
        if device.index is not None:
            # The process's current device is the run's: what follows it without being told
            # (the faiss k-NN index of the evaluation) lands on this GPU, not on GPU 0.
            torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise DmlbenchError(f"--device {name}: only cpu, cuda, cuda:N and auto are supported")
    return device


def _collate(batch: Any) -> torch.Tensor:
    return batch if isinstance(batch, torch.Tensor) else torch.stack(list(batch))


def image_channels(split: Split) -> int:
    return int(split.images[0].shape[0])


def init_model(protocol: Protocol, method: Method | None, in_channels: int, seed: int) -> nn.Module:
    """The embedding network as initialised for ``seed`` (also the untrained baseline)."""
    seed_everything(seed)
    if method is not None:
        custom = method.build_model(protocol, in_channels)
        if custom is not None:
            return on_memory_format(protocol, custom)
    layer_norm = bool(method and method.feature_layer_norm)
    return on_memory_format(
        protocol, build_model(protocol.model, in_channels, feature_layer_norm=layer_norm)
    )


def baseline_model(protocol: Protocol, name: str, in_channels: int, seed: int) -> nn.Module:
    """The network a no-learning row embeds the test images with.

    ``pixels``: none (the images flattened); ``untrained``: the network as initialised for
    ``seed``, random weights throughout even where the protocol starts from a trunk;
    ``pretrained``: the trunk's pooled features, without the embedding head, as the papers
    report their ImageNet backbone before fine-tuning.
    """
    if name == PIXELS:
        return nn.Flatten()
    if name == PRETRAINED:
        if protocol.model.pretrained is None:
            raise DmlbenchError(f"protocol {protocol.name} starts from no weights: no {name} row")
        backbone: nn.Module = init_model(protocol, None, in_channels, seed).backbone  # type: ignore[assignment]
        return backbone
    random = protocol.model.model_copy(update={"pretrained": None})
    return init_model(protocol.model_copy(update={"model": random}), None, in_channels, seed)


def on_memory_format(protocol: Protocol, model: nn.Module) -> nn.Module:
    """``model`` in the protocol's memory format: NHWC where ``model.channels_last`` says so.

    Applied wherever a network is built (training, the untrained row, a kept model rebuilt),
    so that every forward pass of a protocol runs the same kernels.
    """
    if protocol.model.channels_last:
        return model.to(memory_format=torch.channels_last)
    return model


def network_groups(protocol: Protocol, model: nn.Module) -> list[dict[str, Any]]:
    """The network's trainable parameters as optimizer groups: one group, or, where the
    protocol sets ``optim.backbone_lr``, the parameters of every module named ``backbone``
    (a pretrained trunk, each learner's in an ensemble) at that rate and the rest (the
    embedding head) at ``optim.lr``. Fine-tuning often moves a pretrained trunk more slowly
    than the freshly initialised head, so that the head's first large gradients do not wreck
    what the trunk learned."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    rate = protocol.optim.backbone_lr
    if rate is None:
        return [{"params": [p for _, p in params]}]
    trunk = [p for n, p in params if "backbone" in n.split(".")]
    if not trunk:
        raise DmlbenchError(
            f"optim.backbone_lr: protocol {protocol.name}'s network has no module named 'backbone'"
        )
    head = [p for n, p in params if "backbone" not in n.split(".")]
    return [{"params": trunk, "lr": rate}, {"params": head}]


def make_optimizer(protocol: Protocol, groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
    o = protocol.optim
    if o.name == "adam":
        return torch.optim.Adam(groups, lr=o.lr, weight_decay=o.weight_decay)
    if o.name == "adamw":
        return torch.optim.AdamW(groups, lr=o.lr, weight_decay=o.weight_decay)
    if o.name == "sgd":
        return torch.optim.SGD(groups, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
    return torch.optim.RMSprop(groups, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)


def make_scheduler(protocol: Protocol, opt: torch.optim.Optimizer) -> Any:
    o = protocol.optim
    if o.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=o.epochs)
    if o.schedule == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=o.step_epochs, gamma=o.step_gamma)
    return None


def train(
    protocol: Protocol,
    method: Method,
    split: Split,
    seed: int,
    *,
    device: torch.device | str = "cpu",
    max_steps: int | None = None,
    epochs: int | None = None,
    on_epoch_end: EpochHook | None = None,
    progress: bool = True,
    checkpoint: Path | None = None,
    accel: Accel | None = None,
    track: RunLog | None = None,
    label: str | None = None,
) -> TrainResult:
    """Train ``method`` on ``split`` under ``protocol`` and return the model and its curve.

    Args:
        max_steps: stop after this many steps (smoke tests); recorded as an override.
        epochs: stop after this many epochs of the protocol's schedule (the schedule itself
            still spans ``protocol.optim.epochs``): the model equals the snapshot a full run
            has after that epoch, which is how the best epoch chosen on validation is used.
        on_epoch_end: validation hook called after every epoch with (epoch, model); the
            metrics it returns are appended to the curve (search uses them for pruning).
        checkpoint: file written after every epoch and on SIGINT/SIGTERM; when it exists at
            the start, training resumes from it (same final numbers as an uninterrupted run).
        accel: data-loader workers and mixed precision (the memory format and torch.compile
            are the protocol's: ``model.channels_last``, ``model.compile``).
        track: where each epoch's curve point goes (an experiment tracker's run); it only
            receives values already computed, so it cannot move a number.
        label: what progress calls this run (default ``<method> seed <seed>``).

    Progress: tqdm bars on a terminal; otherwise (a log file, a batch job) one plain line per
    finished epoch with the loss, the time spent and the ETA of this run.

    Under ``torchrun`` (:mod:`dmlbench.engine.distributed`) the model is wrapped in DDP, each
    rank trains on its shard of every global batch, and the loss sees the embeddings of the
    whole global batch (gathered with their gradient), so a step equals the single-process step.

    Raises:
        NonFiniteLossError: the loss became NaN or Inf (the message names the step).
        TrainingInterrupted: SIGINT/SIGTERM; the checkpoint was written first.
    """
    from tqdm.auto import tqdm

    run = _setup(protocol, method, split, seed, torch.device(device), accel or Accel())
    if checkpoint is not None and checkpoint.is_file():
        run.state = load_checkpoint(checkpoint, run.model, run.loss_fn, run.opt, run.sched)
    n_epochs = protocol.optim.epochs if epochs is None else min(epochs, protocol.optim.epochs)
    epoch_len = min(len(run.sampler), protocol.optim.steps_per_epoch or len(run.sampler))
    total = n_epochs * epoch_len if max_steps is None else min(n_epochs * epoch_len, max_steps)
    shown = progress and run.dist.is_main
    bars = shown and progress_lines.bars_on_terminal()
    bar = tqdm(
        total=total,
        initial=run.state.steps,
        desc=method.name,
        disable=not bars,
        leave=False,
        unit="step",
    )
    report = _EpochReport(
        label or f"{method.name} seed {seed}", n_epochs, total, run.state.steps,
        lines=shown and not bars, track=track or NullRun(),
    )  # fmt: skip
    start, images = report.start, 0
    try:
        with interrupt_guard() as stop:
            while run.state.epoch < n_epochs and run.state.steps < total:
                images += _epoch(run, split, seed, total, epoch_len, bar, stop, checkpoint)
                if run.state.steps >= total and run.state.batch < epoch_len:
                    # max_steps ended a partial epoch: report it, without scheduler/hook
                    loss_so_far = run.state.running_loss / max(run.state.running_n, 1)
                    run.state.curve.append({"epoch": float(run.state.epoch), "loss": loss_so_far})
                    report(run.state.curve[-1], run.state.steps)
                    break
                _end_epoch(run, on_epoch_end, checkpoint)
                report(run.state.curve[-1], run.state.steps)
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    return TrainResult(
        model=run.model,
        loss_module=run.loss_fn,
        curve=run.state.curve,
        steps=run.state.steps,
        train_seconds=seconds,
        images_per_second=images / max(seconds, 1e-9),
    )


@dataclass
class _EpochReport:
    """After each epoch: its curve point to the tracker and, off a terminal, one line.

    The ETA is this run's: the steps left at the rate of the steps taken in this process (a
    resumed run does not count the steps it inherited from its checkpoint).
    """

    label: str
    n_epochs: int
    total_steps: int
    initial_steps: int
    lines: bool
    track: RunLog
    start: float = field(default_factory=time.perf_counter)

    def __call__(self, point: dict[str, float], steps: int) -> None:
        epoch = int(point["epoch"])
        self.track.scalars({k: v for k, v in point.items() if k != "epoch"}, epoch)
        if not self.lines:
            return
        elapsed = time.perf_counter() - self.start
        left = progress_lines.eta(
            elapsed, steps - self.initial_steps, self.total_steps - self.initial_steps
        )
        scores = "".join(f", {k} {v:.4f}" for k, v in point.items() if k not in ("epoch", "loss"))
        progress_lines.line(
            f"  {self.label} epoch {epoch + 1}/{self.n_epochs}: loss {point['loss']:.4f}{scores}; "
            f"{progress_lines.clock(elapsed)} elapsed, ETA {progress_lines.clock(left)}"
        )


@dataclass
class _Run:
    """Everything one training run holds between steps (what a checkpoint saves, and more)."""

    model: nn.Module
    loss_fn: nn.Module
    opt: torch.optim.Optimizer
    sched: Any
    step: _Stepper
    sampler: Any
    targets: torch.Tensor
    device: torch.device
    accel: Accel
    dist: Any
    state: Progress = field(default_factory=Progress)

    def save(self, checkpoint: Path | None) -> None:
        if checkpoint is not None and self.dist.is_main:
            save_checkpoint(checkpoint, self.state, self.model, self.loss_fn, self.opt, self.sched)


def _setup(
    protocol: Protocol,
    method: Method,
    split: Split,
    seed: int,
    device: torch.device,
    accel: Accel,
) -> _Run:
    """Model (seeded), loss, optimizer groups, scheduler and sampler, in a fixed order: the
    order of the random draws is part of what makes a seed reproduce its numbers."""
    from dmlbench.engine import distributed

    dist_info = distributed.current()
    model = init_model(protocol, method, image_channels(split), seed).to(device)
    wrapped: nn.Module = model  # the result (and every evaluation) keeps the plain model
    if dist_info.is_distributed:
        wrapped = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    loss_fn = method.build_loss().to(device)
    groups = network_groups(protocol, model) + method.param_groups(loss_fn, protocol.optim.lr)
    opt = make_optimizer(protocol, groups)
    sched = make_scheduler(protocol, opt)
    step = _Stepper(
        forward=torch.compile(wrapped) if protocol.model.compile else wrapped,  # type: ignore[arg-type]
        loss_fn=loss_fn,
        opt=opt,
        device=device,
        accel=accel,
        channels_last=protocol.model.channels_last,
    )
    sampler = method.batch_sampler(
        split, protocol.batch.size, protocol.batch.samples_per_class, seed
    )
    if dist_info.is_distributed:
        m = protocol.batch.samples_per_class or int(method.hparams["samples_per_class"])
        sampler = distributed.ShardedBatchSampler(
            sampler, dist_info.rank, dist_info.world_size, group=m
        )
    return _Run(
        model, loss_fn, opt, sched, step, sampler, training_targets(split), device, accel, dist_info
    )


def _epoch(
    run: _Run,
    split: Split,
    seed: int,
    total: int,
    epoch_len: int,
    bar: Any,
    stop: Any,
    checkpoint: Path | None,
) -> int:
    """The steps of one epoch (from where a resumed run stopped inside it); the images seen."""
    from dmlbench.data.cache import seed_worker

    state, accel = run.state, run.accel
    run.model.train()
    run.loss_fn.train()
    run.sampler.set_epoch(state.epoch)
    if hasattr(split.images, "set_epoch"):  # augmentation seeded by (seed, epoch)
        split.images.set_epoch(state.epoch, seed)
    batches = list(run.sampler)[:epoch_len][state.batch :]  # resume inside an epoch
    # uint8 batches (a quarter of the bytes) cross to the device from pinned memory and are
    # converted to float there, by the dataset's own conversion: the same bits as converting
    # them in the workers, on the CPU too (dmlbench.data.base.Uint8Batches).
    raw = uint8_batches(split.images)
    loader = torch.utils.data.DataLoader(
        split.images if raw is None else raw,
        batch_sampler=batches,
        collate_fn=_collate,
        num_workers=accel.num_workers,
        worker_init_fn=seed_worker if accel.num_workers else None,
        generator=torch.Generator().manual_seed(seed * 100_003 + state.epoch),
        pin_memory=run.device.type == "cuda",
    )
    images = 0
    for indices, x in zip(batches, loader, strict=True):
        if state.steps >= total:
            break
        value = run.step(x, run.targets[indices], None if raw is None else raw.to_float)
        if not np.isfinite(value):
            raise NonFiniteLossError(state.steps, value)
        state.steps += 1
        state.batch += 1
        state.running_loss += value
        state.running_n += 1
        images += len(indices) * run.dist.world_size
        bar.update(1)
        bar.set_postfix(epoch=state.epoch, loss=f"{value:.4f}")
        if stop.requested:
            run.save(checkpoint)
            saved = "the checkpoint is saved: " if checkpoint is not None else ""
            raise TrainingInterrupted(
                f"interrupted at step {state.steps} (epoch {state.epoch}); "
                f"{saved}run the same command to resume"
            )
    return images


def _end_epoch(run: _Run, on_epoch_end: EpochHook | None, checkpoint: Path | None) -> None:
    """Scheduler step, validation hook, curve point, checkpoint: once per full epoch."""
    state = run.state
    if run.sched is not None:
        run.sched.step()
    point = {"epoch": float(state.epoch), "loss": state.running_loss / max(state.running_n, 1)}
    if on_epoch_end is not None:
        point.update(on_epoch_end(state.epoch, run.model))
    state.curve.append(point)
    state.epoch, state.batch = state.epoch + 1, 0
    state.running_loss, state.running_n = 0.0, 0
    run.save(checkpoint)


@dataclass
class _Stepper:
    """One optimisation step: forward (DDP/compile/AMP as configured), loss, backward."""

    forward: nn.Module
    loss_fn: nn.Module
    opt: torch.optim.Optimizer
    device: torch.device
    accel: Accel
    channels_last: bool = False

    def __post_init__(self) -> None:
        precision = self.accel.precision(self.device)
        self.use_amp = precision != "fp32"
        self.amp_dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        self.scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def __call__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        to_float: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> float:
        """Returns the loss value; a non-finite loss is returned without stepping.

        ``to_float``: ``x`` is a uint8 batch, converted by it once on the device.
        """
        from dmlbench.engine import distributed

        x, y = x.to(self.device, non_blocking=True), y.to(self.device)
        if to_float is not None:
            x = to_float(x)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.use_amp):
            emb = self.forward(x)
        emb = distributed.all_gather_with_grad(emb.float())  # no-op in one process
        loss = self._loss(emb, distributed.all_gather_tensor(y))
        value = float(loss.detach())
        if np.isfinite(value):
            if not loss.requires_grad:
                raise PluginLossError(f"{self._name()} returned {_what(loss)}; {LOSS_CONTRACT}")
            self.opt.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        return value

    def _loss(self, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of one batch, once shown to be one floating-point number.

        A plugin's loss that raises is one line naming it and the exception (``--debug``
        shows the traceback); dmlbench's own losses, and out-of-memory errors, raise as they
        are (a search counts an out-of-memory trial against its budget by its type).
        """
        try:
            loss = self.loss_fn(emb, y)
        except (torch.OutOfMemoryError, MemoryError, KeyboardInterrupt, DmlbenchError):
            raise
        except (Exception, SystemExit) as err:
            if type(self.loss_fn).__module__.startswith(OWN_MODULES):
                raise
            first = (str(err).strip().splitlines() or [""])[0]
            raise PluginLossError(
                f"{self._name()} raised {type(err).__name__}: {first[:300]}"
            ) from err
        if not torch.is_tensor(loss) or loss.numel() != 1 or not loss.is_floating_point():
            raise PluginLossError(f"{self._name()} returned {_what(loss)}; {LOSS_CONTRACT}")
        return loss

    def _name(self) -> str:
        cls = type(self.loss_fn)
        return f"the loss {cls.__name__} (module {cls.__module__})"


# A loss from these modules is dmlbench's or a library's: its exceptions keep their traceback.
OWN_MODULES = ("dmlbench.", "pytorch_metric_learning.", "torch.")
LOSS_CONTRACT = (
    "a method's loss must return one floating-point number as a tensor, computed from the "
    "embeddings (with a gradient)"
)


def _what(loss: object) -> str:
    """What a loss returned, in words (for :class:`PluginLossError`)."""
    if not torch.is_tensor(loss):
        return f"a {type(loss).__name__}, not a tensor"
    if loss.numel() != 1:
        return f"a tensor of shape {tuple(loss.shape)}, not one number"
    if not loss.is_floating_point():
        return f"a {loss.dtype} tensor, not a floating-point one"
    return "a number without a gradient (detached, or not computed from the embeddings)"


def training_targets(split: Split) -> torch.Tensor:
    """Class ids remapped to 0..C-1 (proxies index them), or float label vectors."""
    if split.label_kind == "class":
        _, targets = np.unique(split.labels, return_inverse=True)
        return torch.as_tensor(targets.reshape(-1), dtype=torch.long)
    return torch.as_tensor(np.asarray(split.labels), dtype=torch.float32)


@torch.no_grad()
def embed(
    model: nn.Module, split: Split, device: torch.device | str = "cpu", batch_size: int = 256
) -> np.ndarray:
    """Embeddings (N, d) of a split, in order, with the model in eval mode."""
    device = torch.device(device)
    model.eval()
    batches = [
        list(range(i, min(i + batch_size, len(split)))) for i in range(0, len(split), batch_size)
    ]
    loader = torch.utils.data.DataLoader(split.images, batch_sampler=batches, collate_fn=_collate)
    out = [model(x.to(device)).float().cpu() for x in loader]
    return torch.cat(out).numpy()
