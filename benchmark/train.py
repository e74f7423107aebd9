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
from typing import Any

import numpy as np
import torch
from torch import nn

from dmlbench.data.base import Split
from dmlbench.errors import NonFiniteLossError
from dmlbench.methods import Method
from dmlbench.models import build_model
from dmlbench.protocol import Protocol

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
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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
            return custom
    layer_norm = bool(method and method.feature_layer_norm)
    return build_model(protocol.model, in_channels, feature_layer_norm=layer_norm)


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
    on_epoch_end: EpochHook | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train ``method`` on ``split`` under ``protocol`` and return the model and its curve.

    Args:
        max_steps: stop after this many steps (smoke tests); recorded as an override.
        on_epoch_end: validation hook called after every epoch with (epoch, model); the
            metrics it returns are appended to the curve (search uses them for pruning).
    """
    from tqdm.auto import tqdm

    device = torch.device(device)
    model = init_model(protocol, method, image_channels(split), seed).to(device)
    loss_fn = method.build_loss().to(device)
    groups: list[dict[str, Any]] = [{"params": [p for p in model.parameters() if p.requires_grad]}]
    groups += method.param_groups(loss_fn, protocol.optim.lr)
    opt = make_optimizer(protocol, groups)
    sched = make_scheduler(protocol, opt)

    split_targets = training_targets(split)
    sampler = method.batch_sampler(
        split, protocol.batch.size, protocol.batch.samples_per_class, seed
    )
    amp = device.type == "cuda"

    total = protocol.optim.epochs * len(sampler)
    if max_steps is not None:
        total = min(total, max_steps)
    result = TrainResult(model=model, loss_module=loss_fn)
    bar = tqdm(
        total=total, desc=method.name, disable=None if progress else True, leave=False, unit="step"
    )
    start, images = time.perf_counter(), 0
    try:
        for epoch in range(protocol.optim.epochs):
            model.train()
            loss_fn.train()
            sampler.set_epoch(epoch)
            running, n = 0.0, 0
            batches = list(sampler)  # the loader fetches exactly these, in this order
            loader = torch.utils.data.DataLoader(
                split.images, batch_sampler=batches, collate_fn=_collate
            )
            for indices, x in zip(batches, loader, strict=True):
                if result.steps >= total:
                    break
                y = split_targets[indices].to(device)
                x = x.to(device, non_blocking=True)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                    emb = model(x)
                loss = loss_fn(emb.float(), y)
                value = float(loss.detach())
                if not np.isfinite(value):
                    raise NonFiniteLossError(result.steps, value)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                result.steps += 1
                images += len(indices)
                running, n = running + value, n + 1
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{value:.4f}")
            if sched is not None:
                sched.step()
            point = {"epoch": float(epoch), "loss": running / max(n, 1)}
            if on_epoch_end is not None:
                point.update(on_epoch_end(epoch, model))
            result.curve.append(point)
            if result.steps >= total:
                break
    finally:
        bar.close()
    result.train_seconds = time.perf_counter() - start
    result.images_per_second = images / max(result.train_seconds, 1e-9)
    return result


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
