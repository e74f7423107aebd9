"""DDP pieces on CPU: 2 processes on gloo (spawned, a file rendezvous: no port to race for).

Checks, inside the spawned ranks: the distributed P×K sampler gives every rank disjoint,
class-balanced shards whose union is the single-process batch, for two epochs; gathered
embeddings carry gradients, and under DDP (which averages parameter gradients) a loss on the
gathered batch gives the single-process gradient of the whole global batch.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from dmlbench.data.samplers import ClassBalancedBatchSampler
from dmlbench.engine import distributed
from dmlbench.errors import DmlbenchError

WORLD = 2
LABELS = np.repeat(np.arange(10), 6)  # 10 classes × 6 images
BATCH, K, SEED = 8, 2, 7


def loss_fn(emb: torch.Tensor) -> torch.Tensor:
    """A non-linear loss coupling all rows (pairwise similarities), like the DML losses."""
    sim = emb @ emb.t()
    return torch.logsumexp(sim, dim=1).mean() + (emb**3).sum() / emb.shape[0]


def _rank_main(rank: int, rendezvous: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    info = distributed.init_from_env("gloo", init_method=f"file://{rendezvous}")
    assert (info.rank, info.world_size, distributed.current().rank) == (rank, WORLD, rank)
    try:
        sampler = distributed.DistributedClassBalancedSampler(LABELS, BATCH, K, SEED, rank, WORLD)
        shards = []
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            shards.append(list(sampler))
        gathered: list[object] = [None] * WORLD
        torch.distributed.all_gather_object(gathered, shards)

        torch.manual_seed(0)
        model = torch.nn.Linear(5, 3)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        x_all = torch.randn(WORLD * 4, 5, generator=torch.Generator().manual_seed(1))
        local = ddp(x_all[rank * 4 : (rank + 1) * 4])
        emb = distributed.all_gather_with_grad(local)
        labels = distributed.all_gather_tensor(torch.arange(4) + 10 * rank)
        loss_fn(emb).backward()
        del ddp  # holds the process group: released before the group is destroyed
        if rank == 0:
            assert model.weight.grad is not None and model.bias.grad is not None
            torch.save(
                {
                    "shards": gathered,
                    "grad": model.weight.grad.clone(),
                    "bias_grad": model.bias.grad.clone(),
                    "labels": labels,
                    "emb": emb.detach(),
                },
                out,
            )
    finally:
        distributed.cleanup()


@pytest.fixture(scope="module")
def ranks_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder: Path = tmp_path_factory.mktemp("ddp")
    out, rendezvous = folder / "rank0.pt", folder / "rendezvous"
    mp.spawn(_rank_main, args=(str(rendezvous), str(out)), nprocs=WORLD, join=True)
    return torch.load(out, weights_only=False)


def test_ranks_get_disjoint_shards_of_the_global_batch(ranks_output: dict[str, object]) -> None:
    shards = ranks_output["shards"]
    reference = ClassBalancedBatchSampler(LABELS, BATCH, K, SEED)
    for epoch in (0, 1):
        reference.set_epoch(epoch)
        expected = list(reference)
        per_rank = [shards[r][epoch] for r in range(WORLD)]  # type: ignore[index]
        assert len(per_rank[0]) == len(expected) > 1
        for step, batch in enumerate(expected):
            parts = [per_rank[r][step] for r in range(WORLD)]
            assert parts[0] + parts[1] == batch  # rank order, nothing lost or added
            assert not set(parts[0]) & set(parts[1])  # disjoint
            for part in parts:  # whole classes: K images of each class on one rank
                assert len(part) == BATCH // WORLD
                assert set(np.bincount(LABELS[part]).tolist()) <= {0, K}
    assert shards[0][0] != shards[0][1]  # type: ignore[index]  # epochs differ


def test_gathered_embeddings_give_the_single_process_gradient(
    ranks_output: dict[str, object],
) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    x_all = torch.randn(WORLD * 4, 5, generator=torch.Generator().manual_seed(1))
    emb = model(x_all)
    loss_fn(emb).backward()
    assert torch.allclose(ranks_output["emb"], emb.detach(), atol=1e-6)  # type: ignore[arg-type]
    assert torch.allclose(ranks_output["grad"], model.weight.grad, atol=1e-5)  # type: ignore[arg-type]
    assert torch.allclose(ranks_output["bias_grad"], model.bias.grad, atol=1e-5)  # type: ignore[arg-type]
    assert ranks_output["labels"].tolist() == [0, 1, 2, 3, 10, 11, 12, 13]  # type: ignore[attr-defined]


def test_single_process_is_unchanged() -> None:
    x = torch.randn(3, 2, requires_grad=True)
    assert distributed.all_gather_with_grad(x) is x
    assert not distributed.init_from_env().is_distributed
    sharded = distributed.DistributedClassBalancedSampler(LABELS, BATCH, K, SEED, 0, 1)
    assert list(sharded) == list(ClassBalancedBatchSampler(LABELS, BATCH, K, SEED))


def test_uneven_split_is_refused() -> None:
    with pytest.raises(DmlbenchError, match="cannot be shared by 3 processes"):
        distributed.DistributedClassBalancedSampler(LABELS, BATCH, K, SEED, 0, 3)
    with pytest.raises(DmlbenchError, match="outside"):
        distributed.ShardedBatchSampler([], 2, 2)


def test_faiss_index_falls_back_to_cpu() -> None:
    from dmlbench.metrics.retrieval import faiss_flat_l2

    index = faiss_flat_l2(4)
    index.add(np.eye(4, dtype=np.float32))
    _, nearest = index.search(np.eye(4, dtype=np.float32), 1)
    assert nearest[:, 0].tolist() == [0, 1, 2, 3]
