"""``dmlbench pretrain NAME``: train a trunk from its recipe (:mod:`dmlbench.models.trunks`).

Classification with pytorch-metric-learning's ``NormalizedSoftmaxLoss`` (Zhai & Wu, BMVC 2019:
a cosine classifier with a temperature, the recipe the DML comparisons' ImageNet backbones
resemble most) on the source's training classes. Each batch is drawn by a seeded generator,
shifted by a random crop of the zero-padded images, its colour channels shuffled and, for half
the batches, made grey: the boards' images are grey glyphs and colour drawings, so the trunk
must not key on colour. At one thread the weights are the same bits on every run of one machine
kind (``dmlbench pretrain NAME`` without ``--write`` says whether they are).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dmlbench.atomic import atomic_write
from dmlbench.data import DATASETS
from dmlbench.data.base import Split, cache_dir
from dmlbench.engine.train import embed, seed_everything
from dmlbench.metrics.catalogue import HITS_METRIC
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.models.backbones import create_backbone
from dmlbench.models.trunks import TrunkRecipe
from dmlbench.protocol import MetricsSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pretrained:
    """A trunk as trained: its weights, cost, and how well it retrieves the source's test
    classes (a sanity check of the trunk, not a board number)."""

    state: dict[str, torch.Tensor]
    seconds: float
    final_loss: float
    source_recall_at_1: float


def source_splits(recipe: TrunkRecipe) -> tuple[Split, Split]:
    source = DATASETS.get(recipe.data.dataset)()
    params = source.Params.model_validate(recipe.data.params)
    splits = source.load(params, None, cache_dir())
    return splits.train, splits.test


def _images(split: Split) -> torch.Tensor:
    """The split's images as one uint8 tensor (N, 3, H, W): grey sources are repeated."""
    held = getattr(split.images, "images", None)
    if held is None:
        batch = torch.stack([split.images[i] for i in range(len(split))])
        held = (batch * 255).round().to(torch.uint8)
    return held.expand(-1, 3, -1, -1) if held.shape[1] == 1 else held


def augment(batch: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    """Random crop of the padded batch, shuffled channels, grey half of the time."""
    x = batch.float().div_(255.0)
    if torch.rand(1, generator=gen).item() < 0.5:
        x = x.mean(dim=1, keepdim=True).expand(-1, 3, -1, -1)
    x = x[:, torch.randperm(3, generator=gen)]
    if pad:
        size = x.shape[-1]
        x = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        i, j = torch.randint(2 * pad + 1, (2,), generator=gen).tolist()
        x = x[:, :, i : i + size, j : j + size]
    return x.contiguous()


def pretrain(recipe: TrunkRecipe, progress: bool = True) -> Pretrained:
    """Train the trunk ``recipe`` describes; deterministic for a fixed thread count."""
    from pytorch_metric_learning.losses import NormalizedSoftmaxLoss

    train, test = source_splits(recipe)
    images = _images(train)
    labels = torch.as_tensor(np.asarray(train.labels), dtype=torch.long)
    _, labels = torch.unique(labels, return_inverse=True)
    seed_everything(recipe.seed)
    net, dim = create_backbone(recipe.backbone, None, 3)
    loss_fn = NormalizedSoftmaxLoss(int(labels.max()) + 1, dim, temperature=recipe.temperature)
    opt = torch.optim.Adam([*net.parameters(), *loss_fn.parameters()], lr=recipe.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=recipe.steps)
    gen = torch.Generator().manual_seed(recipe.seed)
    start, every = time.perf_counter(), max(recipe.steps // 10, 1)
    net.train()
    loss = torch.zeros(())
    for step in range(recipe.steps):
        idx = torch.randint(len(labels), (recipe.batch_size,), generator=gen)
        loss = loss_fn(net(augment(images[idx], recipe.pad, gen)), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if progress and (step + 1) % every == 0:
            log.warning(
                "pretrain %s: step %d/%d, loss %.3f, %.0f s",
                recipe.name, step + 1, recipe.steps, loss.item(), time.perf_counter() - start,
            )  # fmt: skip
    seconds = time.perf_counter() - start
    net.eval()
    feats = embed(net, _as_rgb(test), "cpu")
    spec = MetricsSpec(recall_at=[1], nmi=False, map_at_r=False, r_precision=False)
    r1 = embedding_metrics(feats, test.labels, spec, None, None, seed=recipe.seed)[HITS_METRIC]
    state = {k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}
    return Pretrained(state, seconds, float(loss.item()), float(r1))


def _as_rgb(split: Split) -> Split:
    from dmlbench.data.base import ArrayImages

    return Split(ArrayImages(_images(split).numpy()), split.labels)


def save_weights(state: dict[str, torch.Tensor], path: Path) -> str:
    """Write the weights atomically as safetensors; returns their SHA-256."""
    from safetensors.torch import save

    from dmlbench.models.trunks import file_sha256

    blob = save(state)
    atomic_write(path, lambda fh: fh.write(blob))
    return file_sha256(path)
