"""One training batch before the study: a setup that cannot fit in memory is one line, not a trial.

A search spends an equal budget of trials on every method. A failure caused by the *setup* —
the protocol's batch of images at its image size does not fit in the device's memory — would
fail every trial the same way and spend the budget on nothing; so before a study starts, one
forward and backward pass of one batch of the protocol's size (the paper-default trial's
batch) runs with the method's default hyper-parameters. Out of memory there is one line naming
the batch size, the image size, the embedding size and the protocol keys to lower. Failures
caused by a trial's own sampled parameters (a larger batch size, a NaN) still fail that trial
only and count against the budget: they are results of the search, not mistakes of the setup.
"""

from __future__ import annotations

import torch

from dmlbench.data.base import Split
from dmlbench.engine.train import _collate, image_channels, init_model, training_targets
from dmlbench.errors import DmlbenchError
from dmlbench.methods import method_for
from dmlbench.protocol import Protocol

# The texts torch and the C allocator use for an allocation that failed (CPU and CUDA).
OOM_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory")
# oneDNN (CPU convolutions) says only this when its working memory cannot be allocated: seen
# under an address-space limit, where the same batch failed in torch's allocator on another
# run. It can have other causes, so the one line quotes it.
ONEDNN_TEXT = "could not create a primitive"


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation failure (``torch.OutOfMemoryError`` on CUDA, a
    ``RuntimeError`` from the CPU allocator, numpy's ``MemoryError``)."""
    if isinstance(err, torch.OutOfMemoryError | MemoryError):
        return True
    texts = (*OOM_TEXTS, ONEDNN_TEXT)
    return isinstance(err, RuntimeError) and any(t in str(err).lower() for t in texts)


def out_of_memory_message(protocol: Protocol, batch_size: int, device: torch.device) -> str:
    """The one line: every protocol key that sizes one step's memory, the head's included (a
    large ``model.embedding_size`` fails here as surely as a large batch)."""
    size = protocol.data.params.get("image_size", "its")
    return (
        f"one training batch of {batch_size} images ({size} px, {protocol.model.backbone}, "
        f"{protocol.model.embedding_size}-d embeddings) does not fit in the memory of {device}; "
        f"lower batch.size, data.params.image_size or model.embedding_size in protocol "
        f"{protocol.name}, or use a device with more memory"
    )


def check_one_batch(
    protocol: Protocol, method_name: str, split: Split, device: torch.device, seed: int = 0
) -> None:
    """Run one training step's forward and backward pass; raise one line if memory runs out.

    Raises:
        DmlbenchError: the batch does not fit in memory (the message names the keys to lower).
    """
    method = method_for(protocol, method_name, None, split.num_classes)
    sampler = method.batch_sampler(
        split, protocol.batch.size, protocol.batch.samples_per_class, seed
    )
    sampler.set_epoch(0)
    indices = next(iter(sampler))
    try:
        model = init_model(protocol, method, image_channels(split), seed).to(device)
        loss_fn = method.build_loss().to(device)
        x = _collate([split.images[i] for i in indices]).to(device)
        loss = loss_fn(model(x).float(), training_targets(split)[indices].to(device))
        loss.backward()
    except Exception as err:
        if is_out_of_memory(err):
            line = out_of_memory_message(protocol, len(indices), device)
            if ONEDNN_TEXT in str(err).lower():
                line += f" (oneDNN: {ONEDNN_TEXT}, its word for a failed allocation)"
            raise DmlbenchError(line) from None
        raise
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
