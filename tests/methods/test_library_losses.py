"""The losses rewritten from pytorch-metric-learning's, one table of cases: each B × B (or
O(B²)) module against the library's loss and against a per-pair (per-query) loop written from
its paper (tests/methods/test_catalogue.py's references), value and gradient (with respect to
the embeddings and to the loss's own parameters, manifold's proxies), on every batch of
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

from dmlbench.methods import METHODS, create_method
from dmlbench.methods.histogram import Histogram
from dmlbench.methods.intra_pair_variance import TupletPlusVariance
from dmlbench.methods.manifold import ClassProxyManifold
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
MANIFOLD_CLASSES = 8  # manifold's proxies (one per class) on the batches of _batches.py


@dataclass(frozen=True)
class Case:
    """One loss: its entry's name and module, how its defaults show, the library's loss (given
    the registered module, whose parameters a loss with proxies shares with it), the loop
    reference for a batch (None: the loss must be 0 with a zero gradient) and its tolerances
    and seeds, and the perf shape (classes × images per class; ``perf_classes`` proxies)."""

    method: str
    module: type[torch.nn.Module]
    defaults: Callable[[Any], None]
    library: Callable[[torch.nn.Module], Loss]
    loop: Callable[[str, torch.nn.Module], Loss | None]
    perf: tuple[int, int]
    classes: int = 10  # the entry's num_classes on the batches (a proxy loss: its proxies)
    perf_classes: int = 10
    library_tol: dict[torch.dtype, Tol] = field(default_factory=lambda: LIBRARY_TOL)
    loop_value_tol: Tol = field(default_factory=lambda: LOOP_VALUE_TOL)
    loop_grad_tol: Tol = field(default_factory=lambda: LOOP_GRAD_TOL)
    loop_seeds: tuple[int, ...] = (0, 1, 2)

    def registered(
        self,
        dtype: torch.dtype = torch.float32,
        seed: int = 0,
        classes: int | None = None,
        dim: int = 8,
    ) -> torch.nn.Module:
        """The entry's loss; a loss with parameters (proxies) drawn from ``seed``, in ``dtype``
        (one without keeps its buffers as built: histogram's float32 nodes are the library's)."""
        torch.manual_seed(seed)
        loss = create_method(
            self.method, None, num_classes=classes or self.classes, embedding_size=dim
        ).build_loss()
        return loss.to(dtype) if any(True for _ in loss.parameters()) else loss


def value_and_grads(
    fn: Loss, x: torch.Tensor, y: torch.Tensor, loss: torch.nn.Module
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``fn(x, y)`` and its gradient with respect to ``x`` and to every parameter of ``loss``
    (none for most: then exactly :func:`tests.methods._batches.value_and_grad`)."""
    params = list(loss.parameters())
    if not params:
        value, grad = value_and_grad(fn, x, y)
        return value, [grad]
    leaf = x.clone().requires_grad_(True)
    value = fn(leaf, y)
    grads = torch.autograd.grad(value, [leaf, *params], allow_unused=True, materialize_grads=True)
    return value.detach(), list(grads)


def assert_all_close(ours: list[torch.Tensor], ref: list[torch.Tensor], tol: Tol) -> None:
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, **tol)


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


def _manifold_defaults(loss: ClassProxyManifold) -> None:
    lib = loss.loss
    assert isinstance(lib, losses.ManifoldLoss)
    h = METHODS.get("manifold").defaults
    assert (lib.lambdaC, lib.alpha, lib.margin) == (h["lambdaC"], h["alpha"], h["margin"])
    assert tuple(lib.proxies.shape) == (MANIFOLD_CLASSES, 8)


def _manifold_library(loss: torch.nn.Module) -> Loss:
    """The library's ``ManifoldLoss`` the module wraps, called as the library is (indices None:
    each sample assigned to its class's proxy), on the same proxies."""
    lib: Any = loss.loss
    return lambda v, t: lib(v, None, t)


def _manifold_loop(labels: str, loss: torch.nn.Module) -> Loss:
    """The loop that iterates the random walk, on the module's proxies."""
    lib: Any = loss.loss
    proxies = lib.proxies
    h = METHODS.get("manifold").defaults
    return lambda v, t: loops.manifold(v, t, proxies, h)


def _ipv_library(_: torch.nn.Module) -> Loss:
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


def _ipv_loop(labels: str, _: torch.nn.Module) -> Loss:
    reference = variance_only if labels in NO_PAIR else loops.intra_pair_variance
    return lambda v, t: reference(v, t, IPV)


def _unless_no_pair(loop: Loss) -> Callable[[str, torch.nn.Module], Loss | None]:
    return lambda labels, _: None if labels in NO_PAIR else loop


def _always(loop: Loss) -> Callable[[str, torch.nn.Module], Loss | None]:
    return lambda labels, _: loop


def _new(library: Callable[[], Loss]) -> Callable[[torch.nn.Module], Loss]:
    """The library's loss built afresh (it has no parameters to share)."""
    return lambda _: library()


CASES = [
    Case(
        "snr-contrastive",
        SNRContrastive,
        _snr_defaults,
        _new(lambda: losses.SignalToNoiseRatioContrastiveLoss(**SNR)),
        _always(lambda v, t: loops.snr_contrastive(v, t, SNR["pos_margin"], SNR["neg_margin"])),
        perf=(36, 5),  # the library's 180 × 180 × 512 differences
    ),
    Case(
        "histogram",
        Histogram,
        _histogram_defaults,
        _new(lambda: losses.HistogramLoss(**HISTOGRAM)),
        _always(
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
        _new(lambda: losses.NTXentLoss(TEMPERATURE)),
        _unless_no_pair(lambda v, t: loops.ntxent(v, t, TEMPERATURE)),
        perf=(45, 4),
    ),
    Case(
        "pnp",
        PNP,
        _pnp_defaults,
        _new(lambda: losses.PNPLoss(**PNP_H)),
        _always(lambda v, t: loops.pnp(v, t, PNP_H, include_query=True)),
        perf=(36, 5),  # the library's 180 × 180 × 180 sigmoids
    ),
    Case(
        "threshold-consistent-margin",
        ThresholdConsistentMargin,
        _tcm_defaults,
        _new(lambda: losses.ThresholdConsistentMarginLoss(**TCM)),
        _always(lambda v, t: loops.threshold_consistent_margin(v, t, TCM)),
        perf=(36, 5),  # the library gathers 32,220 pairs of 512-d rows
    ),
    Case(
        "tuplet-margin",
        TupletMargin,
        _tuplet_defaults,
        _new(lambda: losses.TupletMarginLoss(MARGIN, SCALE)),
        _unless_no_pair(lambda v, t: loops.tuplet_margin(v, t, MARGIN, SCALE)),
        perf=(45, 4),
    ),
    Case(
        "manifold",
        ClassProxyManifold,
        _manifold_defaults,
        _manifold_library,
        _manifold_loop,
        perf=(45, 4),  # with 100 proxies: the library's 100 × 180 × 280 cosines
        classes=MANIFOLD_CLASSES,
        perf_classes=100,
        library_tol={
            torch.float64: LIBRARY_TOL[torch.float64],
            torch.float32: {"rtol": 1e-5, "atol": 1e-6},  # tighter than the others' 1e-5
        },
        loop_value_tol={"rtol": 1e-6, "atol": 1e-8},  # the walk iterated, not solved
        loop_grad_tol={"rtol": 1e-5, "atol": 1e-8},
        loop_seeds=(0,),  # the loop iterates the walk 400 times: slow
    ),
]
BY_NAME = {c.method: c for c in CASES}
each_case = pytest.mark.parametrize("case", CASES, ids=[c.method for c in CASES])
LOOP_RUNS = [
    pytest.param(c, labels, seed, id=f"{c.method}-{labels}-{seed}")
    for c in CASES
    for labels in sorted(LABELS)
    for seed in c.loop_seeds
]


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
    loss = case.registered(dtype, seed)
    ours, ours_grads = value_and_grads(loss, x, y, loss)
    lib, lib_grads = value_and_grads(case.library(loss), x, y, loss)
    torch.testing.assert_close(ours, lib, **case.library_tol[dtype])
    assert_all_close(ours_grads, lib_grads, case.library_tol[dtype])


@pytest.mark.parametrize(("case", "labels", "seed"), LOOP_RUNS)
def test_matches_the_loop_reference(case: Case, labels: str, seed: int) -> None:
    x, y = batch(labels, seed, torch.float64)
    loss = case.registered(torch.float64, seed)
    ours, ours_grads = value_and_grads(loss, x, y, loss)
    loop = case.loop(labels, loss)
    if loop is None:
        assert float(ours) == 0.0 and not any(g.any() for g in ours_grads)
        return
    ref, ref_grads = value_and_grads(loop, x, y, loss)
    torch.testing.assert_close(ours, ref, **case.loop_value_tol)
    assert_all_close(ours_grads, ref_grads, case.loop_grad_tol)


@each_case
def test_matches_the_library_at_the_perf_shape(case: Case) -> None:
    """180 × 512 (the shape ``python -m dmlbench.perf.losses`` times), float64."""
    classes, per_class = case.perf
    g = torch.Generator().manual_seed(0)
    y = torch.arange(classes).repeat_interleave(per_class)
    x = torch.randn(classes * per_class, 512, generator=g, dtype=torch.float64)
    loss = case.registered(torch.float64, 0, classes=case.perf_classes, dim=512)
    ours, ours_grads = value_and_grads(loss, x, y, loss)
    lib, lib_grads = value_and_grads(case.library(loss), x, y, loss)
    torch.testing.assert_close(ours, lib, **PERF_VALUE_TOL)
    assert_all_close(ours_grads, lib_grads, PERF_GRAD_TOL)


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
    loss = case.registered()
    ours, ours_grad = value_and_grad(loss, x, y)
    lib, lib_grad = value_and_grad(case.library(loss), x, y)
    torch.testing.assert_close(ours, lib)
    torch.testing.assert_close(ours_grad, lib_grad, rtol=1e-5, atol=1e-7)
    if method == "snr-contrastive":
        assert float(ours) == 0.0 and not ours_grad.any()


def test_histogram_zero_embeddings_match_the_library() -> None:
    """Every cosine 0: all pairs in one bin, as the library."""
    case = BY_NAME["histogram"]
    y = LABELS["some-singletons"]
    x = torch.zeros(len(y), 8)
    loss = case.registered()
    ours, ours_grad = value_and_grad(loss, x, y)
    lib, lib_grad = value_and_grad(case.library(loss), x, y)
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
