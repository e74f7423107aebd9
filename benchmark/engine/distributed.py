"""One trial on several GPUs (DDP under ``torchrun``): process group, sharded P×K batches,
gathering embeddings with their gradient, and a guarded faiss-GPU index.

Everything here is a no-op for a single process, so CPU runs are unchanged.

- :func:`init_from_env` reads torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (and
  ``MASTER_ADDR``/``MASTER_PORT``) and starts the process group (NCCL on CUDA, else gloo).
- :class:`ShardedBatchSampler` splits each batch of a batch sampler into ``world_size``
  contiguous, disjoint shards; every rank builds the same inner sampler from (seed, epoch), so
  together the ranks see exactly the batches a single process would. With
  :class:`DistributedClassBalancedSampler` (P×K batches) a shard is P / world_size whole
  classes, so each rank's shard is itself class-balanced.
- :func:`all_gather_with_grad` concatenates every rank's embeddings in rank order. Its backward
  sums the incoming gradients over ranks (all-reduce) and returns this rank's slice. If every
  rank computes the same loss on the gathered batch, rank r's embeddings thus receive
  ``world_size × ∂L/∂x_r``, and DDP's averaging of parameter gradients over ranks yields exactly
  the gradient of the single-process loss on the whole global batch. (All-reduce rather than
  reduce-scatter, so it also runs on gloo.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from dmlbench.data.samplers import ClassBalancedBatchSampler
from dmlbench.errors import DmlbenchError


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_env(backend: str | None = None, init_method: str | None = None) -> DistInfo:
    """Start the process group from torchrun's environment; single process when absent.

    ``init_method`` (e.g. ``file:///tmp/rendezvous``) replaces torchrun's ``MASTER_ADDR`` and
    ``MASTER_PORT``: a file rendezvous needs no free port, so nothing can take it first.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend, init_method=init_method, rank=rank, world_size=world_size
        )
    return DistInfo(rank, world_size, local_rank)


def current() -> DistInfo:
    """Rank and world size of the running process group (or a single process)."""
    if dist.is_available() and dist.is_initialized():
        return DistInfo(
            dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))
        )
    return DistInfo()


def cleanup() -> None:
    """Leave the process group together: every rank waits for the others before tearing down.

    Without the barrier a rank that finishes first destroys its gloo pairs while the other
    still reads from them, and gloo's I/O thread ends the process with ``std::terminate``
    ("terminate called without an active exception", SIGABRT). Callers drop every object that
    holds the group (a ``DistributedDataParallel`` wrapper) before calling this.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


class ShardedBatchSampler:
    """This rank's contiguous shard of every batch of ``inner`` (a batch sampler).

    Args:
        inner: yields lists of indices of equal length, in an order set by (seed, epoch).
        rank, world_size: this process and the number of processes.
        group: a shard boundary never splits a run of ``group`` consecutive indices (the K
            images of one class in a P×K batch); the batch length must be a multiple of
            ``group × world_size``.
    """

    def __init__(self, inner: Any, rank: int, world_size: int, group: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise DmlbenchError(f"rank {rank} is outside 0..{world_size - 1}")
        self.inner, self.rank, self.world_size, self.group = inner, rank, world_size, group

    def set_epoch(self, epoch: int) -> None:
        self.inner.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.inner:
            if len(batch) % (self.group * self.world_size):
                raise DmlbenchError(
                    f"a batch of {len(batch)} cannot be split into {self.world_size} shards of "
                    f"whole groups of {self.group}; choose a batch size that divides evenly"
                )
            size = len(batch) // self.world_size
            yield list(batch[self.rank * size : (self.rank + 1) * size])


class DistributedClassBalancedSampler(ShardedBatchSampler):
    """One global P×K batch per step (P = batch_size // K classes), split by classes over ranks.

    Every rank sees P / world_size whole classes × K images; the union over ranks is the batch
    :class:`~dmlbench.data.samplers.ClassBalancedBatchSampler` yields for the same (seed, epoch).
    """

    def __init__(
        self,
        labels: np.ndarray,
        batch_size: int,
        samples_per_class: int,
        seed: int,
        rank: int,
        world_size: int,
    ) -> None:
        inner = ClassBalancedBatchSampler(labels, batch_size, samples_per_class, seed)
        if inner.classes_per_batch % world_size:
            raise DmlbenchError(
                f"{inner.classes_per_batch} classes per batch cannot be shared by {world_size} "
                "processes; make batch_size / samples_per_class a multiple of the process count"
            )
        super().__init__(inner, rank, world_size, group=samples_per_class)


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.rank, ctx.world = dist.get_rank(), dist.get_world_size()
        sizes = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(ctx.world)]
        dist.all_gather(sizes, torch.tensor([x.shape[0]], device=x.device))
        ctx.sizes = [int(s.item()) for s in sizes]
        if len(set(ctx.sizes)) != 1:
            raise DmlbenchError(f"all_gather_with_grad needs equal shards, got sizes {ctx.sizes}")
        parts = [torch.empty_like(x) for _ in range(ctx.world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start : start + ctx.sizes[ctx.rank]]


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Every rank's ``x`` concatenated in rank order; gradients reach this rank's ``x``.

    A single process gets ``x`` back unchanged.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    return _GatherWithGrad.apply(x)


def all_gather_tensor(x: torch.Tensor) -> torch.Tensor:
    """Every rank's ``x`` (labels, indices) concatenated in rank order, without gradient."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)
