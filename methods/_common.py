"""Small tensor helpers shared by several losses."""

from __future__ import annotations

import torch


def pairwise_sq_distances(x: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances (B, B), clamped at 0 (the matmul form can dip below)."""
    sq = (x * x).sum(dim=1)
    d = sq[:, None] + sq[None, :] - 2.0 * (x @ x.t())
    return d.clamp_min(0.0)


def pairwise_distances(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Euclidean distances (B, B) with a gradient that stays finite on the diagonal."""
    d2 = pairwise_sq_distances(x)
    zero = d2 <= eps
    d = torch.sqrt(d2.masked_fill(zero, 1.0))
    return d.masked_fill(zero, 0.0)


def label_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks (B, B): same-label pairs without the diagonal, and different-label pairs."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


def zero_loss(embeddings: torch.Tensor) -> torch.Tensor:
    """A zero that keeps the graph, for batches with nothing to learn from."""
    return embeddings.sum() * 0.0
