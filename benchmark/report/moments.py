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
  so (MS_study + MS_class − MS_study×class)/(TS_tC) is unbiased for it. Its study part rests
  on T − 1 degrees of freedom, so the estimate is floored where σ̂²_α < 0 at the crossed
  estimate of the seeds within studies, (MS_seed(study) + MS_class − MS_resid)/(TS_tC): the
  study component truncated at 0. With T = 1 the nested estimate is the crossed one, to the
  bit (the same code runs).
- **Seeds only** (records without per-query values): the paired sample covariance over seeds
  (over study means and seeds within studies when nested).

The cross-products of two methods' arrays estimate the covariance of their means by the same
identities, so each part is a k × k matrix (divided by the cell count), and the variance of
any contrast is its quadratic form in each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CROSSED, SEEDS_ONLY = "crossed", "seeds"
#: The one-sided level of the upper confidence bound at which the study component is
#: simulated (:func:`_study_sim`): an 80% bound. Chosen by simulation (docs/reports.md): the
#: estimate itself (about a 50% bound) gave false *worse* 0.08–0.11 at α = 0.05, a 95% bound
#: 0.005–0.025, 75–85% bounds 0.02–0.06, over study sds 0–2× the seed sd.
STUDY_BOUND = 0.2


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
        contrast weights)."""
        return combine(self.quadratic(w), self.nested)

    def quadratic(self, w: np.ndarray) -> list[np.ndarray]:
        """Each part's quadratic form of each row of ``w``: seed, class, residual (and study,
        study × class when nested)."""
        return [np.einsum("mk,kl,ml->m", w, x, w) for x in self.parts]

    def satterthwaite(self, w: np.ndarray) -> np.ndarray:
        """Satterthwaite's degrees of freedom of each row's variance estimate (``w``: m × k):
        (a + b − r)² / (a²/ν_seed + b²/ν_class + r²/ν_resid), the df of the χ² that matches
        the estimate's first two moments under normality; the floored value where the moment
        estimate is floored (the interaction part alone). Nested rows whose study estimate
        (s + b − x) is the one used take (s + b − x)² / (s²/(T − 1) + b²/ν_class +
        x²/((T − 1)(C − 1)))."""
        q = self.quadratic(w)
        a, b, r = q[:3]
        v = _floored(a, b, r)
        nu_s, nu_c, nu_r = self.df
        has_cls = bool(np.any(self.cls))
        den = a * a / nu_s + (b * b / nu_c if has_cls else 0.0) + r * r / nu_r
        nu = np.where(a + b - r >= r, v * v / np.where(den > 0, den, np.inf), nu_r)
        if self.nested:
            s, x = q[3:]
            nested = s + b - x
            nu_t, nu_x = self.study_df
            den_t = s * s / nu_t + (b * b / nu_c if has_cls else 0.0) + x * x / nu_x
            nu_n = nested * nested / np.where(den_t > 0, den_t, np.inf)
            use = nested > v
            v, nu = np.where(use, nested, v), np.where(use, nu_n, nu)
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


def combine(q: list[np.ndarray], nested: bool) -> np.ndarray:
    """The floored variance from the parts' quadratic forms (:meth:`MeanCovariance.quadratic`):
    max(a + b − r, r, 0), and nested max(that, s + b − x) (module docstring)."""
    v = _floored(*q[:3])
    return np.maximum(v, q[3] + q[1] - q[4]) if nested else v


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
    (shrunk seed matrix + study × class − residual) plus the study component pooled over the
    methods at a one-sided upper confidence bound (level 1 − ``alpha``), μ_α on the diagonal.

    Each method's search is its own, so the selection luck is independent across methods (a
    diagonal target: μ_α·I, not a contrast-only μ_α·P, because defaults vs tuned compares
    each method's difference with 0, a row no contrast covers, and with one method P is 0),
    and T − 1 = 2 degrees of freedom per method cannot tell the methods' study variances
    apart; the intervals keep each pair's own estimate. The bound, not the estimate: a board
    whose studies happened to agree has small standard errors *and*, from the estimate, a
    small c (the simulated law then leans on the seeds' many degrees of freedom), so the two
    errors compound (false *worse* 0.08–0.11 at α = 0.05 with the study sd equal to the seed
    sd, docs/reports.md; :data:`STUDY_BOUND`). The pooled study mean square's contrast part
    is a scaled χ² on (k − 1)(T − 1) degrees of freedom (one method: its own, on T − 1); its
    upper bound, less what the seeds within studies imply, is μ_α (never below 0).
    """
    from scipy import stats

    assert mc.study is not None and mc.study_cls is not None
    k = len(mc.means)
    seed = mc.seed if mc.seed_sim is None else mc.seed_sim
    implied = seed + mc.study_cls - mc.resid
    if k > 1:
        p = np.eye(k) - 1.0 / k
        nu = (k - 1) * mc.study_df[0]
        pooled = float(np.trace(p @ mc.study @ p)) / (k - 1)
        below = float(np.trace(p @ implied @ p)) / (k - 1)
    else:
        nu, pooled, below = mc.study_df[0], float(mc.study[0, 0]), float(implied[0, 0])
    upper = pooled * nu / float(stats.chi2.ppf(alpha, nu))
    return implied + max(upper - below, 0.0) * np.eye(k)


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
