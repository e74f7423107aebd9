"""The losses rewritten from pytorch-metric-learning's, one table of cases: each B × B (or
O(B²)) module against the library's loss and against a per-pair (per-query) loop written from
its paper (tests/methods/test_catalogue.py's references), value and gradient, on every batch of
``tests/methods/_batches.py``, in float64 and float32, and once at the perf script's shape.

A case says what differs between the losses (the entry, the library's loss, the loop and its
tolerances, the perf shape); the checks are written once, so a new loss of this kind is one
more row, and every loss is held to the same tolerances. Checks only one loss has (a bin edge,
a cap the library keeps, every PNP variant) follow the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses

from dmlbench.methods import create_method
from dmlbench.methods.histogram import Histogram
from dmlbench.methods.intra_pair_variance import TupletPlusVariance
from dmlbench.methods.ntxent import NTXent
from dmlbench.methods.pnp import PNP
from dmlbench.methods.snr_contrastive import SNRContrastive
from dmlbench.methods.threshold_consistent_margin import ThresholdConsistentMargin
from dmlbench.methods.tuplet_margin import TupletMargin
from tests.methods import test_catalogue as loops
from tests.methods._batches import LABELS, batch, value_and_grad

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Tol = dict[str, Any]  # rtol and atol, as assert_close takes them

#: library equality: float64 to rounding, float32 to its precision
LIBRARY_TOL: dict[torch.dtype, Tol] = {
    torch.float64: {"rtol": 1e-9, "atol": 1e-12},
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
}
PERF_VALUE_TOL: Tol = {"rtol": 1e-9, "atol": 1e-12}
PERF_GRAD_TOL: Tol = {"rtol": 1e-7, "atol": 1e-12}
LOOP_VALUE_TOL: Tol = {"rtol": 1e-9, "atol": 1e-12}
LOOP_GRAD_TOL: Tol = {"rtol": 1e-7, "atol": 1e-10}
#: no negative, or no positive pair: these losses are 0 with a zero gradient
NO_PAIR = {"one-class", "all-singletons"}

SNR = {"pos_margin": 0.0, "neg_margin": 1.0}
HISTOGRAM = {"n_bins": 100}
IPV = {
    "pos_eps": 0.01,
    "neg_eps": 0.01,
    "tuplet_margin": 5.73,
    "tuplet_scale": 64.0,
    "ipv_weight": 0.5,
}
TEMPERATURE = 0.07
PNP_H: dict[str, Any] = {"b": 2.0, "alpha": 1.0, "anneal": 0.01, "variant": "O"}
TCM = {"lambda_plus": 1.0, "lambda_minus": 1.0, "margin_plus": 0.9, "margin_minus": 0.5}
MARGIN, SCALE = 5.73, 64.0  # tuplet-margin's defaults (degrees, scale)


@dataclass(frozen=True)
class Case:
    """One loss: its entry's name and module, how its defaults show, the library's loss, the
    loop reference for a batch (None: the loss must be 0 with a zero gradient) and its
    tolerances, and the perf shape (classes × images per class)."""

    method: str
    module: type[torch.nn.Module]
    defaults: Callable[[Any], None]
    library: Callable[[], Loss]
    loop: Callable[[str], Loss | None]
    perf: tuple[int, int]
    loop_value_tol: Tol = field(default_factory=lambda: LOOP_VALUE_TOL)
    loop_grad_tol: Tol = field(default_factory=lambda: LOOP_GRAD_TOL)

    def registered(self) -> torch.nn.Module:
        return create_method(self.method, None, num_classes=10, embedding_size=8).build_loss()


def _snr_defaults(loss: SNRContrastive) -> None:
    assert (loss.pos_margin, loss.neg_margin) == (SNR["pos_margin"], SNR["neg_margin"])


def _histogram_defaults(loss: Histogram) -> None:
    assert loss.delta == losses.HistogramLoss(**HISTOGRAM).delta


def _ipv_defaults(loss: TupletPlusVariance) -> None:
    assert loss.margin == pytest.approx(losses.TupletMarginLoss(IPV["tuplet_margin"]).margin)
    assert (loss.pos_eps, loss.neg_eps) == (IPV["pos_eps"], IPV["neg_eps"])
    assert (loss.scale, loss.weight) == (IPV["tuplet_scale"], IPV["ipv_weight"])


def _ntxent_defaults(loss: NTXent) -> None:
    assert loss.temperature == TEMPERATURE


def _pnp_defaults(loss: PNP) -> None:
    assert (loss.b, loss.alpha, loss.anneal, loss.variant) == tuple(PNP_H.values())


def _tcm_defaults(loss: ThresholdConsistentMargin) -> None:
    assert (loss.lambda_plus, loss.lambda_minus) == (TCM["lambda_plus"], TCM["lambda_minus"])
    assert (loss.margin_plus, loss.margin_minus) == (TCM["margin_plus"], TCM["margin_minus"])


def _tuplet_defaults(loss: TupletMargin) -> None:
    assert loss.margin == pytest.approx(losses.TupletMarginLoss(MARGIN, SCALE).margin)
    assert loss.scale == SCALE


def _ipv_library() -> Loss:
    """The sum of the library's tuplet-margin and w × intra-pair-variance losses."""
    tuplet = losses.TupletMarginLoss(IPV["tuplet_margin"], IPV["tuplet_scale"])
    variance = losses.IntraPairVarianceLoss(pos_eps=IPV["pos_eps"], neg_eps=IPV["neg_eps"])

    def library(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = tuplet(x, y) + IPV["ipv_weight"] * variance(x, y)
        return out

    return library


def variance_only(x: torch.Tensor, y: torch.Tensor, h: dict[str, float]) -> torch.Tensor:
    """Eq. 7 from a loop over the pairs of the kind the batch has (the other kind's term 0):
    intra-pair-variance's reference where a batch has no positive or no negative pair, so no
    tuplet term."""
    z = F.normalize(x, dim=1)
    n = len(y)
    same = [z[a] @ z[b] for a in range(n) for b in range(n) if a != b and y[a] == y[b]]
    diff = [z[a] @ z[b] for a in range(n) for b in range(n) if y[a] != y[b]]
    total = x.sum() * 0.0
    if same:
        mean = torch.stack(same).mean()
        total = (
            total
            + torch.stack([torch.relu((1 - h["pos_eps"]) * mean - c) ** 2 for c in same]).mean()
        )
    if diff:
        mean = torch.stack(diff).mean()
        total = (
            total
            + torch.stack([torch.relu(c - (1 + h["neg_eps"]) * mean) ** 2 for c in diff]).mean()
        )
    return h["ipv_weight"] * total


def _ipv_loop(labels: str) -> Loss:
    reference = variance_only if labels in NO_PAIR else loops.intra_pair_variance
    return lambda v, t: reference(v, t, IPV)


def _unless_no_pair(loop: Loss) -> Callable[[str], Loss | None]:
    return lambda labels: None if labels in NO_PAIR else loop


CASES = [
    Case(
        "snr-contrastive",
        SNRContrastive,
        _snr_defaults,
        lambda: losses.SignalToNoiseRatioContrastiveLoss(**SNR),
        lambda _: lambda v, t: loops.snr_contrastive(v, t, SNR["pos_margin"], SNR["neg_margin"]),
        perf=(36, 5),  # the library's 180 × 180 × 512 differences
    ),
    Case(
        "histogram",
        Histogram,
        _histogram_defaults,
        lambda: losses.HistogramLoss(**HISTOGRAM),
        lambda _: (
            lambda v, t: loops.histogram_loss(v, t, HISTOGRAM["n_bins"], pairs_from_triplets=True)
        ),
        perf=(36, 5),  # the library lists 93,600 triplets
        loop_value_tol={"rtol": 1e-5, "atol": 1e-8},  # float32 nodes (library)
        loop_grad_tol={"rtol": 1e-5, "atol": 1e-6},
    ),
    Case(
        "intra-pair-variance",
        TupletPlusVariance,
        _ipv_defaults,
        _ipv_library,
        _ipv_loop,
        perf=(45, 4),  # the |P| × |N| matrix the library builds: 540 × 31,680
    ),
    Case(
        "ntxent",
        NTXent,
        _ntxent_defaults,
        lambda: losses.NTXentLoss(TEMPERATURE),
        _unless_no_pair(lambda v, t: loops.ntxent(v, t, TEMPERATURE)),
        perf=(45, 4),
    ),
    Case(
        "pnp",
        PNP,
        _pnp_defaults,
        lambda: losses.PNPLoss(**PNP_H),
        lambda _: lambda v, t: loops.pnp(v, t, PNP_H, include_query=True),
        perf=(36, 5),  # the library's 180 × 180 × 180 sigmoids
    ),
    Case(
        "threshold-consistent-margin",
        ThresholdConsistentMargin,
        _tcm_defaults,
        lambda: losses.ThresholdConsistentMarginLoss(**TCM),
        lambda _: lambda v, t: loops.threshold_consistent_margin(v, t, TCM),
        perf=(36, 5),  # the library gathers 32,220 pairs of 512-d rows
    ),
    Case(
        "tuplet-margin",
        TupletMargin,
        _tuplet_defaults,
        lambda: losses.TupletMarginLoss(MARGIN, SCALE),
        _unless_no_pair(lambda v, t: loops.tuplet_margin(v, t, MARGIN, SCALE)),
        perf=(45, 4),
    ),
]
BY_NAME = {c.method: c for c in CASES}
each_case = pytest.mark.parametrize("case", CASES, ids=[c.method for c in CASES])


@each_case
def test_the_entry_builds_this_module_with_its_defaults(case: Case) -> None:
    loss = case.registered()
    assert isinstance(loss, case.module)
    case.defaults(loss)


@each_case
@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_library(case: Case, labels: str, seed: int, dtype: torch.dtype) -> None:
    x, y = batch(labels, seed, dtype)
    ours, ours_grad = value_and_grad(case.registered(), x, y)
    lib, lib_grad = value_and_grad(case.library(), x, y)
    torch.testing.assert_close(ours, lib, **LIBRARY_TOL[dtype])
    torch.testing.assert_close(ours_grad, lib_grad, **LIBRARY_TOL[dtype])


@each_case
@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_loop_reference(case: Case, labels: str, seed: int) -> None:
    x, y = batch(labels, seed, torch.float64)
    ours, ours_grad = value_and_grad(case.registered(), x, y)
    loop = case.loop(labels)
    if loop is None:
        assert float(ours) == 0.0 and not ours_grad.any()
        return
    ref, ref_grad = value_and_grad(loop, x, y)
    torch.testing.assert_close(ours, ref, **case.loop_value_tol)
    torch.testing.assert_close(ours_grad, ref_grad, **case.loop_grad_tol)


@each_case
def test_matches_the_library_at_the_perf_shape(case: Case) -> None:
    """180 × 512 (the shape ``python -m dmlbench.perf.losses`` times), float64."""
    classes, per_class = case.perf
    g = torch.Generator().manual_seed(0)
    y = torch.arange(classes).repeat_interleave(per_class)
    x = torch.randn(classes * per_class, 512, generator=g, dtype=torch.float64)
    ours, ours_grad = value_and_grad(case.registered(), x, y)
    lib, lib_grad = value_and_grad(case.library(), x, y)
    torch.testing.assert_close(ours, lib, **PERF_VALUE_TOL)
    torch.testing.assert_close(ours_grad, lib_grad, **PERF_GRAD_TOL)


@pytest.mark.parametrize("embeddings", ["all-equal", "zero"])
@pytest.mark.parametrize("method", ["snr-contrastive", "pnp", "threshold-consistent-margin"])
def test_degenerate_embeddings_match_the_library(method: str, embeddings: str) -> None:
    """Constant rows. snr-contrastive: var(h_i) = 0, every distance 0/0 (NaN, never counted),
    0 with a zero gradient; pnp: every difference 0, σ = 1/2 for each negative;
    threshold-consistent-margin: every cosine 1, or 0 with the norm floored at 1e-8 — each as
    the library."""
    case = BY_NAME[method]
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8) if embeddings == "all-equal" else torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(case.registered(), x, y)
    lib, lib_grad = value_and_grad(case.library(), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-7)
    if method == "snr-contrastive":
        assert float(ours) == 0.0 and not ours_grad.any()


def test_histogram_zero_embeddings_match_the_library() -> None:
    """Every cosine 0: all pairs in one bin, as the library."""
    case = BY_NAME["histogram"]
    y = LABELS["some-singletons"]
    x = torch.zeros(len(y), 8)
    ours, ours_grad = value_and_grad(case.registered(), x, y)
    lib, lib_grad = value_and_grad(case.library(), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad)


def test_histogram_counts_a_similarity_of_one_in_the_last_bin() -> None:
    """Two equal embeddings: the library indexes one node past the end and raises; the module
    puts the pair on the node t = 1 (so an all-equal batch, every pair at 1, scores 1: each
    negative pair sits where Φ⁺ = 1)."""
    y = LABELS["some-singletons"]
    x = torch.ones(len(y), 8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out of bounds"):
        losses.HistogramLoss(**HISTOGRAM)(x, y)
    ours, grad = value_and_grad(BY_NAME["histogram"].registered(), x, y)
    assert float(ours) == pytest.approx(1.0, rel=1e-4)  # the library's float32 nodes
    assert torch.isfinite(grad).all()


def test_ntxent_keeps_the_librarys_cap_of_a_hopeless_pair() -> None:
    """A positive pair far behind its negatives (τ = 0.01): the library's ``+ tiny`` caps the
    loss at −log(tiny) = 87.3 in float32; so does the module."""
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.01], [0.9, 0.1]])
    y = torch.tensor([0, 0, 1, 2])
    ours, ours_grad = value_and_grad(NTXent(0.01), x, y)
    lib, lib_grad = value_and_grad(losses.NTXentLoss(0.01), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["Ds", "Dq", "Iu", "Ib", "O"])
@pytest.mark.parametrize("labels", sorted(LABELS))
def test_every_pnp_variant_matches_the_library(variant: str, labels: str) -> None:
    x, y = batch(labels, 0, torch.float64)
    h = {**PNP_H, "variant": variant}
    ours, ours_grad = value_and_grad(PNP(**h), x, y)
    lib, lib_grad = value_and_grad(losses.PNPLoss(**h), x, y)
    torch.testing.assert_close(ours, lib, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-7, atol=1e-12)
