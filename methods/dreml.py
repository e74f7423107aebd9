"""DREML: deep randomized ensembles for metric learning (Xuan, Souvenir & Pless, ECCV 2018;
Fehervari et al. §2.10 and §4.1).

L learners; learner l sees the training classes through a random grouping m_l: {0..C−1} →
{0..D−1} into D meta-classes and is trained to separate meta-classes only. Each learner is a
full embedding network (backbone + head, ``dmlbench.models.build_model``) with its own
D-dimensional embedding, and the ensemble's embedding is the concatenation of the L learners'
(size L·D). Following Fehervari et al. §4.1 ("we used NCA loss", L = 12, D = 12, embedding
144), each learner's loss is Proxy-NCA over its D meta-classes (``methods/proxy_nca.py``:
normalised, scaled proxies, negatives-only denominator); the loss is the mean over learners of
the batch mean, so learners do not interact (their parameters are disjoint).

Choices:
    * Per-learner embedding size = D (Fehervari et al.: 144 = 12 × 12; DREML's learners output
      D dimensions). The protocol's ``embedding_size`` is therefore not used: DREML's
      embedding is L·D wide, as in Fehervari et al.'s comparison, and reports should say so.
    * Grouping: for each learner a random permutation of the C classes, class at position i
      going to meta-class i mod D, so meta-classes differ in size by at most one class (the
      DREML code shuffles a balanced assignment the same way). It is drawn from torch's global
      RNG when the loss is built, which the trainer has seeded, and kept as a buffer.
    * L and D are hyper-parameters (paper defaults 12 and 12); the search tunes D and the
      proxy settings, not L, whose cost grows linearly on a CPU.
    * pytorch-metric-learning has no ensemble or meta-class loss; the per-learner loss is
      ours for the reason given in proxy_nca.py.
    * D < 2 (no negative meta-class) or D > C (empty meta-classes) is an error; degenerate
      batches are fine (the negatives are proxies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.methods._base import HParams, Method, register_method
from dmlbench.methods.proxy_nca import nca_excluding_positive
from dmlbench.models import build_model

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol


class Ensemble(nn.Module):
    """L embedding networks side by side; the embedding is their concatenation."""

    def __init__(self, learners: list[nn.Module]) -> None:
        super().__init__()
        self.learners = nn.ModuleList(learners)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([learner(x) for learner in self.learners], dim=1)


def random_meta_classes(num_classes: int, learners: int, meta_classes: int) -> torch.Tensor:
    """(L, C) meta-class of every class for every learner, balanced, from torch's RNG."""
    groups = torch.empty(learners, num_classes, dtype=torch.long)
    for row in groups:
        row[torch.randperm(num_classes)] = torch.arange(num_classes) % meta_classes
    return groups


class DremlLoss(nn.Module):
    def __init__(self, num_classes: int, learners: int, meta_classes: int, scale: float) -> None:
        super().__init__()
        if not 2 <= meta_classes <= num_classes:
            raise DmlbenchError(
                f"dreml: meta_classes must be in [2, {num_classes}] (training classes), "
                f"got {meta_classes}"
            )
        self.learners, self.meta_classes, self.scale = learners, meta_classes, scale
        self.register_buffer("groups", random_meta_classes(num_classes, learners, meta_classes))
        self.proxies = nn.Parameter(torch.randn(learners, meta_classes, meta_classes))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        width = self.learners * self.meta_classes
        if embeddings.shape[1] != width:
            raise DmlbenchError(
                f"dreml: embeddings have {embeddings.shape[1]} dims, expected L·D = {width} "
                "(the model must be the method's ensemble)"
            )
        meta = self.get_buffer("groups")[:, labels]  # (L, B) meta-class of every sample
        chunks = embeddings.split(self.meta_classes, dim=1)
        per_learner = [
            nca_excluding_positive(x, self.proxies[i], meta[i], self.scale).mean()
            for i, x in enumerate(chunks)
        ]
        return torch.stack(per_learner).mean()


@register_method("dreml")
class Dreml(Method):
    paper = "Xuan et al., Deep Randomized Ensembles for Metric Learning, ECCV 2018"
    defaults: ClassVar[HParams] = {
        "learners": 12,
        "meta_classes": 12,
        "scale": 3.0,
        "proxy_lr_mult": 100.0,
    }
    defaults_source = (
        "Fehervari et al. 2019 §4.1 (NCA loss, L = 12, D = 12, embedding 144); scale 3 and "
        "proxy_lr_mult 100 as proxy-nca, whose loss each learner uses (Fehervari et al.'s "
        "train_proxy.py: --lr-proxynca 1e-3 with --lr-embedding 1e-5)"
    )
    samples_per_class = 2
    lr_mult_key = "proxy_lr_mult"

    def build_model(self, protocol: Protocol, in_channels: int) -> nn.Module:
        spec = protocol.model.model_copy(
            update={"embedding_size": int(self.hparams["meta_classes"])}
        )
        return Ensemble(
            [build_model(spec, in_channels) for _ in range(int(self.hparams["learners"]))]
        )

    def build_loss(self) -> nn.Module:
        h = self.hparams
        return DremlLoss(
            self.num_classes, int(h["learners"]), int(h["meta_classes"]), float(h["scale"])
        )

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return {
            "meta_classes": trial.suggest_categorical("meta_classes", [4, 8, 12, 16]),
            "scale": trial.suggest_float("scale", 1.0, 8.0, log=True),
            "proxy_lr_mult": trial.suggest_float("proxy_lr_mult", 1.0, 1000.0, log=True),
        }
