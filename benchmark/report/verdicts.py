"""Verdicts a statistician would sign: each method against the best of the others.

The question a board answers is "which methods are not worse than the best?", not "which pairs
differ?". Three choices follow, each from the failure it avoids:

- **Both sources of variance, crossed.** A board's number moves with the training seed and
  with the sample of test classes. Every seed of every method is scored on the same test
  classes, so the two factors are crossed, not nested: each bootstrap replicate resamples the
  seeds (one draw shared by every method, which keeps the seeds paired) and the test classes
  (one draw shared by every method and seed), and recomputes every method's mean over seeds.
  A seed-only test ignores the class component that more seeds cannot shrink; a class-only
  test ignores the seed component.
- **The right family: multiple comparisons with the best** (Hsu 1984; Hsu 1996, ch. 4). For
  method i the parameter is θ_i − max_{j≠i} θ_j, and its interval is Hsu's unconstrained MCB
  interval ``[min_j(Δ_ij − c·se_ij), min_j(Δ_ij + c·se_ij)]``, with Δ_ij the observed
  difference of means, se_ij its bootstrap standard error and c the bootstrap 1 − α quantile of
  the largest studentised deviation over the ordered pairs. The unconstrained form is the one
  that can say *worse* (its upper end can fall below 0; the constrained form stops at 0), and
  it needs the critical value over the pairs to keep its simultaneous coverage: with k equal
  methods the rate of any false *worse* then stays at α (the simulation test), where Holm
  against the observed best, or a Dunnett value with each method as the control, reaches about
  0.18. Only the k intervals against the best are reported, never the C(k, 2) pairs.
- **Three verdicts, not one mark.** *worse*: the interval lies below 0 (some other method is
  better, simultaneously at level α); *equivalent*: the interval lies inside ± δ, the
  protocol's declared practical-equivalence margin (a report setting, never part of the
  training hash); *undecided*: otherwise. Absence of evidence is never printed as equivalence.

Rank uncertainty comes from the same replicates: P(rank 1) and P(in the top 3).

Resampling S seeds with replacement gives the mean over seeds a variance of (S − 1)/S times
the unbiased one (0.8 at 5 seeds, 0.67 at 3): the interval would be too narrow exactly where
seeds are few. Each replicate therefore draws the seeds from the seed values spread out by
√(S/(S − 1)) around their mean (the adjusted residuals of Davison & Hinkley, *Bootstrap Methods
and their Application*, 1997, §3.3), which makes the seed component of the bootstrap variance
the unbiased one; the class component is left as it is (100 or more classes: a factor ≥ 0.99).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

WORSE, EQUIVALENT, UNDECIDED = "worse", "equivalent", "undecided"
N_BOOT = 2000


@dataclass(frozen=True)
class Replicates:
    """Observed means (k methods) and their bootstrap replicates (B × k)."""

    methods: tuple[str, ...]
    means: np.ndarray
    boot: np.ndarray


def _spread_seeds(per_seed: np.ndarray) -> np.ndarray:
    """Seed values (last axis) spread by √(S/(S − 1)) around their mean (module docstring)."""
    s = per_seed.shape[-1]
    if s < 2:
        return per_seed
    mean = per_seed.mean(axis=-1, keepdims=True)
    return mean + np.sqrt(s / (s - 1)) * (per_seed - mean)


def crossed_replicates(
    methods: tuple[str, ...],
    class_sums: np.ndarray,
    class_counts: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Replicates:
    """Means over seeds of a per-query metric, resampling seeds and test classes, crossed.

    Args:
        class_sums: (k methods, S seeds, C classes) sum of the per-query metric (a Recall@1
            hit is 0 or 1) over each class's queries.
        class_counts: (C,) queries per class (the same for every method and seed).
    """
    k, s, c = class_sums.shape
    rng = np.random.default_rng(seed)
    means = (class_sums.sum(axis=2) / class_counts.sum()).mean(axis=1)
    weights = rng.multinomial(c, np.full(c, 1.0 / c), size=n_boot).astype(np.float64)
    sums = (weights @ class_sums.reshape(k * s, c).T).reshape(n_boot, k, s)
    per_seed = _spread_seeds(sums / (weights @ class_counts)[:, None, None])
    seeds = rng.integers(0, s, size=(n_boot, s))
    boot = np.take_along_axis(per_seed, seeds[:, None, :], axis=2).mean(axis=2)
    return Replicates(methods, means, boot)


def seed_replicates(
    methods: tuple[str, ...], values: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
) -> Replicates:
    """Means over seeds (k methods × S seeds), resampling seeds only (paired across methods):
    for metrics without per-query records, whose class component is then not counted."""
    s = values.shape[1]
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, s, size=(n_boot, s))
    spread = _spread_seeds(values)
    return Replicates(methods, values.mean(axis=1), spread[:, seeds].mean(axis=2).T)


def compare_with_best(
    reps: Replicates, delta: float, alpha: float = 0.05, higher_is_better: bool = True
) -> pd.DataFrame:
    """Per method: the difference to the best of the others with its simultaneous interval,
    the verdict, P(rank 1) and P(top 3). Rows in the order of the observed means, best first.
    """
    sign = 1.0 if higher_is_better else -1.0
    mu, boot = sign * reps.means, sign * reps.boot
    k = len(mu)
    diff = mu[:, None] - mu[None, :]  # Δ_ij
    boot_diff = boot[:, :, None] - boot[:, None, :]
    se = boot_diff.std(axis=0, ddof=1)
    se = np.where(se > 0, se, np.inf)  # a pair that never varies cannot be told apart
    dev = (diff[None] - boot_diff) / se[None]  # (Δ_ij − Δ*_ij) / se_ij: j looking better
    dev[:, np.arange(k), np.arange(k)] = -np.inf
    c = float(np.quantile(dev.reshape(len(boot), -1).max(axis=1), 1 - alpha)) if k > 1 else 0.0
    rows = []
    for i in range(k):
        others = [j for j in range(k) if j != i]
        if not others:
            break
        se_i = se[i, others]
        half = np.zeros_like(se_i)  # a pair that never varies: a zero-width interval
        half[np.isfinite(se_i)] = c * se_i[np.isfinite(se_i)]
        lower = float((diff[i, others] - half).min())
        upper = float((diff[i, others] + half).min())
        verdict = UNDECIDED
        if upper < 0:
            verdict = WORSE
        elif lower >= -delta and upper <= delta:
            verdict = EQUIVALENT
        rows.append(
            {
                "method": reps.methods[i],
                "mean": float(reps.means[i]),
                "difference": sign * float(mu[i] - mu[others].max()),
                "lower": lower if sign > 0 else -upper,
                "upper": upper if sign > 0 else -lower,
                "verdict": verdict,
            }
        )
    out = pd.DataFrame(rows).set_index("method")
    ranks = (-boot).argsort(axis=1).argsort(axis=1)  # 0 = best in each replicate
    out["p_rank1"] = (ranks == 0).mean(axis=0)
    out["p_top3"] = (ranks < 3).mean(axis=0)
    return out.sort_values("mean", ascending=not higher_is_better)
