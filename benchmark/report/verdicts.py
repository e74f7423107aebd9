"""Verdicts a statistician would sign: each method against the best of the others.

The question a board answers is "which methods are not worse than the best?", not "which pairs
differ?". Four choices follow, each from the failure it avoids:

- **Both sources of variance, crossed, each counted once.** A board's number moves with the
  training seed and with the sample of test classes. Every seed of every method is scored on
  the same test classes, so the two factors are crossed, not nested. Write a method's
  per-seed, per-class values as y_sc = C·h_sc / N (h_sc the sum of the per-query metric over
  class c's queries on seed s, N the queries of all C classes), so that their grand mean is the
  method's mean over seeds whatever the classes' query counts. Under the random-effects model
  y_sc = μ + a_s + b_c + e_sc (seed, class and seed × class parts, the last mostly query
  noise), Var(ȳ) = σ²_a/S + σ²_b/C + σ²_e/(SC), and the two-way ANOVA mean squares have
  expectations E[MS_seed] = σ²_e + C·σ²_a, E[MS_class] = σ²_e + S·σ²_b, E[MS_resid] = σ²_e, so
  (MS_seed + MS_class − MS_resid)/(SC) is unbiased for Var(ȳ). The identity holds for any
  separately exchangeable seeds × classes array, without normality (McCullagh, Bernoulli
  2000; Owen, Ann. Appl. Stat. 2007). The same identity on the cross-products of two methods'
  arrays estimates the covariance of their means, so the k × k covariance of the method means
  comes from three k × k matrices of mean cross-products, and the variance of a difference
  is that of the array of per-seed-per-class differences (docs/reports.md derives it). The
  crossed bootstrap used before resampled seeds and classes and so counted σ²_e three times
  (once in each resampled margin and once as itself): its standard errors were 1.3–1.5× the
  truth on the committed boards, and the false-*worse* rate under ties was 0.004 at α = 0.05.
- **The estimate is floored where it cannot be right.** A moment estimate can fall below the
  interaction part alone, σ̂²_e/(SC) (when MS_seed + MS_class < 2·MS_resid), which no positive
  components allow: the variance of a difference is then set to MS_resid/(SC), i.e. both main
  components are truncated at 0 together (Searle, Casella & McCulloch, *Variance Components*,
  1992, §4.6). For the joint law, the matrix of the two main components is projected onto the
  positive semi-definite cone (negative eigenvalues to 0) and added to the interaction matrix,
  which is a Gram matrix and so already PSD.
- **The right family: multiple comparisons with the best** (Hsu 1984; Hsu, *Multiple
  Comparisons*, 1996, ch. 4). For method i the parameter is θ_i − max_{j≠i} θ_j, and its
  interval is Hsu's unconstrained MCB interval ``[min_j(Δ_ij − c·se_ij), min_j(Δ_ij +
  c·se_ij)]``, with Δ_ij the observed difference, se_ij its standard error (above) and c the
  1 − α quantile of the largest studentised deviation max_{i≠j} |Δ̂_ij − Δ_ij| / ŝe_ij. That
  quantile is simulated (:data:`N_SIM` draws) under the fitted normal random-effects model, a
  parametric bootstrap of the studentised statistic itself: each draw takes a normal deviation
  of the means (the floored PSD covariance) and, independently (as the mean and the mean
  squares are under normality), the three mean-square matrices as Wishart draws with their
  expectations and degrees of freedom (S − 1, C − 1, (S − 1)(C − 1)), from which its standard
  errors are computed and floored exactly as the data's are. So the 11 degrees of freedom of
  12 seeds, and the fact that each pair's variance estimate has its own noise, are in c.
  Plugged in as they are, the matrices make c too small: a k × k seed matrix from S − 1
  degrees of freedom spreads its eigenvalues, so pair contrasts look more correlated than
  they are (false *worse* 0.065–0.07 on a glyphs-mini generator). Two corrections: the
  simulation shrinks the seed matrix's contrast part towards equal own variances (Ledoit &
  Wolf's intensity, :func:`_shrunk_seed`), and c is never below Tukey–Kramer's
  q_{1−α}(k, ν_min)/√2 with ν_min the smallest Satterthwaite df over the pairs
  (:func:`pairs_floor`), conservative for independent own parts (Hayter 1984). The
  unconstrained form is the one that can say *worse* (its upper end can fall below 0); with
  k equal methods the rate of any false *worse* is then about α (the event "some method is
  called worse" is the event "the largest deviation exceeds c").
- **Three verdicts, not one mark.** *worse*: the interval lies below 0 (some other method is
  better, simultaneously at level α); *equivalent*: the interval lies inside ± δ, the
  protocol's declared practical-equivalence margin (a report setting, never part of the
  training hash); *undecided*: otherwise. Absence of evidence is never printed as
  equivalence.

Seeds only (records without per-query values): the sample covariance of the methods' per-seed
values over S, paired across methods (a seed fixes every method's initialisation and batch
order alike), with S − 1 degrees of freedom; the class component is then not counted, and the
board prints no *equivalent* (``equivalence=False``).

Seeds nested in search studies (``search.studies``: several independent searches per tuned
entry, each retrained on its share of the seeds) add the study and study × class matrices with
T − 1 and (T − 1)(C − 1) df (:mod:`dmlbench.report.moments`, which holds every moment
estimate). Each method's study component (the search's own luck) is pooled over the methods
unless an F test lets its unstable search keep its own 2-df estimate
(:func:`~dmlbench.report.moments.study_excess`); it enters each standard error, its
Satterthwaite df and, as two more Wishart draws, the simulated critical value, the pool
simulated at an upper confidence bound. The rows' df then differ by an order of magnitude, so
each row gets its own critical value at a common marginal level (:func:`critical_value`;
docs/reports.md, "Where the search enters").

Rank uncertainty comes from the same law: P(rank 1) and P(in the top 3) are the shares of
normal draws of the means (around the observed ones) in which a method ranks first, top 3.
:mod:`dmlbench.report.calibration` checks the error rates by simulation (docs/reports.md).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pandas as pd

from dmlbench.report.moments import (
    CROSSED,
    SEEDS_ONLY,
    MeanCovariance,
    combine,
    crossed_moments,
    seed_moments,
    study_excess,
)

__all__ = [
    "CROSSED",
    "EQUIVALENT",
    "N_SIM",
    "SEEDS_ONLY",
    "UNDECIDED",
    "WORSE",
    "MeanCovariance",
    "compare_with_best",
    "critical_value",
    "crossed_moments",
    "deviation_draws",
    "pairs_floor",
    "rows_floor",
    "seed_moments",
]

WORSE, EQUIVALENT, UNDECIDED = "worse", "equivalent", "undecided"
N_SIM = 4000  # draws of the joint law for c and the rank probabilities


def _wishart(scale: np.ndarray, df: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws (n × k × k) of Wishart(df, scale) / df: what a mean-square matrix with
    expectation ``scale`` and ``df`` degrees of freedom looks like under normality. Direct
    sums of squares below k + 2 degrees of freedom, Bartlett's decomposition above."""
    k = len(scale)
    vals, vecs = np.linalg.eigh((scale + scale.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    d = round(df)
    if d < k + 2:
        g = root @ rng.standard_normal((n, k, d))
        return g @ g.transpose(0, 2, 1) / d
    a = np.tril(rng.standard_normal((n, k, k)), -1)
    idx = np.arange(k)
    a[:, idx, idx] = np.sqrt(rng.chisquare(d - idx, size=(n, k)))
    la = root @ a
    return la @ la.transpose(0, 2, 1) / d


def pair_contrasts(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, w)``: the unordered pairs i < j and their contrast rows e_i − e_j."""
    i, j = np.triu_indices(k, 1)
    w = np.zeros((len(i), k))
    w[np.arange(len(i)), i] = 1.0
    w[np.arange(len(i)), j] = -1.0
    return i, j, w


def law_draws(mc: MeanCovariance, n: int = N_SIM, seed: int = 0) -> np.ndarray:
    """``n`` draws (n × k) of the means' deviations from a normal with the PSD covariance."""
    vals, vecs = np.linalg.eigh(mc.joint)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    return np.random.default_rng(seed).standard_normal((n, len(mc.means))) @ root.T


@lru_cache(maxsize=512)
def _range_quantile(k: int, nu: int, alpha: float) -> float:
    """q_{1−α}(k, ν)/√2: the Tukey–Kramer critical value of the k(k − 1)/2 pairs (ν ≥ 1000
    is taken as infinite). Cached: scipy integrates it numerically (≈ 0.1 s)."""
    from scipy import stats

    df = np.inf if nu >= 1000 else float(nu)
    return float(stats.studentized_range.ppf(1 - alpha, k, df)) / math.sqrt(2.0)


def pairs_floor(mc: MeanCovariance, alpha: float) -> np.ndarray:
    """The floor of Hsu's critical value of each pair: Tukey–Kramer's q_{1−α}(k, ν)/√2. For
    means whose own parts are independent the studentised range is the least favourable
    correlation of the pair contrasts (Hayter, Ann. Stat. 1984): a conservative bound for
    the case the plug-in simulation gets wrong (module docstring). One study: ν is the
    smallest Satterthwaite df over the pairs (rounded down), one floor for all, as c is one.
    Nested: per row, as :func:`_row_df` says."""
    k = len(mc.means)
    w = pair_contrasts(k)[2]
    if k < 2:
        return np.zeros(len(w))
    return np.array([_range_quantile(k, int(nu), alpha) for nu in _row_df(mc, w)])


def _row_df(mc: MeanCovariance, w: np.ndarray) -> np.ndarray:
    """Each row's df for its floor, rounded down (≥ 1000: infinite). One study: the smallest
    over the rows, for every row. Nested: the smallest over the rows whose methods share the
    pooled study component and over the seeds within studies, for every such row; a row of a
    method that keeps its own study estimate its own df (t_2's tail for it, not for all)."""
    nu = mc.satterthwaite(w)
    pooled = np.isfinite(nu)
    low = nu[pooled].min() if pooled.any() else 1000.0
    if mc.nested:  # rows of a method with its own study estimate: their own df
        pooled &= ~((w != 0) @ mc.study_excess().own > 0)
        within = replace(mc, study=None, study_cls=None, study_sim=None).satterthwaite(w)
        low = min([*nu[pooled], *within[np.isfinite(within)], 1000.0])
    nu = np.where(pooled | ~np.isfinite(nu), low, nu)
    return np.maximum(np.floor(nu), 1.0)


def rows_floor(mc: MeanCovariance, w: np.ndarray, alpha: float) -> np.ndarray:
    """The floor of a max-|t| critical value over the m rows of ``w`` that are not pairs
    (defaults vs tuned: each method's difference against 0): Šidák's t quantile
    t_ν(1 − (1 − (1 − α)^{1/m})/2), conservative for two-sided max-|t| (Šidák, JASA 1967),
    ν as in :func:`pairs_floor`."""
    from scipy import stats

    if not np.isfinite(mc.satterthwaite(w)).any():
        return np.zeros(len(w))
    level = 1 - (1 - (1 - alpha) ** (1 / len(w))) / 2
    return np.asarray(stats.t.ppf(level, _row_df(mc, w)), dtype=np.float64)


def critical_value(
    mc: MeanCovariance,
    w: np.ndarray,
    alpha: float,
    n: int = N_SIM,
    seed: int = 0,
    floor: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Each row's critical value: the 1 − α quantile of max |w·(m̂ − m)| / ŝe over the rows
    of ``w`` whose variance is positive, under the fitted normal model with the shrunk seed
    matrix (module docstring), never below ``floor``: each of ``n`` draws pairs a normal
    deviation of the means with independent draws of the mean-square matrices, from which
    its standard errors are estimated as the data's are; ``floor`` when no row varies.

    One study: one c for every row (Hsu's), the rows' df coming from the same three parts.
    Nested: the rows' df differ by an order of magnitude (a method that keeps its own 2-df
    study estimate against the pool's dozens), and a common c would be set by the few
    heavy-tailed rows. So each row gets its own quantile at a common marginal level
    (Beran's balanced simultaneous confidence set, JASA 1988): every draw's rows are
    turned into two-sided t tail probabilities on the rows' Satterthwaite df, the α quantile
    p* of their minimum is simulated, and row r's c is t_{ν_r} at 1 − p*/2. Coverage of the
    family is 1 − α by construction; a row's width follows its own df.
    """
    floor = np.broadcast_to(np.asarray(floor, dtype=np.float64), (len(w),))
    ok = mc.contrasts(w) > 0
    if not ok.any():
        return floor.copy()
    t = _studentised_draws(mc, w[ok], n, seed)
    if not mc.nested:
        return np.maximum(float(np.quantile(t.max(axis=1), 1 - alpha)), floor)
    from scipy import stats

    nu = np.minimum(mc.satterthwaite(w[ok]), 1e6)
    level = float(np.quantile((2 * stats.t.sf(t, nu)).min(axis=1), alpha))
    out = floor.copy()
    out[ok] = np.maximum(stats.t.isf(level / 2, nu), floor[ok])
    return out


def _studentised_draws(mc: MeanCovariance, w: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` draws (n × m) of |w·(m̂ − m)| / ŝe under the fitted law (:func:`critical_value`)."""
    dev, se = deviation_draws(mc, w, n, seed)
    return np.abs(dev) / np.where(se > 0, se, np.inf)


def deviation_draws(
    mc: MeanCovariance, w: np.ndarray, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws (each n × m) of the deviation w·(m̂ − m) and of its estimated standard
    error under the fitted law: a normal deviation of the means and, independently (as under
    normality), Wishart draws of every mean-square matrix, from which the standard errors are
    estimated as the data's are. :func:`critical_value` studentises them;
    :mod:`dmlbench.report.power` asks how large a gap they let a board find."""
    sim = mc if mc.seed_sim is None else replace(mc, seed=mc.seed_sim)
    if sim.study_sim is not None:
        sim = replace(sim, study=sim.study_sim)
    z = law_draws(sim, n, seed)
    rng = np.random.default_rng([seed, 1])
    k = w.shape[1]
    drawn = [_wishart(x, df, n, rng) if np.any(x) else np.zeros((n, k, k))
             for x, df in zip(sim.parts, sim.parts_df, strict=True)]  # fmt: skip
    v = combine([((d @ w.T) * w.T).sum(axis=1) for d in drawn[:3]])  # n × m quadratic forms
    if sim.nested:
        seed_d, _cls, resid_d, study_d, study_cls_d = drawn
        implied = seed_d + study_cls_d - resid_d
        v = v + study_excess(study_d, implied, sim.study_df[0], sim.own_level).value @ (w * w).T
    return z @ w.T, np.sqrt(np.maximum(v, 0.0))


def compare_with_best(
    mc: MeanCovariance,
    delta: float,
    alpha: float = 0.05,
    higher_is_better: bool = True,
    seed: int = 0,
    critical: float | None = None,
    n_sim: int = N_SIM,
    equivalence: bool = True,
    span: float | None = None,
) -> pd.DataFrame:
    """Per method: the difference to the best of the others with its simultaneous interval,
    the verdict, P(rank 1) and P(top 3). Rows in the order of the observed means, best first.

    ``critical`` replaces the critical value c (only :mod:`dmlbench.report.calibration`
    does, to show what per-pair intervals would claim). Without ``equivalence`` no method is
    called *equivalent* (records without per-query values: the intervals miss the test-query
    component, so "inside ±δ" would be a claim they cannot back). ``span``: the width of the
    range the metric's means live in (1 for a fraction), when it has one: every gap lies in
    ± that, and an interval is cut to it (a confidence set intersected with the parameter
    space keeps its coverage; no verdict changes). It matters where a method with its own
    2-df study estimate makes every lower end wide.
    """
    sign = 1.0 if higher_is_better else -1.0
    mu = sign * mc.means  # the covariance is unchanged by the sign
    k = len(mu)
    pi, pj, w = pair_contrasts(k)
    var = mc.contrasts(w)
    se = np.zeros((k, k))
    se[pi, pj] = se[pj, pi] = np.sqrt(var)
    draws = law_draws(mc, n_sim, seed)
    c = np.zeros((k, k))
    if critical is not None:
        c[:] = critical
    elif k > 1:
        c[pi, pj] = c[pj, pi] = critical_value(mc, w, alpha, n_sim, seed, pairs_floor(mc, alpha))
    diff = mu[:, None] - mu[None, :]  # Δ_ij
    rows = []
    for i in range(k):
        others = [j for j in range(k) if j != i]
        if not others:
            break
        half = c[i, others] * se[i, others]  # a pair that never varies: zero width
        lower = float((diff[i, others] - half).min())
        upper = float((diff[i, others] + half).min())
        if span is not None:
            lower, upper = max(lower, -span), min(upper, span)
        verdict = UNDECIDED
        if upper < 0:
            verdict = WORSE
        elif equivalence and lower >= -delta and upper <= delta:
            verdict = EQUIVALENT
        rows.append(
            {
                "method": mc.methods[i],
                "mean": float(mc.means[i]),
                "difference": sign * float(mu[i] - mu[others].max()),
                "lower": lower if sign > 0 else -upper,
                "upper": upper if sign > 0 else -lower,
                "verdict": verdict,
            }
        )
    out = pd.DataFrame(rows).set_index("method")
    ranks = (-(mu + draws)).argsort(axis=1).argsort(axis=1)  # 0 = best in each draw
    out["p_rank1"] = (ranks == 0).mean(axis=0)
    out["p_top3"] = (ranks < 3).mean(axis=0)
    return out.sort_values("mean", ascending=not higher_is_better)
