"""Moment estimates of the covariance of k methods' means: seeds × classes crossed, seeds
nested in search studies.

:mod:`dmlbench.report.verdicts` compares methods from these; docs/reports.md derives them.

- **Crossed** (one study per tuned entry, or no search): y_sc = μ + a_s + b_c + e_sc, and
  (MS_seed + MS_class − MS_resid)/(SC) is unbiased for Var(ȳ) (McCullagh, Bernoulli 2000;
  Owen, Ann. Appl. Stat. 2007), floored at MS_resid/(SC) where no positive components allow
  it (Searle, Casella & McCulloch 1992, §4.6).
- **Nested** (T search studies per tuned entry, S_t seeds each, every seed scored on the same
  classes): y_tsc = μ + α_t + a_(t)s + b_c + γ_tc + e_tsc, α_t the study's selection luck. The
  five mean squares of the balanced layout have expectations
  E[MS_study] = σ²_e + Cσ²_a + S_tσ²_γ + S_tCσ²_α, E[MS_seed(study)] = σ²_e + Cσ²_a,
  E[MS_class] = σ²_e + S_tσ²_γ + TS_tσ²_b, E[MS_study×class] = σ²_e + S_tσ²_γ and
  E[MS_resid] = σ²_e, and Var(ȳ) = σ²_α/T + σ²_a/(TS_t) + σ²_b/C + σ²_γ/(TC) + σ²_e/(TS_tC),
  so (MS_study + MS_class − MS_study×class)/(TS_tC) is unbiased for it (:attr:`cov`). Its
  study part rests on T − 1 = 2 degrees of freedom per method, too few to judge a method
  by: the variance of a contrast is the crossed estimate of the seeds within studies,
  (MS_seed(study) + MS_class − MS_resid)/(TS_tC), plus each method's study component σ²_α/T
  (:func:`study_excess`), pooled over the methods ((k − 1)(T − 1) df) unless a method's own
  study mean square is beyond what the pool allows (an F test), which then keeps its own
  estimate. Searches are independent, so the methods' study components have no
  cross-products. With T = 1 the nested estimate is the crossed one, to the bit (the same
  code runs).
- **Seeds only** (records without per-query values): the paired sample covariance over seeds
  (over study means and seeds within studies when nested).

The cross-products of two methods' arrays estimate the covariance of their means by the same
identities, so each part is a k × k matrix (divided by the cell count), and the variance of
any contrast is its quadratic form in each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

CROSSED, SEEDS_ONLY = "crossed", "seeds"
#: The one-sided level of the upper confidence bound at which the study component is
#: simulated (:func:`_study_sim`): an 80% bound. Chosen by simulation when each pair carried
#: its own study estimate (docs/reports.md): the estimate itself (about a 50% bound) gave false
#: *worse* 0.08–0.11 at α = 0.05, a 95% bound 0.005–0.025, 75–85% bounds 0.02–0.06, over
#: study sds 0–2× the seed sd. With the pool (:func:`study_excess`) 50%, 80% and 95% bounds
#: gave the same rates within the Monte-Carlo error of 200 boards (AMD EPYC): the pooled rows'
#: Tukey–Kramer floor binds; kept as the conservative choice.
STUDY_BOUND = 0.2
#: The level of the one-sided F test (:func:`study_excess`) that keeps a method's own study
#: estimate instead of the pool's: a search whose studies disagree far beyond the others'
#: (one of them selected an unstable configuration) is judged on its own 2 df, never hidden
#: in the pool, and never widens the other methods' intervals. Chosen by simulation
#: (docs/reports.md).
OWN_STUDY_LEVEL = 0.01


@dataclass(frozen=True)
class MeanCovariance:
    """Observed means of k methods and the moment estimate of their sampling covariance.

    ``seed``, ``cls`` and ``resid`` are the k × k matrices of mean cross-products of the seed
    margin (of the seeds within studies, when nested), the class margin and the residual,
    each divided by S·C, so that ``seed + cls − resid`` estimates Cov(means) without bias when
    there is one study (module docstring); ``df`` their degrees of freedom. Nested designs
    add ``study`` (the study margin) and ``study_cls`` (study × class), with ``study_df``, and
    ``study + cls − study_cls`` is then the unbiased estimate. Seeds only: ``seed`` is the
    sample covariance over S, ``cls`` and ``resid`` 0.
    """

    methods: tuple[str, ...]
    means: np.ndarray
    seed: np.ndarray
    cls: np.ndarray
    resid: np.ndarray
    df: tuple[float, float, float]
    design: str = CROSSED
    seed_sim: np.ndarray | None = None  # the shrunk seed matrix the critical value simulates
    study: np.ndarray | None = None  # nested designs only, as are the three fields below
    study_cls: np.ndarray | None = None
    study_df: tuple[float, float] = (1.0, 1.0)
    study_sim: np.ndarray | None = None  # the study matrix the critical value simulates
    studies: int = 1
    own_level: float = OWN_STUDY_LEVEL  # the F test's level (study_excess)

    @property
    def nested(self) -> bool:
        """Whether seeds are nested in several search studies (a study level is estimated)."""
        return self.study is not None

    @property
    def cov(self) -> np.ndarray:
        """The unbiased moment estimate of Cov(means); may be indefinite."""
        if self.study is not None and self.study_cls is not None:
            return self.study + self.cls - self.study_cls
        return self.seed + self.cls - self.resid

    @property
    def between_studies(self) -> np.ndarray:
        """The study component of Cov(means) (σ²_α/T per pair of methods), may be indefinite;
        zeros with one study."""
        if self.study is None or self.study_cls is None:
            return np.zeros_like(self.seed)
        return self.study - self.study_cls - self.seed + self.resid

    @property
    def joint(self) -> np.ndarray:
        """The PSD covariance of the joint law: interaction + PSD part of the main components
        (+ PSD part of the study component, nested)."""
        out = self.resid + _psd(self.seed + self.cls - 2.0 * self.resid)
        return out + _psd(self.between_studies) if self.nested else out

    def contrasts(self, w: np.ndarray) -> np.ndarray:
        """The variance (floored, module docstring) of each row of ``w @ means`` (``w``: m × k
        contrast weights): nested, the seeds within studies' plus Σ w_i²·σ̂²_α,i/T."""
        v = combine(self.quadratic(w))
        return v + (w * w) @ self.study_excess().value if self.nested else v

    def implied(self) -> np.ndarray:
        """What the study matrix would be without selection luck (nested designs): the seeds
        within studies, the study × class interaction less the residual."""
        assert self.study_cls is not None
        return self.seed + self.study_cls - self.resid

    def study_excess(self) -> StudyExcess:
        """Each method's study component of Var(mean) and how it was estimated
        (:func:`study_excess`)."""
        assert self.study is not None
        return study_excess(self.study, self.implied(), self.study_df[0], self.own_level)

    def quadratic(self, w: np.ndarray) -> list[np.ndarray]:
        """Each part's quadratic form of each row of ``w``: seed, class, residual (and study,
        study × class when nested)."""
        return [np.einsum("mk,kl,ml->m", w, x, w) for x in self.parts]

    def satterthwaite(self, w: np.ndarray) -> np.ndarray:
        """Satterthwaite's degrees of freedom of each row's variance estimate (``w``: m × k):
        (a + b − r)² / (a²/ν_seed + b²/ν_class + r²/ν_resid), the df of the χ² that matches
        the estimate's first two moments under normality; the floored value where the moment
        estimate is floored (the interaction part alone). Nested rows add their methods' study
        components A = Σ w_i²·σ̂²_α,i/T (:func:`study_excess`) on the smallest of their df (a
        pool's parts are one estimate, not independent ones): v² / (v_w²/ν_w + A²/ν_A), v_w
        and ν_w the seeds within studies'."""
        q = self.quadratic(w)
        a, b, r = q[:3]
        v = _floored(a, b, r)
        nu_s, nu_c, nu_r = self.df
        has_cls = bool(np.any(self.cls))
        den = a * a / nu_s + (b * b / nu_c if has_cls else 0.0) + r * r / nu_r
        nu = np.where(a + b - r >= r, v * v / np.where(den > 0, den, np.inf), nu_r)
        if self.nested:
            ex = self.study_excess()
            part = (w * w) @ ex.value  # each row's study component
            used = (w != 0) & (ex.value > 0)
            nu_a = np.where(used, ex.nu, np.inf).min(axis=1)  # a pool's parts: one estimate
            den = v * v / np.where(nu > 0, nu, np.inf) + part**2 / nu_a
            v = v + part
            nu = v * v / np.where(den > 0, den, np.inf)
        return np.where(v > 0, np.maximum(nu, 1.0), np.inf)

    @property
    def parts(self) -> list[np.ndarray]:
        """The mean-square matrices: seed, class, residual (+ study, study × class)."""
        out = [self.seed, self.cls, self.resid]
        if self.study is not None and self.study_cls is not None:
            out += [self.study, self.study_cls]
        return out

    @property
    def parts_df(self) -> list[float]:
        """Each part's degrees of freedom, in the order of :attr:`parts`."""
        return [*self.df, *(self.study_df if self.nested else ())]


def combine(q: list[np.ndarray]) -> np.ndarray:
    """The floored variance from the seed, class and residual parts' quadratic forms
    (:meth:`MeanCovariance.quadratic`): max(a + b − r, r, 0) (module docstring)."""
    return _floored(*q[:3])


class StudyExcess(NamedTuple):
    """Each method's study component of Var(mean) and how it was estimated
    (:func:`study_excess`); arrays (…, k), batched like its inputs."""

    value: np.ndarray  # σ̂²_α,i/T, truncated at 0
    nu: np.ndarray  # its Satterthwaite df: the pool's, or the method's own (about T − 1)
    own: np.ndarray  # whether the method keeps its own estimate (left the pool)


def study_excess(
    study: np.ndarray, implied: np.ndarray, nu_t: float, level: float = OWN_STUDY_LEVEL
) -> StudyExcess:
    """Each method's study component of Var(mean) (σ²_α,i/T), batched over leading axes
    (the simulation's draws).

    ``study`` is the k × k study mean-square matrix (divided by the cell count, T − 1 =
    ``nu_t`` df), ``implied`` what the seeds within studies imply for it. A method's own
    estimate e_i = study_ii − implied_ii is unbiased but rests on 2 df: alone, its quantiles
    are t_2's. Two steps borrow strength across methods without hiding a method whose
    search is unstable:

    1. **The pool**: tr(P_S·B·P_S)/(n_S − 1), B = study − implied, over the pooled methods S
       (P_S their centring matrix: the shared seed effects of each study's seeds, alike for
       every method and resting on T − 1 df, cancel), on (n_S − 1)(T − 1) df.
    2. **Who leaves it**: a method whose study mean square exceeds its expectation under the
       pool of the others (implied_ii + their pool) beyond the one-sided F test's 1 − ``level``
       quantile keeps e_i (repeated until the pool is stable): one catastrophic search is
       judged on its own, and neither hidden in the pool nor widening every other interval.

    Truncated at 0, as a negative variance component is (Searle, Casella & McCulloch 1992,
    §4.6). One method alone keeps its own; two share their contrast's (nothing tells them
    apart).
    """
    from scipy import stats

    study, implied = np.asarray(study, np.float64), np.asarray(implied, np.float64)
    k = study.shape[-1]
    ms, expect = _diag(study), _diag(implied)  # each method's: a scaled χ² on T − 1 df
    own = np.full(ms.shape, k == 1)
    crit = np.concatenate([[np.inf, np.inf], stats.f.isf(level, nu_t, np.arange(1, k - 1) * nu_t)])
    for _ in range(k if k > 2 else 0):
        n_loo = (~own).sum(axis=-1, keepdims=True) - (~own)
        new = ms > crit[n_loo] * (expect + np.maximum(_pool_without(study - implied, ~own), 0.0))
        if np.array_equal(new, own):
            break
        own = new
    nu_p = np.maximum((~own).sum(axis=-1, keepdims=True) - 1, 1) * nu_t
    pool = _pooled(study - implied, ~own)
    value = np.where(own, ms - expect, pool)
    nu = np.where(own, _df(ms - expect, ms**2 / nu_t), _df(pool, _pooled(study, ~own) ** 2 / nu_p))
    return StudyExcess(np.maximum(np.nan_to_num(value), 0.0), nu, own)


def _df(estimate: np.ndarray, var_over_2: np.ndarray) -> np.ndarray:
    """Satterthwaite's df of one estimate, given Σ c²·MS²/ν of its mean squares; ≥ 1."""
    nu = estimate**2 / np.where(var_over_2 > 0, var_over_2, np.inf)
    return np.where(estimate != 0, np.maximum(np.nan_to_num(nu, nan=1.0), 1.0), np.inf)


def _diag(m: np.ndarray) -> np.ndarray:
    return np.diagonal(m, 0, -2, -1)


def _pooled(m: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """tr(P_S·m·P_S)/(n_S − 1) over the methods of ``pool`` (…, k), broadcast to (…, k)."""
    s = pool.astype(np.float64)
    n = s.sum(axis=-1, keepdims=True)
    a = (_diag(m) * s).sum(axis=-1, keepdims=True)
    b = np.einsum("...i,...ij,...j->...", s, m, s)[..., None]
    out = (a - b / np.maximum(n, 1)) / np.maximum(n - 1, 1)
    return np.broadcast_to(out, pool.shape)


def _pool_without(m: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Per method i, :func:`_pooled` over ``pool`` less i (the leave-one-out pool)."""
    s = pool.astype(np.float64)
    n = s.sum(axis=-1, keepdims=True) - s
    d = _diag(m)
    a = (d * s).sum(axis=-1, keepdims=True) - d * s
    row = np.einsum("...ij,...j->...i", m, s)
    b = np.einsum("...i,...ij,...j->...", s, m, s)[..., None] - s * (2 * row - d)
    return (a - b / np.maximum(n, 1)) / np.maximum(n - 1, 1)


def _floored(a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """max(a + b − r, r): the moment estimate, never below the interaction part alone."""
    return np.maximum(np.maximum(a + b - r, r), 0.0)


def _psd(m: np.ndarray) -> np.ndarray:
    """The nearest positive semi-definite matrix in Frobenius norm (negative eigenvalues → 0)."""
    vals, vecs = np.linalg.eigh((m + m.T) / 2)
    return (vecs * np.clip(vals, 0.0, None)) @ vecs.T


def _shrunk_seed(rows: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """The seed matrix the critical value simulates: its contrast part shrunk towards equal
    own variances (Ledoit & Wolf, J. Multivariate Anal. 2004, their estimated intensity).

    With S − 1 = 11 degrees of freedom for k = 10 methods the sample matrix spreads its
    eigenvalues far beyond the truth's, which makes pair contrasts look more correlated than
    they are and the simulated critical value too small (a false-*worse* rate of 0.07 at
    α = 0.05 in docs/reports.md's calibration). Only contrasts matter (a seed effect shared by
    every method cancels), so the shrinking happens in the space orthogonal to the ones
    vector: ``(1 − λ)·PΣ̂P + λ·μ·P``, μ the mean own variance there. Strongly unequal true
    variances keep λ small. ``rows``: (k, S) seed-margin deviations.
    """
    from sklearn.covariance import ledoit_wolf_shrinkage

    k = len(seed)
    if k < 3 or rows.shape[1] < 2:
        return seed
    p = np.eye(k) - 1.0 / k
    x = (p @ rows).T
    if not np.any(x):
        return seed
    lam = float(ledoit_wolf_shrinkage(x, assume_centered=True))
    inner = p @ seed @ p
    mu = float(np.trace(inner)) / (k - 1)
    return (1.0 - lam) * inner + lam * mu * p


def _study_sim(mc: MeanCovariance, alpha: float = STUDY_BOUND) -> np.ndarray:
    """The study matrix the critical value simulates: what the seeds within studies imply
    (shrunk seed matrix + study × class − residual) plus each method's study component on the
    diagonal (each search is its own: independent across methods): a method that keeps its
    own estimate (:func:`study_excess`) its own, the pooled methods the pool's one-sided
    upper confidence bound (level 1 − ``alpha``), μ_α.

    The bound, not the estimate: a board whose studies happened to agree has small standard
    errors *and*, from the estimate, a small c (the simulated law then leans on the seeds'
    many degrees of freedom), so the two errors compound (false *worse* 0.08–0.11 at α = 0.05
    with the study sd equal to the seed sd, docs/reports.md; :data:`STUDY_BOUND`). The pooled
    methods' study mean square (their contrasts') is taken as a scaled χ² on
    (n_S − 1)(T − 1) degrees of freedom; its upper bound, less what the seeds within studies
    imply, is μ_α (never below 0).
    """
    from scipy import stats

    assert mc.study is not None and mc.study_cls is not None
    seed = mc.seed if mc.seed_sim is None else mc.seed_sim
    implied = seed + mc.study_cls - mc.resid
    ex = mc.study_excess()
    value, own = ex.value, ex.own
    pool = ~own
    if pool.sum() > 1:
        nu = (int(pool.sum()) - 1) * mc.study_df[0]
        mean = float(_pooled(mc.study, pool)[0])
        upper = mean * nu / float(stats.chi2.ppf(alpha, nu))
        value = np.where(pool, max(upper - float(_pooled(implied, pool)[0]), 0.0), value)
    return implied + np.diag(value)


def study_groups(studies: np.ndarray | None, s: int) -> np.ndarray | None:
    """Each seed's study as 0…T − 1 (``studies``: one label per seed), or None where the
    design is not nested: one study, or one seed per study (each seed is then its own study
    and the crossed estimate of the seeds already holds the study's luck)."""
    if studies is None:
        return None
    labels, groups = np.unique(np.asarray(studies), return_inverse=True)
    if len(labels) < 2 or len(labels) >= s:
        return None
    return np.asarray(groups)


def crossed_moments(
    methods: tuple[str, ...],
    class_sums: np.ndarray,
    class_counts: np.ndarray,
    studies: np.ndarray | None = None,
) -> MeanCovariance:
    """Means over seeds of a per-query metric and their covariance, seeds × classes crossed
    (seeds nested in search studies where ``studies`` names several).

    Args:
        class_sums: (k methods, S seeds, C classes) sum of the per-query metric (a Recall@1
            hit is 0 or 1) over each class's queries; S ≥ 2 and C ≥ 2.
        class_counts: (C,) queries per class (the same for every method and seed).
        studies: (S,) each seed's search study (the records' ``study_index``); None or one
            value: one study.
    """
    k, s, c = class_sums.shape
    y = c * np.asarray(class_sums, dtype=np.float64) / float(np.sum(class_counts))
    means = y.mean(axis=(1, 2))
    row = y.mean(axis=2) - means[:, None]  # (k, S) seed margin
    col = y.mean(axis=1) - means[:, None]  # (k, C) class margin
    n = float(s * c)
    cls = s * (col @ col.T) / (c - 1) / n
    g = study_groups(studies, s)
    if g is None:
        res = (y - row[:, :, None] - col[:, None, :] - means[:, None, None]).reshape(k, s * c)
        seed = c * (row @ row.T) / (s - 1) / n
        resid = (res @ res.T) / ((s - 1) * (c - 1)) / n
        df = (s - 1, c - 1, (s - 1) * (c - 1))
        shrunk = _shrunk_seed(row, seed)
        return MeanCovariance(methods, means, seed, cls, resid, df, CROSSED, shrunk)
    t = int(g.max()) + 1
    per = np.stack([y[:, g == i, :].mean(axis=1) for i in range(t)], axis=1)  # (k, T, C)
    margin = per.mean(axis=2) - means[:, None]  # (k, T) study margin
    within = row - margin[:, g]  # (k, S) seeds within their study
    inter = per - margin[:, :, None] - col[:, None, :] - means[:, None, None]  # (k, T, C)
    res = y - row[:, :, None] - col[:, None, :] - inter[:, g, :] - means[:, None, None]
    res = res.reshape(k, s * c)
    spread = margin[:, g]  # each seed carries its study's margin: Σ_t S_t·m_t·m_tᵀ
    inter_s = inter[:, g, :].reshape(k, s * c)
    seed = c * (within @ within.T) / (s - t) / n
    resid = (res @ res.T) / ((s - t) * (c - 1)) / n
    study = c * (spread @ spread.T) / (t - 1) / n
    study_cls = (inter_s @ inter_s.T) / ((t - 1) * (c - 1)) / n
    out = MeanCovariance(
        methods, means, seed, cls, resid, (s - t, c - 1, (s - t) * (c - 1)), CROSSED,
        _shrunk_seed(within, seed), study, study_cls, (t - 1, (t - 1) * (c - 1)), None, t,
    )  # fmt: skip
    return with_study_sim(out)


def with_study_sim(mc: MeanCovariance) -> MeanCovariance:
    """``mc`` with the study matrix its critical value simulates (:func:`_study_sim`)."""
    from dataclasses import replace

    return replace(mc, study_sim=_study_sim(mc))


def seed_moments(
    methods: tuple[str, ...], values: np.ndarray, studies: np.ndarray | None = None
) -> MeanCovariance:
    """Means over seeds (k methods × S seeds) and their covariance over seeds only, paired
    across methods: for metrics without per-query records, whose class component is then not
    counted. With several ``studies`` (one label per seed): the study margin (T − 1 df) and
    the seeds within studies (S − T df), the latter the floor of the former."""
    values = np.asarray(values, dtype=np.float64)
    k, s = values.shape
    means = values.mean(axis=1)
    dev = values - values.mean(axis=1, keepdims=True)
    zero = np.zeros((k, k))
    g = study_groups(studies, s)
    if g is None:
        seed = (dev @ dev.T) / (s - 1) / s
        shrunk = _shrunk_seed(dev, seed)
        return MeanCovariance(methods, means, seed, zero, zero, (s - 1, 1, 1), SEEDS_ONLY, shrunk)
    t = int(g.max()) + 1
    margin = np.stack([dev[:, g == i].mean(axis=1) for i in range(t)], axis=1)
    within = dev - margin[:, g]
    spread = margin[:, g]
    seed = (within @ within.T) / (s - t) / s
    study = (spread @ spread.T) / (t - 1) / s
    out = MeanCovariance(
        methods, means, seed, zero, zero, (s - t, 1, 1), SEEDS_ONLY,
        _shrunk_seed(within, seed), study, zero, (t - 1, 1), None, t,
    )  # fmt: skip
    return with_study_sim(out)
