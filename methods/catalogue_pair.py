"""Catalogue, pair-based losses: every term compares two embeddings of the batch.

None of these losses owns parameters, so none has a learning-rate multiplier. Batches are P×K
with 4 images per class by default (the trainer's default for pair losses; the search tunes it).

``intra-pair-variance`` is the objective of Yu & Tao (ICCV 2019): the tuplet margin loss plus
the intra-pair variance term. The variance term alone (pytorch-metric-learning's
``IntraPairVarianceLoss``) only equalises similarities and can be minimised by a collapsed
embedding, so it is not registered alone (``pml:IntraPairVarianceLoss`` still runs it).
``ntxent``, ``tuplet-margin`` and ``intra-pair-variance`` build the O(B²) modules of
``ntxent.py``, ``tuplet_margin.py`` and ``intra_pair_variance.py`` (same value; the library's
losses build a |positive pairs| × |negative pairs| matrix, about 1 s per step at 180 × 512);
``threshold-consistent-margin``, ``snr-contrastive`` and ``histogram`` build those of
``threshold_consistent_margin.py``, ``snr_contrastive.py`` and ``histogram.py`` (the library
gathers both embeddings of every pair, builds their B × B × D differences, or lists every
triplet: 0.15–0.4 s per step).
Instance loss (Zheng et al., ACM TOMM 2020) is not registered: with class labels,
pytorch-metric-learning's ``InstanceLoss`` takes the class index as the *column* of the batch
similarity matrix, so its target for a sample of class c is the c-th sample of the batch,
whatever that sample's class (a perfect embedding of a P×K batch scores ≈ 32.7 and the same
batch interleaved ≈ 0.69). The paper's loss is a softmax classifier shared by an image and a
text branch; its single-modality form is a softmax over learned class weights, which
``proxy-softmax`` already is. ``pml:InstanceLoss`` is refused with this reason.
``dynamic-soft-margin`` fixes a library bug: ``DynamicSoftMarginLoss`` updates its running
histogram from the loss values *with* their graph, so the second batch backpropagates into the
first batch's freed graph and fails. Zhang & Rusinkiewicz (ICCV 2019, §3) treat the CDF weights
as statistics of past batches; the histogram is updated from detached values here.
``threshold-consistent-margin`` is registered alone, as the library ships it; Zhang et al.
(ICLR 2024) add it as a regulariser to a base loss, which this entry does not do.
"""

from __future__ import annotations

import torch
from pytorch_metric_learning import losses

from dmlbench.methods import (
    histogram,
    intra_pair_variance,
    ntxent,
    snr_contrastive,
    threshold_consistent_margin,
    tuplet_margin,
)
from dmlbench.methods._catalogue import SPC, CatalogueEntry, Float, register_entry

PML_DEFAULT = "PML default ({what}); no learnable parameters"


class DetachedHistogramDSM(losses.DynamicSoftMarginLoss):
    """``DynamicSoftMarginLoss`` whose running histogram does not keep the batch's graph, and
    whose last bin takes the triplets violated by more than its lower node.

    The library's ``num_bins`` nodes span [min_val, −min_val − delta]; a d = d_ap − d_an at or
    beyond the last node (1.6 by default, reachable on the unit sphere where d < 2) indexed one
    node past the end and crashed training. Such values are counted in the last node and
    weighted by the full CDF, as the paper's CDF of an out-of-range value is; every value in
    range is binned and weighted exactly as the library does.
    """

    def update_histogram(self, data: torch.Tensor) -> None:
        top = self.min_val + self.delta * (self.num_bins - 1)
        super().update_histogram(data.detach().clamp(self.min_val, top - 1e-6 * self.delta))

    def weigh_loss(self, data: torch.Tensor) -> torch.Tensor:
        cdf = torch.cumsum(self.hist_, 0)
        idx = torch.floor((data - self.min_val) / self.delta).to(dtype=torch.long)
        return cdf[idx.clamp(0, self.num_bins - 1)] * data


ENTRIES = [
    CatalogueEntry(
        name="circle",
        pml="CircleLoss",
        paper="Sun et al., Circle Loss: A Unified Perspective of Pair Similarity Optimization, "
        "CVPR 2020",
        defaults={"m": 0.4, "gamma": 80.0},
        defaults_source="Sun et al. 2020, fine-grained image retrieval experiments (m = 0.4, "
        "γ = 80; also PML's default); no learnable parameters",
        space={
            "m": Float(0.1, 0.5, log=False),
            "gamma": Float(16.0, 256.0),
            "samples_per_class": SPC,
        },
    ),
    CatalogueEntry(
        name="supcon",
        pml="SupConLoss",
        paper="Khosla et al., Supervised Contrastive Learning, NeurIPS 2020",
        defaults={"temperature": 0.1},
        defaults_source="Khosla et al. 2020 (τ = 0.1, L_out of eq. 2; also PML's default); no "
        "learnable parameters",
        space={"temperature": Float(0.02, 0.5), "samples_per_class": SPC},
    ),
    CatalogueEntry(
        name="ntxent",
        pml="NTXentLoss",
        paper="Chen et al., A Simple Framework for Contrastive Learning of Visual "
        "Representations (NT-Xent), ICML 2020; every same-class pair is a positive",
        defaults={"temperature": 0.07},
        defaults_source=PML_DEFAULT.format(what="τ = 0.07"),
        space={"temperature": Float(0.02, 0.5), "samples_per_class": SPC},
        build=ntxent.build,
    ),
    CatalogueEntry(
        name="tuplet-margin",
        pml="TupletMarginLoss",
        paper="Yu & Tao, Deep Metric Learning with Tuplet Margin Loss, ICCV 2019",
        defaults={"margin": 5.73, "scale": 64.0},
        defaults_source=PML_DEFAULT.format(what="β = 5.73° = 0.1 rad, s = 64"),
        space={"margin": Float(0.5, 20.0), "scale": Float(8.0, 128.0), "samples_per_class": SPC},
        build=tuplet_margin.build,
    ),
    CatalogueEntry(
        name="intra-pair-variance",
        pml="IntraPairVarianceLoss",
        paper="Yu & Tao, Deep Metric Learning with Tuplet Margin Loss (tuplet margin + "
        "intra-pair variance), ICCV 2019",
        defaults={
            "pos_eps": 0.01,
            "neg_eps": 0.01,
            "tuplet_margin": 5.73,
            "tuplet_scale": 64.0,
            "ipv_weight": 0.5,
        },
        defaults_source="ε = 0.01 as PML's documentation says the paper uses; tuplet β = 5.73°, "
        "s = 64 and the variance weight 0.5 from PML's documented example; no learnable "
        "parameters",
        space={
            "pos_eps": Float(0.001, 0.1),
            "neg_eps": Float(0.001, 0.1),
            "tuplet_margin": Float(0.5, 20.0),
            "ipv_weight": Float(0.05, 2.0),
            "samples_per_class": SPC,
        },
        extra=("tuplet_margin", "tuplet_scale", "ipv_weight"),
        build=intra_pair_variance.build,
    ),
    CatalogueEntry(
        name="generalized-lifted",
        pml="GeneralizedLiftedStructureLoss",
        paper="Hermans et al., In Defense of the Triplet Loss for Person Re-Identification "
        "(generalized lifted structure), arXiv 2017",
        defaults={"neg_margin": 1.0, "pos_margin": 0.0},
        defaults_source=PML_DEFAULT.format(what="negative margin 1, positive margin 0"),
        space={"neg_margin": Float(0.2, 2.0), "samples_per_class": SPC},
    ),
    CatalogueEntry(
        name="snr-contrastive",
        pml="SignalToNoiseRatioContrastiveLoss",
        paper="Yuan et al., Signal-To-Noise Ratio: A Robust Distance Metric for Deep Metric "
        "Learning, CVPR 2019",
        defaults={"pos_margin": 0.0, "neg_margin": 1.0},
        defaults_source=PML_DEFAULT.format(what="contrastive margins 0 and 1 on SNR distances"),
        space={"neg_margin": Float(0.2, 2.0), "samples_per_class": SPC},
        build=snr_contrastive.build,
        docs=(
            "SNR contrastive loss (Yuan et al., CVPR 2019; pytorch-metric-learning "
            "SignalToNoiseRatioContrastiveLoss): contrastive loss on the SNR distance "
            "var(h_j − h_i) / var(h_i). Differs from the paper: the distance is taken on "
            "L2-normalised embeddings (the library's distance default), the positive and the "
            "negative terms are each averaged over their non-zero terms and the two means added "
            "(the paper averages all pairs together), and the paper's zero-mean regulariser on "
            "the features is not included."
        ),
    ),
    CatalogueEntry(
        name="nca",
        pml="NCALoss",
        paper="Goldberger et al., Neighbourhood Components Analysis, NeurIPS 2004",
        defaults={"softmax_scale": 1.0},
        defaults_source=PML_DEFAULT.format(what="softmax scale 1"),
        space={"softmax_scale": Float(0.25, 32.0), "samples_per_class": SPC},
    ),
    CatalogueEntry(
        name="histogram",
        pml="HistogramLoss",
        paper="Ustinova & Lempitsky, Learning Deep Embeddings with Histogram Loss, NeurIPS 2016",
        defaults={"n_bins": 100},
        defaults_source=PML_DEFAULT.format(what="100 bins, Δ = 0.02"),
        space={"samples_per_class": SPC},
        build=histogram.build,
        docs=(
            "Histogram loss (Ustinova & Lempitsky, NeurIPS 2016; pytorch-metric-learning "
            "HistogramLoss): Σ_r h⁻_r Φ⁺_r over linearly interpolated histograms of cosine "
            "similarities on n_bins + 1 nodes in [−1, 1]. Differs from the paper: the library "
            "takes its pairs from (anchor, positive, negative) triplets, so a negative pair of "
            "two samples that both lack a positive in the batch is dropped (none in P×K batches "
            "with K ≥ 2); its bin nodes are computed in float32 (~5e-7 relative)."
        ),
    ),
    CatalogueEntry(
        name="threshold-consistent-margin",
        pml="ThresholdConsistentMarginLoss",
        paper="Zhang et al., Threshold-Consistent Margin Loss for Open-World Deep Metric "
        "Learning, ICLR 2024",
        defaults={
            "lambda_plus": 1.0,
            "lambda_minus": 1.0,
            "margin_plus": 0.9,
            "margin_minus": 0.5,
        },
        defaults_source=PML_DEFAULT.format(what="λ+ = λ− = 1, m+ = 0.9, m− = 0.5")
        + "; alone, without the paper's base loss",
        space={
            "margin_plus": Float(0.6, 0.99, log=False),
            "margin_minus": Float(0.1, 0.7, log=False),
            "samples_per_class": SPC,
        },
        build=threshold_consistent_margin.build,
    ),
    CatalogueEntry(
        name="dynamic-soft-margin",
        pml="DynamicSoftMarginLoss",
        paper="Zhang & Rusinkiewicz, Learning Local Descriptors with a CDF-Based Dynamic Soft "
        "Margin, ICCV 2019",
        defaults={"min_val": -2.0, "num_bins": 10, "momentum": 0.01},
        defaults_source=PML_DEFAULT.format(what="min_val −2, 10 bins, momentum 0.01")
        + "; histogram updated from detached values (library bug fixed)",
        space={"momentum": Float(0.001, 0.1), "samples_per_class": SPC},
        loss_cls=DetachedHistogramDSM,
        docs=(
            "Dynamic soft margin (Zhang & Rusinkiewicz, ICCV 2019; pytorch-metric-learning "
            "DynamicSoftMarginLoss, running histogram detached): d = d_ap − d_an for every "
            "triplet of the batch, a running histogram of d (momentum) and the loss mean(Φ(d)·d) "
            "with Φ the histogram's CDF at d's bin held constant, so ∂L/∂d is the CDF as in the "
            "paper. The value Φ(d)·d and the use of every triplet (the paper: each matching "
            "pair's hardest negative) are the library's. Known library bug, not fixed here: a "
            "triplet with d ≥ 1.6 (min_val −2, 10 bins) indexes past the histogram's end and "
            "raises (an xfail test records it)."
        ),
    ),
]

METHODS_BY_NAME = {e.name: register_entry(e) for e in ENTRIES}
