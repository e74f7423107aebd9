"""Catalogue, proxy and classifier-weight losses: the loss owns one or more vectors per class.

These losses learn class representatives (proxies, sub-centres, classifier weights), so each
entry declares ``proxy_lr_mult`` and its source. Only Proxy-Anchor's and SoftTriple's authors
state one (100×, in their code); the face-recognition papers train their class weights with the
network at one rate and no source states a multiplier for them, so each such entry takes the
value its own search selected on glyphs-mini (v3: 8 trials, seed 0, ``dmlbench search
--protocol glyphs-mini --method <name> --threads 1``), rounded to the nearest power of ten,
and says so with the selected value (the search tunes it over [1, 1000]). Where that value
leaves the class weights where they started under cub200's optimiser (Adam at 1e-5 for 2,880
steps: manifold, p2sgrad and large-margin-softmax, whose searches chose ×1-×5 at glyphs-mini's
1e-3),
the default is raised to the smallest power of ten at which they move (mean cosine between
start and end below 0.99 on the synthetic problem of ``tests/methods/test_lr_multipliers.py``):
a default that trains against fixed random class weights under the real protocols is the bias
the multipliers exist to remove. Batches are P×K
with 2 images per class by default: the papers sample batches at random, and 2 per class is
the class-balanced batch closest to that (the search tunes it).

Two entries differ from the library class on purpose:

- ``soft-triple`` adds the centre regulariser of Qian et al. (ICCV 2019, §3.3, weight τ = 0.2
  in the authors' code): pytorch-metric-learning's ``SoftTripleLoss`` omits it, so on its own
  it is not the paper's objective.
- ``manifold`` gives every training class its own proxy and assigns each sample to its class's
  proxy (the library's ``indices_tuple`` meta-classes): ``ManifoldLoss`` takes no labels and
  otherwise assigns samples to proxies at random.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dmlbench.methods import manifold
from dmlbench.methods._base import HParams
from dmlbench.methods._catalogue import SPC, CatalogueEntry, Choice, Float, register_entry

LR_SPACE = Float(1.0, 1000.0)
NO_MULT = (
    "no source states a learning-rate multiplier for {what}; proxy_lr_mult = {value:g}, the "
    "value its own glyphs-mini v3 search selected ({selected:.3g}; 8 trials, seed 0) rounded "
    "to the nearest power of ten"
)
RAISED = (
    "; raised to ×{value:g}, the smallest power of ten at which {what} move under cub200's "
    "optimiser (Adam 1e-5, 2,880 steps; mean cosine start-end {cosine} at ×{below:g})"
)


class SoftTripleRegularised(nn.Module):
    """SoftTriple loss + τ × the centre regulariser (Qian et al., ICCV 2019, eq. 11, §3.3).

    ``R = Σ_c Σ_{t<s} sqrt(2 + 1e-5 − 2 <w_c^t, w_c^s>) / (C K (K − 1))`` over each class's K
    normalised centres; the 1e-5 keeps the square root differentiable when two centres merge,
    as in the authors' code.
    """

    def __init__(self, loss: nn.Module, tau: float) -> None:
        super().__init__()
        self.loss = loss
        self.tau = tau
        self.classes: int = loss.num_classes  # type: ignore[assignment]
        self.centers: int = loss.centers_per_class  # type: ignore[assignment]

    def regulariser(self) -> torch.Tensor:
        c, k = self.classes, self.centers
        fc: torch.Tensor = self.loss.fc  # type: ignore[assignment]
        w = F.normalize(fc, dim=0).t().reshape(c, k, -1)
        sim = w @ w.transpose(1, 2)
        iu = torch.triu_indices(k, k, 1, device=w.device)
        return torch.sqrt(2.0 + 1e-5 - 2.0 * sim[:, iu[0], iu[1]]).sum() / (c * k * (k - 1))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        value: torch.Tensor = self.loss(embeddings, labels)
        if self.tau > 0 and self.centers > 1:
            value = value + self.tau * self.regulariser()
        return value


def _soft_triple(loss: nn.Module, h: HParams) -> nn.Module:
    return SoftTripleRegularised(loss, float(h["tau"]))


def _manifold_kwargs(num_classes: int, embedding_size: int) -> dict[str, Any]:
    return {"l": embedding_size, "K": num_classes}


ENTRIES = [
    CatalogueEntry(
        name="proxy-anchor",
        pml="ProxyAnchorLoss",
        paper="Kim et al., Proxy Anchor Loss for Deep Metric Learning, CVPR 2020",
        defaults={"alpha": 32.0, "margin": 0.1, "proxy_lr_mult": 100.0},
        defaults_source="authors' official code (train.py: alpha 32, mrg 0.1; the proxies' "
        "parameter group has lr × 100, so proxy_lr_mult = 100)",
        space={
            "alpha": Float(4.0, 64.0),
            "margin": Float(0.0, 0.4, log=False),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
    CatalogueEntry(
        name="soft-triple",
        pml="SoftTripleLoss",
        paper="Qian et al., SoftTriple Loss: Deep Metric Learning Without Triplet Sampling, "
        "ICCV 2019",
        defaults={
            "la": 20.0,
            "gamma": 0.1,
            "margin": 0.01,
            "centers_per_class": 10,
            "tau": 0.2,
            "proxy_lr_mult": 100.0,
        },
        defaults_source="authors' official code (train.py: la 20, gamma 0.1, tau 0.2, margin "
        "0.01, K 10; centres at lr 1e-2 vs model 1e-4, so proxy_lr_mult = 100); the centre "
        "regulariser (§3.3) added here, PML omits it",
        space={
            "la": Float(5.0, 50.0),
            "gamma": Float(0.02, 0.5),
            "margin": Float(0.0, 0.1, log=False),
            "tau": Float(0.0, 0.5, log=False),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
        extra=("tau",),
        build=_soft_triple,
    ),
    CatalogueEntry(
        name="manifold",
        pml="ManifoldLoss",
        paper="Aziere & Todorovic, Ensemble Deep Manifold Similarity Learning using Hard "
        "Proxies, CVPR 2019",
        defaults={"lambdaC": 1.0, "alpha": 0.8, "margin": 5e-4, "proxy_lr_mult": 100.0},
        defaults_source="PML default (lambdaC 1, alpha 0.8, margin 5e-4), one proxy per "
        "training class; "
        + NO_MULT.format(what="the proxies", value=10, selected=5.46)
        + RAISED.format(value=100, what="the proxies", cosine="0.994", below=10),
        space={
            "lambdaC": Float(0.1, 10.0),
            "alpha": Float(0.5, 0.95, log=False),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=4,
        build=manifold.build,
        pml_kwargs=_manifold_kwargs,
        docs=(
            "Manifold loss (Aziere & Todorovic, CVPR 2019; pytorch-metric-learning "
            "ManifoldLoss) adapted: one proxy per training class and each sample assigned to its "
            "class's proxy (the library's meta-classes). Manifold similarities F = (1 − α)(I − "
            "αS̄)^{-1} of the random walk over samples and proxies, intrinsic loss on F's "
            "sample-to-proxy block and context loss on cosines of F's rows, each a log(1 + Σ e^x) "
            "over the proxies that violate the margin. Compared with a loop that iterates the "
            "random walk; the paper's hard-proxy estimation and ensemble are not implemented."
        ),
    ),
    CatalogueEntry(
        name="p2sgrad",
        pml="P2SGradLoss",
        paper="Zhang et al., P2SGrad: Refined Gradients for Optimizing Deep Face Models, CVPR 2019",
        defaults={"proxy_lr_mult": 10.0},
        defaults_source="no hyper-parameters (the loss is the MSE of cosines to one-hot "
        "targets, eq. 11); "
        + NO_MULT.format(what="the class weights", value=1, selected=2.68)
        + RAISED.format(value=10, what="the class weights", cosine="0.990", below=1),
        space={"proxy_lr_mult": LR_SPACE, "samples_per_class": SPC},
        samples_per_class=2,
        docs=(
            "P2SGrad (Zhang et al., CVPR 2019; pytorch-metric-learning P2SGradLoss): the mean "
            "over the N × C cosines of (cos θ_ij − 1(j = y_i))², whose gradient w.r.t. the "
            "embeddings is 2/(N·C) × eq. 11. Differs from the paper for the class weights: the "
            "library renormalises W outside the autograd graph, so its W gradient also has a "
            "radial component along each W_j (eq. 11's ∇cos θ_ij is tangential); the tangential "
            "parts agree."
        ),
    ),
    CatalogueEntry(
        name="arcface",
        pml="ArcFaceLoss",
        paper="Deng et al., ArcFace: Additive Angular Margin Loss for Deep Face Recognition, "
        "CVPR 2019",
        defaults={"margin": 28.6, "scale": 64.0, "proxy_lr_mult": 10.0},
        defaults_source="Deng et al. 2019 implementation details (s = 64, m = 0.5 rad = "
        "28.6°); "
        + NO_MULT.format(
            what="the class weights, trained with the network", value=10, selected=9.02
        ),
        space={
            "margin": Float(5.0, 45.0),
            "scale": Float(8.0, 64.0),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
    CatalogueEntry(
        name="cosface",
        pml="CosFaceLoss",
        paper="Wang et al., CosFace: Large Margin Cosine Loss for Deep Face Recognition, CVPR 2018",
        defaults={"margin": 0.35, "scale": 64.0, "proxy_lr_mult": 100.0},
        defaults_source="Wang et al. 2018 experiments (s = 64, m = 0.35); "
        + NO_MULT.format(
            what="the class weights, trained with the network", value=100, selected=123
        ),
        space={
            "margin": Float(0.05, 0.6),
            "scale": Float(8.0, 64.0),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
    CatalogueEntry(
        name="subcenter-arcface",
        pml="SubCenterArcFaceLoss",
        paper="Deng et al., Sub-center ArcFace: Boosting Face Recognition by Large-scale Noisy "
        "Web Faces, ECCV 2020",
        defaults={"margin": 28.6, "scale": 64.0, "sub_centers": 3, "proxy_lr_mult": 100.0},
        defaults_source="Deng et al. 2020 (K = 3 sub-centres, s = 64, m = 0.5 rad); "
        + NO_MULT.format(what="the sub-centres", value=100, selected=51.3),
        space={
            "margin": Float(5.0, 45.0),
            "scale": Float(8.0, 64.0),
            "sub_centers": Choice((1, 2, 3, 5)),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
    CatalogueEntry(
        name="sphereface",
        pml="SphereFaceLoss",
        paper="Liu et al., SphereFace: Deep Hypersphere Embedding for Face Recognition, CVPR 2017",
        defaults={"margin": 4, "scale": 1.0, "proxy_lr_mult": 100.0},
        defaults_source="Liu et al. 2017 (multiplicative angular margin m = 4); PML default "
        "scale 1; " + NO_MULT.format(what="the class weights", value=100, selected=281),
        space={
            "margin": Choice((1, 2, 3, 4)),
            "scale": Float(1.0, 64.0),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
    CatalogueEntry(
        name="large-margin-softmax",
        pml="LargeMarginSoftmaxLoss",
        paper="Liu et al., Large-Margin Softmax Loss for Convolutional Neural Networks, ICML 2016",
        defaults={"margin": 4, "scale": 1.0, "proxy_lr_mult": 100.0},
        defaults_source="PML default (m = 4, the largest margin Liu et al. 2016 use; scale 1); "
        + NO_MULT.format(what="the class weights", value=1, selected=1.32)
        + RAISED.format(value=100, what="the class weights", cosine="0.990", below=10),
        space={
            "margin": Choice((1, 2, 3, 4)),
            "scale": Float(1.0, 64.0),
            "proxy_lr_mult": LR_SPACE,
            "samples_per_class": SPC,
        },
        samples_per_class=2,
    ),
]

METHODS_BY_NAME = {e.name: register_entry(e) for e in ENTRIES}
