"""Prototypical networks loss (Snell et al., NeurIPS 2017; Fehervari et al. eq. 13), on P×K batches.

Each class c of the batch is an episode class: its first ``n_support`` images (in batch
order) are the support set S_c, the rest are queries. With prototypes μ_c = mean of S_c and
squared Euclidean distances d::

    L = mean over queries q of  −log( exp(−d(q, μ_{y_q})) / Σ_{c in the batch} exp(−d(q, μ_c)) )

The class-balanced P×K sampler (K = ``samples_per_class``) gives P classes × K images, so
every batch is one episode of P ways, ``n_support`` shots and K − ``n_support`` queries per
class; splitting each class's images by position keeps the split random (the sampler order
is) and deterministic given (seed, epoch). No custom batch sampler is needed.

Deliberate choices:
- d is the *squared* Euclidean distance, the one Snell et al. use (and Fehervari et al.'s
  ``PrototypeLoss``); Fehervari et al. eq. 13 writes a generic d.
- No temperature or scale: eq. 13 has none. Under ``normalize: true`` d ≤ 4, so the softmax
  is soft; this is the method as published (Snell et al. do not normalise; Fehervari et al.'s
  code neither).
- The loss averages over all queries of the batch (Fehervari et al.'s ``PrototypeLoss``).
  A class with no more than ``n_support`` images in the batch gives a prototype (a competitor
  in the softmax) but no query; a batch with no query at all gives a zero loss.
- ``n_support`` must be smaller than the images per class, or no batch would have a query: a
  clear error is raised when the method is built or its sampler is asked for such batches.
- The paper's default is half of the images per class (5 shots + 5 queries of 10). A protocol
  that fixes ``batch.samples_per_class`` K (2 in emoji-mini and icons-mini) gets that half,
  ``max(1, K // 2)``, as its default, and the search offers only shot counts below K; a
  protocol that lets the method choose keeps 5 of 10.

pytorch-metric-learning has no prototypical loss, so it is written here. Defaults
``n_support`` = 5 and 10 images per class (5 shots + 5 queries) are Fehervari et al.'s
``train_prototype.py`` (Ns = Nq = 5; they use 12 classes per episode, the batch size here
decides P).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods._common import zero_loss

if TYPE_CHECKING:
    from dmlbench.data.base import Split


class PrototypicalLoss(nn.Module):
    def __init__(self, n_support: int) -> None:
        super().__init__()
        self.n_support = n_support

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        classes, inverse = torch.unique(labels, return_inverse=True)
        same = labels[:, None] == labels[None, :]
        earlier = torch.ones_like(same).tril(diagonal=-1)
        rank = (same & earlier).sum(dim=1)  # position of each image within its class
        support = rank < self.n_support
        if support.all():
            return zero_loss(embeddings)
        member = F.one_hot(inverse, len(classes)).t().to(embeddings.dtype) * support
        prototypes = (member @ embeddings) / member.sum(dim=1, keepdim=True)
        queries = embeddings[~support]
        d = ((queries[:, None, :] - prototypes[None, :, :]) ** 2).sum(dim=2)
        return F.cross_entropy(-d, inverse[~support])


@register_method("prototypical")
class Prototypical(Method):
    paper = "Snell et al., Prototypical Networks for Few-shot Learning, NeurIPS 2017"
    defaults: ClassVar[HParams] = {"n_support": 5}
    defaults_source = "Fehervari et al. eq. 13; Fehervari et al.'s train_prototype.py (Ns = Nq = 5)"
    samples_per_class = 10

    def __init__(self, hparams: HParams | None, num_classes: int, embedding_size: int) -> None:
        super().__init__(hparams, num_classes, embedding_size)
        self._check(int(self.hparams["samples_per_class"]))

    @classmethod
    def fill_batch_defaults(cls, hparams: HParams, samples_per_class: int | None) -> HParams:
        if samples_per_class is None or "n_support" in hparams:
            return hparams
        return {**hparams, "n_support": max(1, samples_per_class // 2)}

    def _check(self, samples_per_class: int) -> None:
        n_support = int(self.hparams["n_support"])
        if not 1 <= n_support < samples_per_class:
            raise DmlbenchError(
                f"method prototypical: n_support={n_support} needs 1 <= n_support < "
                f"samples_per_class ({samples_per_class}), or batches have no queries"
            )

    def build_loss(self) -> nn.Module:
        return PrototypicalLoss(int(self.hparams["n_support"]))

    def batch_sampler(
        self, split: Split, batch_size: int, samples_per_class: int | None, seed: int
    ) -> Any:
        self._check(samples_per_class or int(self.hparams["samples_per_class"]))
        return super().batch_sampler(split, batch_size, samples_per_class, seed)

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        # Every n_support choice is below every samples_per_class choice, and below the
        # protocol's images per class where it fixes them (ExactBatchTrial says so).
        fixed = getattr(trial, "batch_samples_per_class", None)
        shots = [n for n in (1, 2, 3, 5) if fixed is None or n < fixed]
        return {
            "n_support": trial.suggest_categorical("n_support", shots),
            "samples_per_class": trial.suggest_categorical("samples_per_class", [6, 8, 10]),
        }
