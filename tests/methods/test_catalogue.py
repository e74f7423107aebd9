"""The catalogue (methods/catalogue_*.py): references from the papers, decrease, two training steps.

One module, parametrised by method name, so the catalogue's checks are in one place:

* ``test_matches_reference_value_and_gradient``: Circle, ProxyAnchor, SoftTriple, SupCon,
  NT-Xent, NCA, Tuplet Margin (+ intra-pair variance), generalized lifted structure,
  Threshold-Consistent Margin, Smooth-AP,
  ArcFace, Sub-center ArcFace, CosFace, SphereFace and L-Softmax against per-sample loops written from the papers' equations (float64,
  value and gradient w.r.t. embeddings and the loss's own parameters);
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
        sum_p = sum(
            torch.exp(-gamma * max(1 + m - float(z[i] @ z[j]), 0.0) * (z[i] @ z[j] - (1 - m)))
            for j in pos
        )
        sum_n = sum(
            torch.exp(gamma * max(float(z[i] @ z[j]) + m, 0.0) * (z[i] @ z[j] - m)) for j in neg
        )
        terms.append(torch.log(1 + sum_n * sum_p))
    return torch.stack(terms).mean()


def proxy_anchor(x: Tensor, y: Tensor, proxies: Tensor, alpha: float, delta: float) -> Tensor:
    """Kim et al., CVPR 2020, eq. 4: positive term over proxies with a sample in the batch,
    negative term over all proxies."""
    s = F.normalize(x, dim=1) @ F.normalize(proxies, dim=1).t()
    with_pos = [c for c in range(len(proxies)) if bool((y == c).any())]
    pos = sum(torch.log(1 + torch.exp(-alpha * (s[y == c, c] - delta)).sum()) for c in with_pos)
    neg = sum(
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
        total = sum(weight.values())
        terms.append(-torch.log(sum(weight[j] for j in same) / total))
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
        inner = sum(torch.exp(scale * (z[a] @ z[n] - target)) for n in negatives)
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
        lp = torch.log(sum(torch.exp((z[a] - z[p]).norm() - pos_margin) for p in pos))
        ln = torch.log(sum(torch.exp(neg_margin - (z[a] - z[n]).norm()) for n in neg))
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


def _params(loss: torch.nn.Module) -> list[Tensor]:
    return [p for p in loss.parameters() if p.requires_grad]


def reference_for(name: str, loss: torch.nn.Module, x: Tensor, y: Tensor) -> Tensor:
    h = METHODS.get(name).defaults
    inner = getattr(loss, "loss", None)
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
]


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
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-8)
    for a, b in zip(ours_grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


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
    from dmlbench.train import train

    torch.set_num_threads(1)
    protocol, data = tiny()
    split = data.train  # type: ignore[attr-defined]
    method = create_method(name, None, split.num_classes, protocol.model.embedding_size)  # type: ignore[attr-defined]
    result = train(protocol, method, split, seed=0, max_steps=2, progress=False)  # type: ignore[arg-type]
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
