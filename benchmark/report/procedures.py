"""The procedures the calibration compares (:mod:`dmlbench.report.calibration`): the
package's verdicts and the deliberately broken variants the tests must catch.

Each takes one simulated board (per-class hit sums k × S × C and the queries per class), δ, a
seed and, where the board has several search studies, each seed's study, and returns the
verdict table of :func:`dmlbench.report.verdicts.compare_with_best` (``verdict`` per method).
The broken variants live here, and only here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from dmlbench.report.moments import with_study_sim
from dmlbench.report.verdicts import (
    EQUIVALENT,
    N_SIM,
    WORSE,
    MeanCovariance,
    compare_with_best,
    crossed_moments,
)

DELTA = 0.03  # the shipped protocols' equivalence margin: 3 Recall@1 points
ALPHA = 0.05
N_BOOT = 2000  # the replaced bootstrap's replicates


Procedure = Callable[..., pd.DataFrame]


def moments(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
            seed: int, n_sim: int = N_SIM, studies: np.ndarray | None = None,
            ) -> pd.DataFrame:  # fmt: skip
    """The package's procedure (:mod:`dmlbench.report.verdicts`); seeds nested in
    ``studies`` where the board has several."""
    mc = crossed_moments(methods, sums, counts, studies)
    return compare_with_best(mc, delta, ALPHA, seed=seed, n_sim=n_sim)


def no_study_level(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray,
                   delta: float, seed: int, n_sim: int = N_SIM,
                   studies: np.ndarray | None = None) -> pd.DataFrame:  # fmt: skip
    """Broken: the study level ignored, the seeds of all studies treated as exchangeable
    (each verdict conditions on its searches' luck)."""
    return moments(methods, sums, counts, delta, seed, n_sim)


def one_pool(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
             seed: int, n_sim: int = N_SIM, studies: np.ndarray | None = None,
             ) -> pd.DataFrame:  # fmt: skip
    """Broken: every method's study luck from one pool that no method leaves (no F test),
    so one catastrophic search widens every other method's interval."""
    mc = _one_pool(crossed_moments(methods, sums, counts, studies))
    return compare_with_best(mc, delta, ALPHA, seed=seed, n_sim=n_sim)


def _one_pool(mc: MeanCovariance) -> MeanCovariance:
    """``mc`` whose F test never lets a method leave the pool (level 0)."""
    return with_study_sim(replace(mc, own_level=0.0)) if mc.nested else mc


def unpaired(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
             seed: int, n_sim: int = N_SIM, studies: np.ndarray | None = None,
             ) -> pd.DataFrame:  # fmt: skip
    """Broken: the seeds treated as independent per method (their cross-products dropped)."""
    mc = _unpaired(crossed_moments(methods, sums, counts, studies))
    return compare_with_best(mc, delta, ALPHA, seed=seed, n_sim=n_sim)


def _unpaired(mc: MeanCovariance) -> MeanCovariance:
    """The seed matrix without its cross-products (seeds independent per method)."""
    seed = np.diag(np.diag(mc.seed))
    if mc.study is None:
        return replace(mc, seed=seed, seed_sim=seed)
    study = np.diag(np.diag(mc.study))
    return replace(mc, seed=seed, seed_sim=seed, study=study, study_sim=study)


def per_pair(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
             seed: int, n_sim: int = N_SIM, studies: np.ndarray | None = None,
             ) -> pd.DataFrame:  # fmt: skip
    """Broken: each pair's own 95% interval (c = z_0.975), not simultaneous over the pairs."""
    mc = crossed_moments(methods, sums, counts, studies)
    z = float(stats.norm.ppf(1 - ALPHA / 2))
    return compare_with_best(mc, delta, ALPHA, seed=seed, critical=z, n_sim=n_sim)


def bootstrap(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
              seed: int, n_boot: int = N_BOOT, studies: np.ndarray | None = None,
              ) -> pd.DataFrame:  # fmt: skip
    """Broken: the crossed bootstrap the package used before (seeds and classes resampled,
    seed values spread by √(S/(S − 1))), with Hsu's interval from its standard errors and
    its max-deviation quantile; it counts the seed × class interaction three times."""
    k, s, c = sums.shape
    rng = np.random.default_rng(seed)
    means = (sums.sum(axis=2) / counts.sum()).mean(axis=1)
    weights = rng.multinomial(c, np.full(c, 1.0 / c), size=n_boot).astype(np.float64)
    per_seed = (weights @ sums.reshape(k * s, c).T).reshape(n_boot, k, s)
    per_seed /= (weights @ counts)[:, None, None]
    centre = per_seed.mean(axis=2, keepdims=True)
    per_seed = centre + math.sqrt(s / (s - 1)) * (per_seed - centre)
    pick = rng.integers(0, s, size=(n_boot, s))
    boot = np.take_along_axis(per_seed, pick[:, None, :], axis=2).mean(axis=2)
    diff = means[:, None] - means[None, :]
    boot_diff = boot[:, :, None] - boot[:, None, :]
    se = boot_diff.std(axis=0, ddof=1)
    se = np.where(se > 0, se, np.inf)
    dev = (diff[None] - boot_diff) / se[None]
    dev[:, np.arange(k), np.arange(k)] = -np.inf
    crit = float(np.quantile(dev.reshape(n_boot, -1).max(axis=1), 1 - ALPHA))
    rows = []
    for i in range(k):
        others = [j for j in range(k) if j != i]
        lower = float((diff[i, others] - crit * se[i, others]).min())
        upper = float((diff[i, others] + crit * se[i, others]).min())
        verdict = WORSE if upper < 0 else EQUIVALENT if -delta <= lower and upper <= delta else ""
        rows.append({"method": methods[i], "lower": lower, "upper": upper, "verdict": verdict})
    return pd.DataFrame(rows).set_index("method")


def point_estimate(methods: tuple[str, ...], sums: np.ndarray, counts: np.ndarray, delta: float,
                   seed: int, n_sim: int = N_SIM, studies: np.ndarray | None = None,
                   ) -> pd.DataFrame:  # fmt: skip
    """Broken (for *equivalent* only): the package's *worse*, but *equivalent* wherever the
    point estimate of the difference to the best of the others lies inside ±δ."""
    out = moments(methods, sums, counts, delta, seed, n_sim, studies)
    near = (out["difference"].abs() <= delta) & (out["verdict"] != WORSE)
    return out.assign(verdict=np.where(near, EQUIVALENT, out["verdict"]))


PROCEDURES: dict[str, Procedure] = {
    "moments (this package)": moments,
    "crossed bootstrap (before)": bootstrap,
    "moments, seeds unpaired": unpaired,
    "per-pair intervals": per_pair,
    "point estimate inside ±δ": point_estimate,
    "moments, study level ignored": no_study_level,
    "moments, one pool for every search": one_pool,
}
#: The broken variants that only a board with several studies can show.
STUDY_ONLY = ("moments, study level ignored", "moments, one pool for every search")


def pair_se(
    procedure: str,
    methods: tuple[str, ...],
    board: tuple[np.ndarray, np.ndarray],
    studies: np.ndarray | None = None,
) -> float:
    """The procedure's standard error of the difference of methods 0 and 1."""
    if procedure == "crossed bootstrap (before)":
        sums, counts = board
        _k, s, c = sums.shape
        rng = np.random.default_rng(0)
        w = rng.multinomial(c, np.full(c, 1.0 / c), size=500).astype(np.float64)
        d = (sums[0] - sums[1]) @ w.T / (w @ counts)  # (S, B)
        d = d.mean(axis=1, keepdims=True) + math.sqrt(s / (s - 1)) * (
            d - d.mean(axis=1, keepdims=True)
        )
        pick = rng.integers(0, s, size=(500, s))
        return float(np.take_along_axis(d.T, pick, axis=1).mean(axis=1).std(ddof=1))
    ignored = procedure == "moments, study level ignored"
    mc = crossed_moments(methods, *board, None if ignored else studies)
    if procedure == "moments, seeds unpaired":
        mc = _unpaired(mc)
    if procedure == "moments, one pool for every search":
        mc = _one_pool(mc)
    w = np.zeros((1, len(methods)))
    w[0, :2] = [1.0, -1.0]
    return float(np.sqrt(mc.contrasts(w)[0]))
