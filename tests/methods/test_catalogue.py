"""The catalogue (methods/catalogue_*.py): references from the papers, decrease, two training steps.

One module, parametrised by method name, so the catalogue's checks are in one place:

* ``test_matches_reference_value_and_gradient``: Circle, ProxyAnchor, SoftTriple, SupCon,
  NT-Xent, NCA, Tuplet Margin (+ intra-pair variance), generalized lifted structure,
  Threshold-Consistent Margin, Smooth-AP,
  ArcFace, Sub-center ArcFace, CosFace, SphereFace, L-Softmax, FastAP, histogram loss, PNP,
  SNR contrastive, dynamic soft margin, Manifold and P2SGrad against per-sample loops written
  from the papers' equations (float64, value and gradient w.r.t. embeddings and the loss's own
  parameters), plus degenerate batches where a loss defines one;
* where pytorch-metric-learning departs from a paper, the reference takes a flag reproducing
  the library's convention and a ``test_library_*`` test shows the paper's form differs:
  SoftTriple (no centre regulariser), Smooth-AP (batch grouped the wrong way round), histogram
  loss (negative pairs taken from triplets: pairs of two samples without a positive dropped),
  PNP (the query counted among its own positives), SNR contrastive (normalised embeddings; the
  non-zero positive and negative terms averaged separately, not all pairs together; no
  zero-mean regulariser), P2SGrad (W renormalised outside the graph: its W gradient has a
  radial part, so only the tangential part is compared; the value is eq. 11's potential
  divided by N·C/2), dynamic soft margin (every triplet, Φ(d)·d as value; the library's
  histogram failed on d ≥ 1.6; the entry clamps to its last node, tested);
* ``test_loss_decreases_on_a_fixed_batch``: every entry, optimising a fixed batch of embeddings
  (and the loss's parameters, at their learning-rate multiplier) directly — no network, so it
  checks the loss and not the backbone;
* ``test_two_training_steps_are_finite``: every entry through the real trainer on a shrunk
  glyphs-mini (20 training classes, batches of 20, two steps).

Entries outside :data:`REFERENCES` have only the last two checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses

from dmlbench.methods import (
    METHODS,
    catalogue_pair,
    catalogue_proxy,
    catalogue_ranking,
    create_method,
)
from dmlbench.methods._catalogue import CatalogueMethod
from tests.methods._batches import tensor_sum

CATALOGUE = sorted(
    [
        *catalogue_pair.METHODS_BY_NAME,
        *catalogue_proxy.METHODS_BY_NAME,
        *catalogue_ranking.METHODS_BY_NAME,
    ]
)
C, DIM = 5, 8  # classes (proxies) and width of the reference batches
Tensor = torch.Tensor


# ---- references, written from the papers' equations ------------------------------------------


def circle(x: Tensor, y: Tensor, m: float, gamma: float) -> Tensor:
    """Sun et al., CVPR 2020, eq. 4 with the self-paced weights of §3.2 (α as constants, as in
    the paper's gradient analysis): per anchor ``log(1 + Σ_n e^{γ α_n (s_n − Δ_n)} ·
    Σ_p e^{−γ α_p (s_p − Δ_p)})``, α_p = [1 + m − s_p]_+, α_n = [s_n + m]_+, Δ_p = 1 − m,
    Δ_n = m; averaged over anchors with a positive and a negative."""
    z = F.normalize(x, dim=1)
    terms = []
    for i in range(len(y)):
        pos = [j for j in range(len(y)) if j != i and y[j] == y[i]]
        neg = [j for j in range(len(y)) if y[j] != y[i]]
        if not pos or not neg:
            continue
        sum_p = tensor_sum(
            torch.exp(-gamma * max(1 + m - float(z[i] @ z[j]), 0.0) * (z[i] @ z[j] - (1 - m)))
            for j in pos
        )
        sum_n = tensor_sum(
            torch.exp(gamma * max(float(z[i] @ z[j]) + m, 0.0) * (z[i] @ z[j] - m)) for j in neg
        )
        terms.append(torch.log(1 + sum_n * sum_p))
    return torch.stack(terms).mean()


def proxy_anchor(x: Tensor, y: Tensor, proxies: Tensor, alpha: float, delta: float) -> Tensor:
    """Kim et al., CVPR 2020, eq. 4: positive term over proxies with a sample in the batch,
    negative term over all proxies."""
    s = F.normalize(x, dim=1) @ F.normalize(proxies, dim=1).t()
    with_pos = [c for c in range(len(proxies)) if bool((y == c).any())]
    pos = tensor_sum(
        torch.log(1 + torch.exp(-alpha * (s[y == c, c] - delta)).sum()) for c in with_pos
    )
    neg = tensor_sum(
        torch.log(1 + torch.exp(alpha * (s[y != c, c] + delta)).sum()) for c in range(len(proxies))
    )
    return pos / len(with_pos) + neg / len(proxies)


def soft_triple(
    x: Tensor, y: Tensor, fc: Tensor, k: int, la: float, gamma: float, margin: float, tau: float
) -> Tensor:
    """Qian et al., ICCV 2019: relaxed similarity S_{i,c} = Σ_k softmax_k(s_{i,c}^k / γ)
    s_{i,c}^k (eq. 8), loss −log(e^{λ(S_{i,y} − δ)} / (e^{λ(S_{i,y} − δ)} + Σ_{j≠y}
    e^{λ S_{i,j}})) (eq. 10), plus τ × the centre regulariser of §3.3 (eq. 11)."""
    centres = F.normalize(fc, dim=0).t()  # (C·K, d), class c owns rows c·K .. c·K + K − 1
    z = F.normalize(x, dim=1)
    total = x.sum() * 0.0
    for i in range(len(y)):
        big_s = []
        for c in range(C):
            s = centres[c * k : (c + 1) * k] @ z[i]
            weights = torch.exp(s / gamma) / torch.exp(s / gamma).sum()
            big_s.append((weights * s).sum())
        target = torch.exp(la * (big_s[int(y[i])] - margin))
        others = sum(torch.exp(la * big_s[c]) for c in range(C) if c != int(y[i]))
        total = total - torch.log(target / (target + others))
    reg = x.sum() * 0.0
    for c in range(C):
        for t in range(k):
            for u in range(t + 1, k):
                w_t, w_u = centres[c * k + t], centres[c * k + u]
                reg = reg + torch.sqrt(2.0 + 1e-5 - 2.0 * (w_t @ w_u))
    return total / len(y) + tau * reg / (C * k * (k - 1))


def supcon(x: Tensor, y: Tensor, temperature: float) -> Tensor:
    """Khosla et al., NeurIPS 2020, eq. 2 (L_out): −1/|P(i)| Σ_p log(e^{z_i·z_p/τ} /
    Σ_{a≠i} e^{z_i·z_a/τ}), averaged over anchors with a positive."""
    z = F.normalize(x, dim=1)
    terms = []
    for i in range(len(y)):
        pos = [p for p in range(len(y)) if p != i and y[p] == y[i]]
        if not pos:
            continue
        denominator = sum(torch.exp(z[i] @ z[a] / temperature) for a in range(len(y)) if a != i)
        logs = [torch.log(torch.exp(z[i] @ z[p] / temperature) / denominator) for p in pos]
        terms.append(-torch.stack(logs).mean())
    return torch.stack(terms).mean()


def ntxent(x: Tensor, y: Tensor, temperature: float) -> Tensor:
    """Chen et al., ICML 2020, eq. 1 (NT-Xent) with every same-class ordered pair (a, p) a
    positive: −log(e^{s_ap/τ} / (e^{s_ap/τ} + Σ_{n: y_n ≠ y_a} e^{s_an/τ})), averaged over pairs."""
    z = F.normalize(x, dim=1)
    terms = []
    for a in range(len(y)):
        negatives = [n for n in range(len(y)) if y[n] != y[a]]
        for p in range(len(y)):
            if p == a or y[p] != y[a]:
                continue
            pos = torch.exp(z[a] @ z[p] / temperature)
            neg = sum(torch.exp(z[a] @ z[n] / temperature) for n in negatives)
            terms.append(-torch.log(pos / (pos + neg)))
    return torch.stack(terms).mean()


def nca(x: Tensor, y: Tensor, scale: float) -> Tensor:
    """Goldberger et al., NeurIPS 2004, the log objective of §2: −log Σ_{j ∈ C_i} p_ij with
    p_ij = e^{−s‖z_i − z_j‖²} / Σ_{k ≠ i} e^{−s‖z_i − z_k‖²} on normalised z, averaged over
    samples with a same-class neighbour."""
    z = F.normalize(x, dim=1)
    terms = []
    for i in range(len(y)):
        others = [k for k in range(len(y)) if k != i]
        same = [j for j in others if y[j] == y[i]]
        if not same:
            continue
        weight = {k: torch.exp(-scale * ((z[i] - z[k]) ** 2).sum()) for k in others}
        total = tensor_sum(weight.values())
        terms.append(-torch.log(tensor_sum(weight[j] for j in same) / total))
    return torch.stack(terms).mean()


def _pairs(y: Tensor, same: bool) -> list[tuple[int, int]]:
    n = len(y)
    return [(a, b) for a in range(n) for b in range(n) if a != b and bool(y[a] == y[b]) == same]


def tuplet_margin(x: Tensor, y: Tensor, beta_deg: float, scale: float) -> Tensor:
    """Yu & Tao, ICCV 2019, eq. 5: per (anchor, positive) pair
    log(1 + Σ_n e^{s(cos θ_an − cos(θ_ap − β))}), averaged over positive pairs."""
    z = F.normalize(x, dim=1)
    beta = math.radians(beta_deg)
    terms = []
    for a, p in _pairs(y, same=True):
        target = torch.cos(torch.acos(z[a] @ z[p]) - beta)
        negatives = [n for n in range(len(y)) if y[n] != y[a]]
        inner = tensor_sum(torch.exp(scale * (z[a] @ z[n] - target)) for n in negatives)
        terms.append(torch.log(1 + inner))
    return torch.stack(terms).mean()


def intra_pair_variance(x: Tensor, y: Tensor, h: dict[str, float]) -> Tensor:
    """Yu & Tao, ICCV 2019, eq. 7 added to the tuplet margin loss with weight w:
    E[((1 − ε+) μ_ap − cos θ_ap)_+²] + E[(cos θ_an − (1 + ε−) μ_an)_+²], μ the batch means."""
    z = F.normalize(x, dim=1)
    pos = torch.stack([z[a] @ z[b] for a, b in _pairs(y, True)])
    neg = torch.stack([z[a] @ z[b] for a, b in _pairs(y, False)])
    pos_term = torch.stack([torch.relu((1 - h["pos_eps"]) * pos.mean() - c) ** 2 for c in pos])
    neg_term = torch.stack([torch.relu(c - (1 + h["neg_eps"]) * neg.mean()) ** 2 for c in neg])
    variance = pos_term.mean() + neg_term.mean()
    tuplet = tuplet_margin(x, y, h["tuplet_margin"], h["tuplet_scale"])
    return tuplet + h["ipv_weight"] * variance


def generalized_lifted(x: Tensor, y: Tensor, neg_margin: float, pos_margin: float) -> Tensor:
    """Hermans et al., arXiv 2017, §2 (generalized lifted structure): per anchor
    [log Σ_p e^{D_ap − m_p} + log Σ_n e^{m − D_an}]_+ on Euclidean distances of normalised
    embeddings, averaged over anchors."""
    z = F.normalize(x, dim=1)
    terms = []
    for a in range(len(y)):
        pos = [p for p in range(len(y)) if p != a and y[p] == y[a]]
        neg = [n for n in range(len(y)) if y[n] != y[a]]
        lp = torch.log(tensor_sum(torch.exp((z[a] - z[p]).norm() - pos_margin) for p in pos))
        ln = torch.log(tensor_sum(torch.exp(neg_margin - (z[a] - z[n]).norm()) for n in neg))
        terms.append(torch.relu(lp + ln))
    return torch.stack(terms).mean()


def threshold_consistent_margin(x: Tensor, y: Tensor, h: dict[str, float]) -> Tensor:
    """Zhang et al., ICLR 2024, eq. 4: λ+ × mean of (m+ − s) over positive pairs with s ≤ m+,
    plus λ− × mean of (s − m−) over negative pairs with s ≥ m− (cosine similarities)."""
    z = F.normalize(x, dim=1)
    pos = [m for a, b in _pairs(y, True) if float(m := z[a] @ z[b]) <= h["margin_plus"]]
    neg = [m for a, b in _pairs(y, False) if float(m := z[a] @ z[b]) >= h["margin_minus"]]
    total = x.sum() * 0.0
    if pos:
        total = total + h["lambda_plus"] * torch.stack([h["margin_plus"] - m for m in pos]).mean()
    if neg:
        total = total + h["lambda_minus"] * torch.stack([m - h["margin_minus"] for m in neg]).mean()
    return total


def smooth_ap(x: Tensor, y: Tensor, tau: float, include_query: bool = False) -> Tensor:
    """Brown et al., ECCV 2020, eq. 11: per query, the mean over its positives i of
    (1 + Σ_{j∈P, j≠i} σ(D_ij/τ)) / (1 + Σ_{j≠i} σ(D_ij/τ)) with D_ij = s_qj − s_qi; the
    retrieval set excludes the query (``include_query`` keeps it, as the authors' code does)."""
    z = F.normalize(x, dim=1)
    s = z @ z.t()
    aps = []
    for q in range(len(y)):
        pool = [j for j in range(len(y)) if include_query or j != q]
        positives = [i for i in pool if y[i] == y[q]]
        if not positives or (include_query and len(positives) == 1):
            continue
        total = x.sum() * 0.0
        for i in positives:

            def g(j: int, i: int = i, q: int = q) -> Tensor:
                return torch.sigmoid((s[q, j] - s[q, i]) / tau)

            rank_pos = 1 + sum(g(j) for j in positives if j != i)
            rank_all = 1 + sum(g(j) for j in pool if j != i)
            total = total + rank_pos / rank_all
        aps.append(total / len(positives))
    return 1 - torch.stack(aps).mean()


def margin_softmax(
    x: Tensor, y: Tensor, w: Tensor, target: Callable[[Tensor], Tensor], s: float
) -> Tensor:
    """Cross-entropy of ``s × cos θ_j`` with ``target(cos θ_y)`` for the true class."""
    cos = F.normalize(x, dim=1) @ F.normalize(w, dim=0)
    total = x.sum() * 0.0
    for i in range(len(y)):
        t = int(y[i])
        logits = [s * target(cos[i, j]) if j == t else s * cos[i, j] for j in range(C)]
        total = total - torch.log(torch.exp(logits[t]) / sum(torch.exp(v) for v in logits))
    return total / len(y)


def arcface(x: Tensor, y: Tensor, w: Tensor, margin_deg: float, scale: float) -> Tensor:
    """Deng et al., CVPR 2019, eq. 3: the target logit is s·cos(θ_y + m)."""
    m = math.radians(margin_deg)
    return margin_softmax(x, y, w, lambda c: torch.cos(torch.acos(c) + m), scale)


def cosface(x: Tensor, y: Tensor, w: Tensor, margin: float, scale: float) -> Tensor:
    """Wang et al., CVPR 2018, eq. 4: the target logit is s·(cos θ_y − m)."""
    return margin_softmax(x, y, w, lambda c: c - margin, scale)


def subcenter_arcface(
    x: Tensor, y: Tensor, w: Tensor, k: int, margin_deg: float, s: float
) -> Tensor:
    """Deng et al., ECCV 2020, §3.1: cos θ_{i,j} = max over class j's K sub-centres, then the
    ArcFace target s·cos(θ_y + m) (Deng et al., CVPR 2019, eq. 3)."""
    m = math.radians(margin_deg)
    z, centres = F.normalize(x, dim=1), F.normalize(w, dim=0)
    total = x.sum() * 0.0
    for i in range(len(y)):
        cos = [
            torch.stack([z[i] @ centres[:, j * k + c] for c in range(k)]).max() for j in range(C)
        ]
        t = int(y[i])
        logits = [s * torch.cos(torch.acos(cos[j]) + m) if j == t else s * cos[j] for j in range(C)]
        total = total - torch.log(torch.exp(logits[t]) / sum(torch.exp(v) for v in logits))
    return total / len(y)


def large_margin(x: Tensor, y: Tensor, w: Tensor, m: int, s: float, weight_norms: bool) -> Tensor:
    """Liu et al., ICML 2016, eq. 4-6 (L-Softmax): the target logit is ‖W_y‖‖x‖ψ(θ_y) with
    ψ(θ) = (−1)^k cos(mθ) − 2k on [kπ/m, (k+1)π/m]; SphereFace (Liu et al., CVPR 2017, §3.2)
    normalises W, so its logits are ‖x‖ψ(θ_y) and ‖x‖cos θ_j (``weight_norms=False``)."""
    cos = F.normalize(x, dim=1) @ F.normalize(w, dim=0)
    x_norm, w_norm = x.norm(dim=1), w.norm(dim=0)
    total = x.sum() * 0.0
    for i in range(len(y)):
        t = int(y[i])
        logits = []
        for j in range(C):
            value = cos[i, j]
            if j == t:
                theta = torch.acos(value)
                k = math.floor(float(theta) / (math.pi / m))
                value = (-1) ** k * torch.cos(m * theta) - 2 * k
            magnitude = x_norm[i] * (w_norm[j] if weight_norms else 1.0)
            logits.append(s * magnitude * value)
        total = total - torch.log(torch.exp(logits[t]) / sum(torch.exp(v) for v in logits))
    return total / len(y)


# ---- references for the ranking, histogram, manifold and P2SGrad entries ----------------------


def fast_ap(x: Tensor, y: Tensor, num_bins: int) -> Tensor:
    """Cakir et al., CVPR 2019, FastAP: the histogram form of AP, with soft binning.

    Squared Euclidean distances of normalised embeddings lie in [0, 4], cut into L bins whose
    L + 1 centres are z_l = l·Δ, Δ = 4/L; a distance d counts in bin l with the triangular
    weight max(0, 1 − |d − z_l|/Δ). Per query q (retrieval set: the other samples):
    FastAP_q = 1/N_q⁺ Σ_l h_l⁺ H_l⁺ / H_l with h_l⁺ the positives' count in bin l, H_l⁺ and H_l
    the cumulative positive and total counts; the loss is 1 − the mean over queries with a
    positive (the authors' minibatch objective).
    """
    z = F.normalize(x, dim=1)
    delta = 4.0 / num_bins
    aps = []
    for q in range(len(y)):
        pos = [j for j in range(len(y)) if j != q and y[j] == y[q]]
        neg = [j for j in range(len(y)) if y[j] != y[q]]
        if not pos:
            continue
        d = {j: ((z[q] - z[j]) ** 2).sum() for j in pos + neg}

        def count(pool: list[int], centre: float, d: dict[int, Tensor] = d) -> Tensor:
            return sum(
                (torch.relu(1 - torch.abs(d[j] - centre) / delta) for j in pool), x.new_zeros(())
            )

        ap, cum_pos, cum_all = x.sum() * 0.0, x.sum() * 0.0, x.sum() * 0.0
        for bin_ in range(num_bins + 1):
            h_pos, h_neg = count(pos, bin_ * delta), count(neg, bin_ * delta)
            cum_pos, cum_all = cum_pos + h_pos, cum_all + h_pos + h_neg
            if float(h_pos) > 0:
                ap = ap + h_pos * cum_pos / cum_all
        aps.append(ap / len(pos))
    if not aps:
        return x.sum() * 0.0
    return 1 - torch.stack(aps).mean()


def histogram_loss(x: Tensor, y: Tensor, n_bins: int, pairs_from_triplets: bool = False) -> Tensor:
    """Ustinova & Lempitsky, NeurIPS 2016, the histogram loss: cosine similarities of the batch's
    positive pairs S⁺ and negative pairs S⁻ (unordered, i < j) are spread over R = n_bins + 1
    nodes t_r = −1 + rΔ, Δ = 2/n_bins, by linear interpolation between the two nearest nodes
    (δ_{i,j,r} = 1 − |s_ij − t_r|/Δ when positive); h_r = Σ δ_{i,j,r} / |S|; the loss is
    Σ_r h⁻_r Φ⁺_r with Φ⁺_r = Σ_{q≤r} h⁺_q, the probability that a negative pair is more similar
    than a positive one. ``pairs_from_triplets`` keeps only the pairs that belong to a
    (anchor, positive, negative) triplet, as pytorch-metric-learning does: a negative pair of
    two samples that both lack a positive is dropped, which the paper's S⁻ keeps.
    """
    z = F.normalize(x, dim=1)
    delta = 2.0 / n_bins
    n = len(y)
    has_pos = [any(y[j] == y[i] for j in range(n) if j != i) for i in range(n)]
    pos = [(i, j) for i in range(n) for j in range(i + 1, n) if y[i] == y[j]]
    neg = [(i, j) for i in range(n) for j in range(i + 1, n) if y[i] != y[j]]
    if pairs_from_triplets:
        pos = [(i, j) for i, j in pos if any(y[k] != y[i] for k in range(n))]
        neg = [(i, j) for i, j in neg if has_pos[i] or has_pos[j]]
    if not pos or not neg:
        return x.sum() * 0.0

    def hist(pairs: list[tuple[int, int]]) -> list[Tensor]:
        sims = [z[i] @ z[j] for i, j in pairs]
        nodes = [-1.0 + r * delta for r in range(n_bins + 1)]
        return [
            tensor_sum(torch.relu(1 - torch.abs(s - t) / delta) for s in sims) / len(pairs)
            for t in nodes
        ]

    h_pos, h_neg = hist(pos), hist(neg)
    total, phi = x.sum() * 0.0, x.sum() * 0.0
    for r in range(n_bins + 1):
        phi = phi + h_pos[r]
        total = total + h_neg[r] * phi
    return total


def p2sgrad(x: Tensor, y: Tensor, w: Tensor) -> Tensor:
    """Zhang et al., CVPR 2019, eq. 11: P2SGrad replaces the gradient of a margin softmax by
    Σ_j (cos θ_ij − 1(j = y_i)) ∇cos θ_ij, with cos θ_ij = <x̂_i, Ŵ_j>. That is the gradient of
    ½ Σ_i Σ_j (cos θ_ij − 1(j = y_i))²; the library's value is this sum's mean over the N × C
    cosines (an MSE), so its gradient is 2/(N·C) × eq. 11. Both x and W enter normalised, so
    ∇cos θ_ij is tangential to each (the paper's ∇ of cos θ)."""
    z, centres = F.normalize(x, dim=1), F.normalize(w, dim=0)
    total = x.sum() * 0.0
    for i in range(len(y)):
        for j in range(centres.shape[1]):
            total = total + (z[i] @ centres[:, j] - float(j == int(y[i]))) ** 2
    return total / (len(y) * centres.shape[1])


def pnp_rank_modulation(r: Tensor, variant: str, b: float, alpha: float) -> Tensor:
    """Li et al., AAAI 2022, the PNP variants: each positive's loss as a function of R⁻, the
    soft count of negatives ranked before it: PNP-O R⁻, PNP-D_s log(1 + R⁻), PNP-D_q
    1/(1 + R⁻)^α (maximised: the loss is 1 − its mean), PNP-I_u (1 + R⁻) log(1 + R⁻), PNP-I_b
    (bR⁻ − log(1 + bR⁻))/b²."""
    if variant == "O":
        return r
    if variant == "Ds":
        return torch.log(1 + r)
    if variant == "Dq":
        return 1 / (1 + r) ** alpha
    if variant == "Iu":
        return (1 + r) * torch.log(1 + r)
    assert variant == "Ib"
    return (b * r - torch.log(1 + b * r)) / b**2


def pnp(x: Tensor, y: Tensor, h: dict[str, object], include_query: bool = True) -> Tensor:
    """Li et al., AAAI 2022, the PNP loss: per query q and positive i,
    R⁻(i) = Σ_{j∈N_q} σ((s_qj − s_qi)/τ) over cosine similarities (τ = ``anneal``), the
    variant's function of it (:func:`pnp_rank_modulation`) averaged over q's positives P_q, then
    over queries with a positive. The paper's P_q excludes the query; ``include_query`` also
    counts q as its own positive (s_qq = 1), as pytorch-metric-learning (after the authors'
    Smooth-AP-derived code) does."""
    z = F.normalize(x, dim=1)
    tau, variant = float(h["anneal"]), str(h["variant"])  # type: ignore[arg-type]
    b, alpha = float(h["b"]), float(h["alpha"])  # type: ignore[arg-type]
    terms = []
    for q in range(len(y)):
        pos = [i for i in range(len(y)) if i != q and y[i] == y[q]]
        neg = [j for j in range(len(y)) if y[j] != y[q]]
        if not pos:
            continue
        pool = [q, *pos] if include_query else pos
        per_pos = []
        for i in pool:
            s_qi = z[q] @ z[i]
            r = sum((torch.sigmoid((z[q] @ z[j] - s_qi) / tau) for j in neg), s_qi * 0.0)
            per_pos.append(pnp_rank_modulation(r, variant, b, alpha))
        terms.append(torch.stack(per_pos).mean())
    if not terms:
        return x.sum() * 0.0
    value = torch.stack(terms).mean()
    return 1 - value if variant == "Dq" else value


def snr_distance(a: Tensor, b: Tensor) -> Tensor:
    """Yuan et al., CVPR 2019, the SNR distance d_S(h_i, h_j) = var(h_j − h_i) / var(h_i): the
    noise's variance over the anchor's (signal's) variance, each over the feature dimensions
    (the variances' normalisation cancels in the ratio)."""
    noise = b - a
    return ((noise - noise.mean()) ** 2).sum() / ((a - a.mean()) ** 2).sum()


def snr_contrastive(
    x: Tensor, y: Tensor, pos_margin: float, neg_margin: float, paper: bool = False
) -> Tensor:
    """Yuan et al., CVPR 2019, the SNR contrastive loss (DSML): the contrastive loss with the
    SNR distance, per ordered pair (i, j) [d_S − m⁺]_+ if same class, [m⁻ − d_S]_+ otherwise.

    ``paper=True`` is the paper's form: d_S of the raw features, the sum over all pairs divided
    by their number. ``paper=False`` is what pytorch-metric-learning computes: d_S of
    L2-normalised embeddings (its distances' default), and the mean of the non-zero positive
    terms plus the mean of the non-zero negative terms (``AvgNonZeroReducer`` on each). Neither
    includes the paper's zero-mean regulariser on the features (PML's ``ZeroMeanRegularizer``).
    """
    z = x if paper else F.normalize(x, dim=1)
    pos_terms, neg_terms = [], []
    for i, j in _pairs(y, same=True):
        pos_terms.append(torch.relu(snr_distance(z[i], z[j]) - pos_margin))
    for i, j in _pairs(y, same=False):
        neg_terms.append(torch.relu(neg_margin - snr_distance(z[i], z[j])))
    if paper:
        return torch.stack(pos_terms + neg_terms).mean()
    total = x.sum() * 0.0
    for terms in (pos_terms, neg_terms):
        active = [t for t in terms if float(t) > 0]
        if active:
            total = total + torch.stack(active).mean()
    return total


def dynamic_soft_margin(
    x: Tensor,
    y: Tensor,
    min_val: float,
    num_bins: int,
    running: list[float] | None = None,
    momentum: float = 1.0,
) -> tuple[Tensor, list[float]]:
    """Zhang & Rusinkiewicz, ICCV 2019, §3 (CDF-based dynamic soft margin), as the entry
    implements it; returns the loss and the updated running histogram.

    Per triplet (a, p, n) of the batch (every one): d = ‖z_a − z_p‖ − ‖z_a − z_n‖ on normalised
    embeddings. The running histogram has ``num_bins`` nodes min_val + kΔ, Δ = 2|min_val| /
    num_bins: it becomes (1 − μ) × ``running`` + μ × the batch's d's, each d split between its
    two nodes by linear interpolation, then is normalised to 1 (μ = 1 on the first batch,
    ``running=None``). The loss is the mean of Φ(d)·d with Φ the updated histogram's cumulative
    sum at d's lower node, held constant: its gradient w.r.t. d is the empirical CDF, the
    paper's dynamic soft margin. The paper defines the loss through that derivative; Φ(d)·d is
    the entry's value (not the integral of Φ), and the paper's triplets are each matching
    pair's hardest in-batch negative (descriptor learning) where the entry takes every triplet.
    """
    z = F.normalize(x, dim=1)
    n = len(y)
    ds = [
        (z[a] - z[p]).norm() - (z[a] - z[q]).norm()
        for a in range(n)
        for p in range(n)
        if p != a and y[p] == y[a]
        for q in range(n)
        if y[q] != y[a]
    ]
    if not ds:
        return x.sum() * 0.0, list(running or [0.0] * num_bins)
    delta = 2 * abs(min_val) / num_bins
    hist = [(1 - momentum) * v for v in running] if running else [0.0] * num_bins
    mu = momentum if running else 1.0
    for d in ds:
        u = (float(d) - min_val) / delta
        k = math.floor(u)
        hist[k] += mu * (1 - (u - k))
        hist[k + 1] += mu * (u - k)
    hist = [v / sum(hist) for v in hist]
    cdf = [sum(hist[: k + 1]) for k in range(num_bins)]
    weighted = [cdf[math.floor((float(d) - min_val) / delta)] * d for d in ds]
    return torch.stack(weighted).mean(), hist


def manifold(x: Tensor, y: Tensor, proxies: Tensor, h: dict[str, float]) -> Tensor:
    """Aziere & Todorovic, CVPR 2019, the manifold (random walk) loss, with one proxy per
    class and each sample assigned to its class's proxy (the entry's adaptation; the paper's
    hard-proxy estimation and ensemble are not part of the loss).

    Graph over the N samples and K proxies: w_uv = exp(max(cos(u, v), 0)/0.5) for u ≠ v, 0 on
    the diagonal; S̄ = D^{-1/2} W D^{-1/2}. The manifold similarities are the random walk's
    fixed point F = αS̄F + (1 − α)I, computed here by iterating the walk itself (not the
    closed form (1 − α)(I − αS̄)^{-1}). With c_i the class of sample i and m the margin:
    L_int = mean_i log(1 + Σ_{k≠c_i} [F_ik − F_ic_i + m > 0] e^{F_ik − F_ic_i + m}) over the
    sample-to-proxy block, L_ctx the same on cos(F_i, F_k) between the rows of samples and
    proxies (contexts); the loss is L_int + λ_C L_ctx.
    """
    nodes = F.normalize(torch.cat([x, proxies]), dim=1)
    total = len(nodes)
    w = torch.exp(torch.clamp(nodes @ nodes.t(), min=0) / 0.5) * (
        1 - torch.eye(total, dtype=x.dtype)
    )
    d_inv_half = w.sum(1) ** -0.5
    s_bar = d_inv_half[:, None] * w * d_inv_half[None, :]
    alpha, margin = h["alpha"], h["margin"]
    eye = torch.eye(total, dtype=x.dtype)
    f = (1 - alpha) * eye
    for _ in range(400):  # α^400 < 1e-38
        f = alpha * s_bar @ f + (1 - alpha) * eye
    n = len(y)

    def hinge_softplus(score: Callable[[int, int], Tensor]) -> Tensor:
        terms = []
        for i in range(n):
            c = int(y[i])
            excess = [score(i, k) - score(i, c) + margin for k in range(len(proxies)) if k != c]
            terms.append(
                torch.log(1 + sum((torch.exp(e) for e in excess if float(e) > 0), x.sum() * 0.0))
            )
        return torch.stack(terms).mean()

    intrinsic = hinge_softplus(lambda i, k: f[i, n + k])
    context = hinge_softplus(lambda i, k: F.cosine_similarity(f[i], f[n + k], dim=0))
    return intrinsic + h["lambdaC"] * context


def _params(loss: torch.nn.Module) -> list[Tensor]:
    return [p for p in loss.parameters() if p.requires_grad]


def reference_for(name: str, loss: torch.nn.Module, x: Tensor, y: Tensor) -> Tensor:
    h = METHODS.get(name).defaults
    inner: Any = getattr(loss, "loss", None)  # the library loss a wrapper holds, if any
    if name == "circle":
        return circle(x, y, h["m"], h["gamma"])
    if name == "supcon":
        return supcon(x, y, h["temperature"])
    if name == "ntxent":
        return ntxent(x, y, h["temperature"])
    if name == "nca":
        return nca(x, y, h["softmax_scale"])
    if name == "smooth-ap":
        return smooth_ap(x, y, h["temperature"])
    if name == "intra-pair-variance":
        return intra_pair_variance(x, y, h)
    if name == "tuplet-margin":
        return tuplet_margin(x, y, h["margin"], h["scale"])
    if name == "generalized-lifted":
        return generalized_lifted(x, y, h["neg_margin"], h["pos_margin"])
    if name == "threshold-consistent-margin":
        return threshold_consistent_margin(x, y, h)
    if name == "proxy-anchor":
        return proxy_anchor(x, y, inner.proxies, h["alpha"], h["margin"])
    if name == "soft-triple":
        k = int(h["centers_per_class"])
        return soft_triple(x, y, inner.fc, k, h["la"], h["gamma"], h["margin"], h["tau"])
    if name == "arcface":
        return arcface(x, y, inner.W, h["margin"], h["scale"])
    if name in ("large-margin-softmax", "sphereface"):
        m, scale = int(h["margin"]), float(h["scale"])
        return large_margin(x, y, inner.W, m, scale, weight_norms=name == "large-margin-softmax")
    if name == "subcenter-arcface":
        k = int(h["sub_centers"])
        return subcenter_arcface(x, y, inner.W, k, h["margin"], h["scale"])
    if name == "fast-ap":
        return fast_ap(x, y, int(h["num_bins"]))
    if name == "histogram":
        return histogram_loss(x, y, int(h["n_bins"]))
    if name == "p2sgrad":
        return p2sgrad(x, y, inner.weight)
    if name == "pnp":
        return pnp(x, y, h, include_query=True)
    if name == "snr-contrastive":
        return snr_contrastive(x, y, h["pos_margin"], h["neg_margin"])
    if name == "dynamic-soft-margin":
        return dynamic_soft_margin(x, y, h["min_val"], int(h["num_bins"]))[0]
    if name == "manifold":
        return manifold(x, y, inner.proxies, h)
    assert name == "cosface"
    return cosface(x, y, inner.W, h["margin"], h["scale"])


REFERENCES = [
    "circle",
    "supcon",
    "ntxent",
    "nca",
    "tuplet-margin",
    "intra-pair-variance",
    "generalized-lifted",
    "threshold-consistent-margin",
    "smooth-ap",
    "proxy-anchor",
    "soft-triple",
    "arcface",
    "subcenter-arcface",
    "cosface",
    "sphereface",
    "large-margin-softmax",
    "fast-ap",
    "histogram",
    "pnp",
    "snr-contrastive",
    "dynamic-soft-margin",
    "manifold",
    "p2sgrad",
]


#: (value rtol, gradient atol) where the library computes part of its loss in float32:
#: HistogramLoss builds its bin nodes r·Δ from an integer tensor times a Python float (float32,
#: relative error ~5e-7 in each interpolation weight).
TOLERANCES: dict[str, tuple[float, float]] = {"histogram": (1e-5, 1e-6)}


def tangential(grad: Tensor, w: Tensor) -> Tensor:
    """The part of ``grad`` orthogonal to each column of ``w`` (the tangent to its sphere)."""
    unit = F.normalize(w.detach(), dim=0)
    return grad - unit * (unit * grad).sum(0, keepdim=True)


#: Compared part of the gradient w.r.t. the loss's own parameters. ``p2sgrad``: the library
#: renormalises W outside the autograd graph, so its gradient w.r.t. W_j has a radial component
#: along W_j that eq. 11's ∇cos θ_ij lacks (see test_library_p2sgrad_weight_gradient_is_not_
#: tangential); the tangential parts are compared.
PARAMETER_GRADIENT_VIEWS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"p2sgrad": tangential}


def reference_batch(seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4])
    x = torch.randn(len(y), DIM, generator=g, dtype=torch.float64)
    return x, y


@pytest.mark.parametrize("name", REFERENCES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_reference_value_and_gradient(name: str, seed: int) -> None:
    torch.manual_seed(seed)
    loss = create_method(name, None, num_classes=C, embedding_size=DIM).build_loss().double()
    x, y = reference_batch(seed)
    x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ours = loss(x1, y)
    ours_grads = torch.autograd.grad(ours, [x1, *_params(loss)])
    ref = reference_for(name, loss, x2, y)
    ref_grads = torch.autograd.grad(ref, [x2, *_params(loss)])
    view = PARAMETER_GRADIENT_VIEWS.get(name)
    if view is not None:
        params = _params(loss)
        ours_grads = (
            ours_grads[0],
            *(view(g, p) for g, p in zip(ours_grads[1:], params, strict=True)),
        )
        ref_grads = (
            ref_grads[0],
            *(view(g, p) for g, p in zip(ref_grads[1:], params, strict=True)),
        )
    value_rtol, grad_atol = TOLERANCES.get(name, (1e-6, 1e-8))
    torch.testing.assert_close(ours, ref, rtol=value_rtol, atol=1e-8)
    for a, b in zip(ours_grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=grad_atol)


def test_library_soft_triple_lacks_the_centre_regulariser() -> None:
    """Why ``soft-triple`` wraps the library class: without τ·R it is not eq. 11's objective."""
    torch.manual_seed(0)
    x, y = reference_batch(0)
    lib = losses.SoftTripleLoss(C, DIM, centers_per_class=10, la=20, gamma=0.1, margin=0.01)
    lib = lib.double()
    fc = lib.fc
    plain = soft_triple(x, y, fc, 10, 20.0, 0.1, 0.01, tau=0.0)
    torch.testing.assert_close(lib(x, y), plain)
    assert not torch.isclose(lib(x, y), soft_triple(x, y, fc, 10, 20.0, 0.1, 0.01, tau=0.2))


@pytest.mark.parametrize(("classes", "per_class"), [(4, 4), (4, 3), (8, 4)])
def test_library_smooth_ap_is_right_only_when_classes_equal_samples_per_class(
    classes: int, per_class: int
) -> None:
    """Why ``smooth-ap`` is written here: the library reshapes the batch the wrong way round."""
    torch.manual_seed(0)
    y = torch.arange(classes).repeat_interleave(per_class)
    x = torch.randn(len(y), DIM, dtype=torch.float64)
    lib = float(losses.SmoothAPLoss(temperature=0.01)(x, y))
    authors = float(smooth_ap(x, y, 0.01, include_query=True))
    assert (abs(lib - authors) < 1e-6) == (classes == per_class), (lib, authors)


# ---- the references' edge cases, and where the library departs from the paper -----------------


def _value_and_gradient(fn: Callable[[Tensor], Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
    leaf = x.clone().requires_grad_(True)
    value = fn(leaf)
    (grad,) = torch.autograd.grad(value, leaf, allow_unused=True, materialize_grads=True)
    return value.detach(), grad


DEGENERATE = {
    "no positive pair": torch.arange(12),
    "no negative pair": torch.zeros(12, dtype=torch.long),
}


@pytest.mark.parametrize("batch", sorted(DEGENERATE))
@pytest.mark.parametrize("name", ["fast-ap", "histogram", "pnp", "dynamic-soft-margin"])
def test_degenerate_batches_match_the_reference(name: str, batch: str) -> None:
    """Without a positive or without a negative pair these losses are 0 (FastAP: AP = 1 with no
    negative; PNP: no negative ranks before a positive; histogram and DSM: no pair to compare)."""
    loss = create_method(name, None, num_classes=C, embedding_size=DIM).build_loss().double()
    x, y = reference_batch(0)[0], DEGENERATE[batch]
    ours, ours_grad = _value_and_gradient(lambda v: loss(v, y), x)
    ref, ref_grad = _value_and_gradient(lambda v: reference_for(name, loss, v, y), x)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-5, atol=1e-8)
    assert float(ref) == pytest.approx(0.0, abs=1e-12)


def test_library_histogram_drops_negative_pairs_between_samples_without_a_positive() -> None:
    """Ustinova & Lempitsky's S⁻ is every negative pair of the batch; pytorch-metric-learning
    builds its pairs from (anchor, positive, negative) triplets, so a negative pair of two
    samples that both lack a positive is left out (P×K batches, K ≥ 2, have none)."""
    x = reference_batch(0)[0][:8]
    y = torch.tensor([0, 0, 0, 1, 1, 2, 3, 4])  # 2, 3, 4: singletons
    lib = create_method("histogram", None, num_classes=C, embedding_size=DIM).build_loss()
    ours = lib(x, y)
    torch.testing.assert_close(
        ours, histogram_loss(x, y, 100, pairs_from_triplets=True), rtol=1e-5, atol=1e-8
    )
    assert abs(float(ours) - float(histogram_loss(x, y, 100))) > 1e-3


def test_library_pnp_counts_the_query_among_its_positives() -> None:
    """Li et al.'s P_q excludes the query; the library also averages over the query itself
    (R⁻ of s_qq = 1, near 0), so each query's mean has one term more."""
    x, y = reference_batch(0)
    h = METHODS.get("pnp").defaults
    ours = create_method("pnp", None, num_classes=C, embedding_size=DIM).build_loss()(x, y)
    paper = pnp(x, y, h, include_query=False)
    torch.testing.assert_close(ours, pnp(x, y, h, include_query=True))
    assert float(ours) < float(paper) - 0.1


@pytest.mark.parametrize("variant", ["Ds", "Dq", "Iu", "Ib"])
def test_pnp_variants_match_the_reference(variant: str) -> None:
    """The variants the search samples: each D(R⁻) of Li et al., AAAI 2022."""
    h = {**METHODS.get("pnp").defaults, "variant": variant}
    loss = create_method("pnp", h, num_classes=C, embedding_size=DIM).build_loss()
    x, y = reference_batch(1)
    ours, ours_grad = _value_and_gradient(lambda v: loss(v, y), x)
    ref, ref_grad = _value_and_gradient(lambda v: pnp(v, y, h, include_query=True), x)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-5, atol=1e-8)


def test_library_snr_contrastive_is_not_the_papers_average() -> None:
    """Yuan et al. average the contrastive terms over all pairs, on the raw features; the
    library normalises the embeddings first and averages the non-zero positive and the non-zero
    negative terms separately (then adds the two means)."""
    x, y = reference_batch(0)
    ours = create_method("snr-contrastive", None, C, DIM).build_loss()(x, y)
    torch.testing.assert_close(ours, snr_contrastive(x, y, 0.0, 1.0))
    assert abs(float(ours) - float(snr_contrastive(x, y, 0.0, 1.0, paper=True))) > 0.1


def test_library_p2sgrad_weight_gradient_is_not_tangential() -> None:
    """Eq. 11 differentiates cos θ_ij = <x̂_i, Ŵ_j>, which is tangent to W_j's sphere; the
    library renormalises W in ``.data`` and uses it unnormalised in the graph, so its gradient
    w.r.t. W_j is Σ_i (cos θ_ij − 1(j = y_i)) x̂_i · 2/(NC), with a radial part along W_j."""
    loss = create_method("p2sgrad", None, num_classes=C, embedding_size=DIM).build_loss().double()
    x, y = reference_batch(0)
    (w,) = _params(loss)
    (ours,) = torch.autograd.grad(loss(x, y), [w])
    (ref,) = torch.autograd.grad(p2sgrad(x, y, w), [w])
    torch.testing.assert_close(tangential(ours, w), ref)
    radial = (F.normalize(w.detach(), dim=0) * ours).sum(0)
    assert float(radial.abs().max()) > 1e-3


def test_dynamic_soft_margin_running_histogram_matches_the_reference() -> None:
    """Two batches: the second's weights come from (1 − μ) × the first's histogram + μ × its own."""
    loss = create_method("dynamic-soft-margin", None, C, DIM).build_loss().double()
    h = METHODS.get("dynamic-soft-margin").defaults
    (x0, y), (x1, _) = reference_batch(0), reference_batch(1)
    loss(x0, y)
    _, running = dynamic_soft_margin(x0, y, h["min_val"], int(h["num_bins"]))
    ours, ours_grad = _value_and_gradient(lambda v: loss(v, y), x1)

    def ref_fn(v: Tensor) -> Tensor:
        return dynamic_soft_margin(v, y, h["min_val"], 10, running, h["momentum"])[0]

    ref, ref_grad = _value_and_gradient(ref_fn, x1)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-5, atol=1e-8)


def test_dynamic_soft_margin_accepts_a_triplet_violated_by_more_than_1_6() -> None:
    """d = d_ap − d_an ∈ [1.6, 2) falls in the last bin, whose upper node (index ``num_bins``)
    the library's histogram does not have: the library's ``update_histogram`` indexed past its
    end (a RuntimeError); the entry counts such values in the last node."""
    loss = create_method("dynamic-soft-margin", None, C, 2).build_loss().double()
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.01], [0.99, 0.05]], dtype=torch.float64)
    assert torch.isfinite(loss(x, torch.tensor([0, 0, 1])))


# ---- every entry: decrease on a fixed batch, two finite training steps ------------------------


@pytest.mark.parametrize("name", CATALOGUE)
def test_loss_decreases_on_a_fixed_batch(name: str) -> None:
    torch.manual_seed(0)
    method = create_method(name, None, num_classes=8, embedding_size=16)
    loss = method.build_loss()
    x = torch.randn(32, 16, requires_grad=True)
    y = torch.arange(8).repeat_interleave(4)
    lr = 0.05
    opt = torch.optim.Adam([{"params": [x]}, *method.param_groups(loss, lr)], lr=lr)
    values = []
    for _ in range(15):
        value = loss(F.normalize(x, dim=1), y)
        opt.zero_grad()
        value.backward()
        opt.step()
        values.append(value.item())
    assert np.isfinite(values).all(), f"{name}: {values}"
    assert np.mean(values[-3:]) < values[0], f"{name}: {values[0]:.4f} -> {values[-3:]}"


@cache
def tiny() -> tuple[object, object]:
    from dmlbench.data import load_data
    from dmlbench.protocol import load_protocol

    protocol = load_protocol("glyphs-mini").with_overrides(
        {"data.params.num_classes": 40, "batch.size": 20, "optim.epochs": 1}, name="glyphs-tiny"
    )
    return protocol, load_data(protocol)


@pytest.mark.parametrize("name", CATALOGUE)
def test_two_training_steps_are_finite(name: str) -> None:
    from dmlbench.engine.train import train

    torch.set_num_threads(1)
    protocol, data = tiny()
    split = data.train  # type: ignore[attr-defined]
    method = create_method(name, None, split.num_classes, protocol.model.embedding_size)  # type: ignore[attr-defined]
    result = train(protocol, method, split, seed=0, max_steps=2, progress=False)
    assert result.steps == 2
    assert all(np.isfinite(p["loss"]) for p in result.curve)
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


def test_catalogue_entries_are_cited_with_sources() -> None:
    assert len(CATALOGUE) >= 23
    for name in CATALOGUE:
        cls = METHODS.get(name)
        assert issubclass(cls, CatalogueMethod)
        assert cls.paper and cls.defaults_source, name
        if cls.lr_mult_key is not None:  # a multiplier must say where its value comes from
            assert "lr" in cls.defaults_source or "multiplier" in cls.defaults_source, name
    assert METHODS.get("proxy-anchor").defaults["proxy_lr_mult"] == 100.0
    assert METHODS.get("soft-triple").defaults["proxy_lr_mult"] == 100.0


@pytest.mark.parametrize("name", [*CATALOGUE, "pml:CircleLoss", "pml:ProxyAnchorLoss"])
def test_search_space_samples_build_a_loss(name: str) -> None:
    """Every sampled configuration is a valid set of hyper-parameters of the method."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    cls = METHODS.get(name)
    for _ in range(2):
        hparams = cls.search_space(study.ask())
        assert "samples_per_class" in hparams
        method = create_method(name, hparams, num_classes=8, embedding_size=16)
        loss = method.build_loss()
        x = F.normalize(torch.randn(32, 16), dim=1)
        assert torch.isfinite(loss(x, torch.arange(8).repeat_interleave(4))), hparams
