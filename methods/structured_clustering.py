"""Structured clustering via facility location (Oh Song et al., "Deep Metric Learning via
Facility Location", CVPR 2017, §3–4; as written in Fehervari et al., arXiv 2019, eq. 10–12).

With Euclidean distances (not squared) D_ij between batch embeddings:

* facility location score of a set S of medoids: F(X, S) = −Σ_i min_{j∈S} D_ij;
* oracle score (eq. 10): F̃(X) = Σ_k max_{j: y_j = k} F(X_{y=k}, {j}), the best medoid per class;
* cluster assignment (eq. 12): g(S)[i] = argmin_{j∈S} D_ij, a medoid being its own cluster;
* loss (eq. 11): [ max_{|S| = K} {F(X, S) + γ (1 − NMI(g(S), Y))} − F̃(X) ]₊, K = number of
  classes in the batch.

The maximum is found by loss-augmented greedy inference, as in the authors' TensorFlow code
(``tf.contrib.losses.metric_learning.cluster_loss``): start from S = ∅ and K times add the point
j that maximises F(X, S ∪ {j}) + γ (1 − NMI(g(S ∪ {j}), Y)) (first index on ties). The choice is
discrete and made on detached distances; the gradient flows through F(X, S*) for the chosen S*
and through F̃ (through the chosen medoid of each class).

Cost: each greedy step scores all B candidates at once in O(B²): F from the running minimum
distance, NMI from counts, as the current contingency table minus what a candidate moves out
of each cell plus what it moves into the new cluster (row-grouped sums of the B × B "moves"
matrix, no sort). The K steps are inherently sequential (step k's candidates depend on the
medoids chosen before), so one loss evaluation is K rounds of about a dozen B × B tensor
operations, O(K·B²): on a CPU that round count, not arithmetic, is the floor.

Choices:
    * NMI = 2 I / (H(g) + H(Y)) (arithmetic mean, scikit-learn's current default and the one
      dmlbench's evaluation uses); NMI = 1 when both partitions are a single cluster. The TF
      code called scikit-learn, whose default then was the geometric mean √(H H).
    * No PAM refinement of the greedy medoids: the TF code (``enable_pam_finetuning``) and
      Fehervari et al. follow the greedy pass with medoid swaps; this is the greedy inference
      alone. Fehervari et al. train this method with RMSprop; here the protocol's optimizer is used.
    * Sums, not means, over samples (the paper's F); γ = 1 as in Fehervari et al.'s ClusterLoss.
    * pytorch-metric-learning has no facility-location loss, so it is written here.
    * Degenerate batches: one class → K = 1, the greedy medoid is the class medoid and the
      loss is 0; all singletons → every point is a medoid, F = F̃ = 0, NMI = 1, loss 0; equal
      embeddings → all distances 0 and the loss is γ(1 − NMI) ≥ 0, with zero gradient.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import torch
from torch import nn

from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import pairwise_distances


def _xlogx_table(n: int, device: torch.device) -> torch.Tensor:
    """x log x for the integers 0..n (counts index it), float64, 0 log 0 = 0."""
    x = torch.arange(n + 1, dtype=torch.float64, device=device)
    return x * x.clamp_min(1.0).log()


def _occupied_cells(key: torch.Tensor, num_keys: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(compact cell index of each point, count of each occupied cell), without a sort."""
    counts = torch.bincount(key, minlength=num_keys)
    occupied = counts > 0
    compact = torch.cumsum(occupied, dim=0) - 1
    return compact[key], counts[occupied]


def _nmi_of_candidates(
    moved: torch.Tensor, assign: torch.Tensor, y: torch.Tensor, k: int, xlogx: torch.Tensor
) -> torch.Tensor:
    """NMI against ``y`` of every candidate partition at greedy step ``k``, shape (B,).

    Candidate j moves the points of column j of ``moved`` (B, B) into the new cluster k and
    leaves the others in ``assign``. Each count the NMI needs is the current one minus what j
    moves out plus what it moves in: what every candidate moves out of each occupied (cluster,
    class) cell and each cluster, and into each class of the new cluster, is a row-grouped sum
    of ``moved`` (O(B²) per step). Same formula as the tests' ``nmi_many``, without a
    per-candidate sort of B × B keys. ``xlogx`` is the table of x log x for 0..B.
    """
    n, num_classes = len(y), int(y.max()) + 1
    n_clusters = max(k, 1)
    cell, cells = _occupied_cells(assign * num_classes + y, n_clusters * num_classes)
    clusters = torch.bincount(assign, minlength=n_clusters)
    bounds = [0, len(cells), len(cells) + n_clusters, len(cells) + n_clusters + num_classes]
    m = moved.to(torch.float32)  # index_add_ is vectorised for floats; counts ≤ B are exact
    out = torch.zeros(bounds[3], n, dtype=torch.float32, device=m.device)
    for (lo, hi), group in zip(itertools.pairwise(bounds), (cell, assign, y), strict=True):
        out[lo:hi].index_add_(0, group, m)
    counts = out.long()
    counts[: bounds[2]].neg_().add_(torch.cat([cells, clusters])[:, None])  # what stays
    values = xlogx.index_select(0, counts.view(-1)).view(counts.shape)
    joint = values[: bounds[1]].sum(dim=0) + values[bounds[2] :].sum(dim=0)
    s_a = values[bounds[1] : bounds[2]].sum(dim=0) + xlogx[counts[bounds[2] :].sum(dim=0)]
    s_y = xlogx[torch.bincount(y)].sum()
    nlogn = float(xlogx[n])
    denominator = 2.0 * nlogn - s_a - s_y
    nmi = 2.0 * (joint - s_a - s_y + nlogn) / denominator.clamp_min(1e-12)
    return torch.where(denominator > 1e-9, nmi, 1.0).clamp(0.0, 1.0)


def greedy_augmented_medoids(
    d: torch.Tensor, y: torch.Tensor, num_classes: int, gamma: float
) -> tuple[list[int], torch.Tensor, float]:
    """Greedy loss-augmented inference: (medoids S*, assignment g(S*), NMI(g(S*), Y)).

    ``y`` holds class indices 0..num_classes − 1. Step k scores all B candidates at once
    (facility location from the running minimum distance, NMI from moved counts, see
    :func:`_nmi_of_candidates`); the K steps are sequential, each choice depending on the
    previous ones.
    """
    n = d.shape[0]
    cur_min = torch.full((n,), float("inf"), dtype=d.dtype, device=d.device)
    cur_assign = torch.zeros(n, dtype=torch.long, device=d.device)
    chosen: list[int] = []
    taken = torch.zeros(n, dtype=torch.bool, device=d.device)
    nmi = torch.ones(n, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.bool, device=d.device)
    xlogx = _xlogx_table(n, d.device)
    for k in range(num_classes):
        new_min = torch.minimum(cur_min[:, None], d)  # column j: distances to S ∪ {j}
        moved = (d < cur_min[:, None]) | eye  # (i, j): i joins j's cluster if j is added
        nmi = _nmi_of_candidates(moved, cur_assign, y, k, xlogx)
        score = -new_min.sum(dim=0).double() + gamma * (1.0 - nmi)
        j = int(score.masked_fill(taken, float("-inf")).argmax())
        chosen.append(j)
        taken[j] = True
        cur_min = new_min[:, j]
        cur_assign = torch.where(moved[:, j], k, cur_assign)
    return chosen, cur_assign, float(nmi[chosen[-1]])


class StructuredClusteringLoss(nn.Module):
    def __init__(self, gamma: float) -> None:
        super().__init__()
        self.gamma = gamma

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _, y = torch.unique(labels, return_inverse=True)
        num_classes = int(y.max()) + 1
        d = pairwise_distances(embeddings)
        chosen, _, nmi = greedy_augmented_medoids(d.detach(), y, num_classes, self.gamma)
        score_pred = -d[:, chosen].min(dim=1).values.sum()
        same = y[:, None] == y[None, :]
        medoid_scores = -(d * same).sum(dim=0)  # F(X_{y=k}, {j}) for j of class k
        members = y[None, :] == torch.arange(num_classes, device=y.device)[:, None]
        score_gt = medoid_scores.masked_fill(~members, float("-inf")).max(dim=1).values.sum()
        return torch.relu(score_pred + self.gamma * (1.0 - nmi) - score_gt)


@register_method("structured-clustering")
class StructuredClustering(Method):
    paper = "Oh Song et al., Deep Metric Learning via Facility Location, CVPR 2017"
    defaults: ClassVar[HParams] = {"gamma": 1.0}
    defaults_source = (
        "Fehervari et al. 2019 eq. 10-12; γ = 1 and 5 images per class from Fehervari et al.'s "
        "code (models/clusterloss.py margin_multiplier=1.0, train_clusterloss.py --batch-k 5)"
    )
    samples_per_class = 5

    def build_loss(self) -> nn.Module:
        return StructuredClusteringLoss(float(self.hparams["gamma"]))

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "gamma": trial.suggest_float("gamma", 0.1, 10.0, log=True),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [2, 4, 5, 8, 16]),
        }
