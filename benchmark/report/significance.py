"""Is a gap between methods on one board real? Paired seed tests, Holm, class bootstrap, ranks.

Musgrave et al. ("A Metric Learning Reality Check", ECCV 2020) showed that many published gains
in deep metric learning shrink or vanish when methods are compared fairly and over several seeds;
a table of means cannot tell a real gap from seed noise. Here are the numbers a reviewer asks for
when methods are compared on one protocol (a "board"): paired t-tests over seeds, Holm-corrected
over all pairs (:func:`paired_seed_tests`, :func:`holm`), the methods not separable from the best
(:func:`not_worse_than_best`), bootstrap intervals over test queries that resample whole classes
(:func:`class_bootstrap_interval`, :func:`paired_bootstrap`), and whether another seed or other
queries would reorder the board (:func:`ranking_stability`, :func:`bootstrap_rank_stability`).
``scores`` frames have columns ``method``, ``seed`` and the metric (one row per run); hits are
per-query 0/1 arrays; ``higher_is_better=False`` serves metrics such as label distances.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

TEST_COLUMNS = ["a", "b", "n_seeds", "mean_diff", "p", "p_holm", "note"]
_BUDGET = 2_000_000  # resampled elements materialised at once, as in dmlbench.metrics.stats


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (Holm, Scand. J. Statistics 1979), in input order.

    The i-th smallest of m p-values is multiplied by ``m − i + 1``, then made monotone (running
    maximum) and capped at 1; rejecting where the adjusted value is below α controls the
    family-wise error rate at α, and is uniformly more powerful than plain Bonferroni. NaN
    p-values (pairs that could not be tested) stay NaN and do not count in m.
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]
    m = order.size
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def _check(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    missing = {"method", "seed", metric} - set(scores.columns)
    if missing:
        raise ValueError(f"scores lack column(s) {sorted(missing)}")
    data = scores.loc[scores[metric].notna(), ["method", "seed", metric]]
    if data.duplicated(["method", "seed"]).any():
        raise ValueError("scores have several rows for one (method, seed)")
    return data


def method_means(scores: pd.DataFrame, metric: str, higher_is_better: bool = True) -> pd.Series:
    """Mean over seeds per method, best first (ties by name)."""
    return _best_first(_check(scores, metric).groupby("method")[metric].mean(), higher_is_better)


def _best_first(values: pd.Series, higher_is_better: bool) -> pd.Series:
    return values.sort_index().sort_values(ascending=not higher_is_better, kind="stable")


def paired_seed_tests(
    scores: pd.DataFrame, metric: str, higher_is_better: bool = True
) -> pd.DataFrame:
    """Paired t-test (``scipy.stats.ttest_rel``) of every pair of methods over shared seeds.

    Paired by seed because a seed fixes the initial weights, batch order and augmentation draws
    of every method, so that share of the randomness cancels in the difference. Holm-corrected
    (``p_holm``) over all pairs because ten methods make 45 comparisons, of which about two would
    pass α = 0.05 by chance alone. Rows are pairs ``(a, b)``, ``a`` ahead of ``b`` in
    :func:`method_means` order; ``mean_diff`` is the mean of ``score_a − score_b`` over the
    shared seeds (metric units; positive: a is higher). Fewer than two shared seeds leave ``p``
    NaN, with a ``note``: a t-test needs a spread. NaN is never read as significant.
    """
    data = _check(scores, metric)
    wide = data.pivot(index="seed", columns="method", values=metric)
    rows = []
    for a, b in itertools.combinations(method_means(data, metric, higher_is_better).index, 2):
        pair = wide[[a, b]].dropna()
        row = {"a": a, "b": b, "n_seeds": len(pair), "p": math.nan, "note": ""}
        diff = (pair[a] - pair[b]).to_numpy()
        row["mean_diff"] = float(diff.mean()) if diff.size else math.nan
        if diff.size < 2:
            row["note"] = f"{diff.size} shared seed(s): no test"
        else:
            with warnings.catch_warnings():  # constant differences: scipy warns, gives p=0
                warnings.simplefilter("ignore", RuntimeWarning)
                row["p"] = float(stats.ttest_rel(pair[a], pair[b]).pvalue)
            if np.ptp(diff) == 0:
                row["note"] = "same difference on every shared seed"
        rows.append(row)
    out = pd.DataFrame(rows, columns=TEST_COLUMNS)
    out["p_holm"] = holm(out["p"].to_numpy(dtype=np.float64))
    out.attrs.update(metric=metric, higher_is_better=higher_is_better)
    return out


def _resampled_means(
    values: np.ndarray, groups: np.ndarray | None, n_boot: int, seed: int
) -> np.ndarray:
    """``(n_boot, k)`` means of the ``k`` rows of ``values`` over resampled queries or clusters.

    Each query is its own cluster without ``groups``. A resample draws as many clusters as there
    are, with replacement, and the same draw serves every row (paired resampling). Done in
    chunks so at most ``_BUDGET`` elements exist at once, whatever the number of queries.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if groups is None:
        sums, counts = values, np.ones(values.shape[1])
    else:
        _, codes = np.unique(np.asarray(groups).reshape(-1), return_inverse=True)
        sums = np.stack([np.bincount(codes, weights=row) for row in values])
        counts = np.bincount(codes).astype(np.float64)
    rng = np.random.default_rng(seed)
    n = counts.size
    means = np.empty((n_boot, values.shape[0]))
    chunk = max(1, _BUDGET // n)  # one (chunk, n) gather at a time: row by row is also faster
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
        size = n if groups is None else counts[idx].sum(axis=1)
        total = np.stack([row[idx].sum(axis=1) for row in sums], axis=1)
        means[start : start + len(idx)] = total / np.reshape(size, (-1, 1))
    return means


def class_bootstrap_interval(
    hits: np.ndarray, groups: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval ``(lo, hi)`` of the mean hit rate, resampling query classes.

    Why classes and not queries: the queries of one class are retrieved against the same gallery
    items of that class, so their hits rise and fall together (a class the model confuses with
    another fails for most of its queries). Resampling queries as if independent, as
    :func:`~dmlbench.metrics.stats.bootstrap_mean` does, understates the spread; resampling whole
    classes (a cluster bootstrap; Davison & Hinkley, "Bootstrap Methods and their Application",
    CUP 1997, on hierarchical data) keeps that dependence. The statistic is the pooled hit rate
    of the resampled queries, i.e. Recall@1 as evaluation computes it. Fewer than two classes
    give ``(nan, nan)``: there is no between-class spread to estimate.
    """
    hits = np.asarray(hits, dtype=np.float64).reshape(-1)
    groups = np.asarray(groups).reshape(-1)
    if hits.shape != groups.shape:
        raise ValueError("hits and groups differ in length")
    if np.unique(groups).size < 2:
        return math.nan, math.nan
    means = _resampled_means(hits, groups, n_boot, seed)[:, 0]
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedBootstrap:
    """Difference of mean hits ``a − b``, its percentile interval and a two-sided p-value."""

    diff: float
    lo: float
    hi: float
    p: float


def paired_bootstrap(
    hits_a: np.ndarray,
    hits_b: np.ndarray,
    groups: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedBootstrap:
    """Bootstrap the difference of two models' mean hits on the same test queries.

    Both models are scored on the same resampled queries (or classes, with ``groups``): the
    difficulty a query shares across models cancels, as in a paired test, which is why this is
    far tighter than comparing two separate intervals. The p-value is that of the null-centred
    bootstrap (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 16): the share
    of resampled differences at least as far from the observed one as the observed one is from
    zero, as ``(1 + count) / (1 + n_boot)`` so it is never an impossible 0.
    """
    a, b = (np.asarray(h, dtype=np.float64).reshape(-1) for h in (hits_a, hits_b))
    if a.shape != b.shape or (groups is not None and np.size(groups) != a.size):
        raise ValueError("hits_a, hits_b (and groups) must cover the same queries")
    if a.size == 0:
        return PairedBootstrap(math.nan, math.nan, math.nan, math.nan)
    diff = float(a.mean() - b.mean())
    boot = _resampled_means(np.stack([a, b]), groups, n_boot, seed)
    d = boot[:, 0] - boot[:, 1]
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
    p = (1 + np.count_nonzero(np.abs(d - diff) >= abs(diff) - 1e-12)) / (1 + n_boot)
    return PairedBootstrap(diff, float(lo), float(hi), float(p))


@dataclass(frozen=True)
class BestSet:
    """The methods a board cannot separate from its best one (``best`` first in ``methods``).

    ``claimable`` is False when no pair of methods shares two seeds: then no gap can be tested,
    every method is listed and ``best`` is only the highest mean, not a claim.
    """

    best: str | None
    methods: list[str]
    claimable: bool
    note: str


def not_worse_than_best(
    tests: pd.DataFrame,
    means: pd.Series | Mapping[str, float],
    alpha: float = 0.05,
    higher_is_better: bool = True,
) -> BestSet:
    """Best method by mean, and every method whose gap to it is not significant (Holm, ``alpha``).

    A method leaves the set only when its paired test against the best has ``p_holm < alpha``
    and the paired difference favours the best: "best" is claimed only where a gap exceeds the
    seed-to-seed spread (Musgrave et al., ECCV 2020). Untestable pairs (NaN p) stay in the set.
    ``tests`` is from :func:`paired_seed_tests`, ``means`` maps method → mean score.
    """
    means = pd.Series(means, dtype=np.float64).dropna()
    if means.empty:
        return BestSet(None, [], False, "no scores")
    sign = 1.0 if higher_is_better else -1.0
    order = list(_best_first(means, higher_is_better).index)
    best = order[0]
    if tests.empty or not (tests["n_seeds"] >= 2).any():
        note = "no pair of methods shares two seeds: no difference can be claimed"
        return BestSet(best, order, False, note)
    worse = set()
    for row in tests.itertuples(index=False):
        if best in (row.a, row.b) and row.p_holm < alpha:
            other, gap = (row.b, row.mean_diff) if row.a == best else (row.a, -row.mean_diff)
            if sign * gap > 0:
                worse.add(other)
    kept = [m for m in order if m not in worse]
    note = f"{len(kept)} of {len(order)} methods not significantly worse than {best}"
    return BestSet(best, kept, True, note + f" (paired t, Holm, α={alpha:g})")


def seed_ranks(scores: pd.DataFrame, metric: str, higher_is_better: bool = True) -> pd.DataFrame:
    """Ranks of the methods (columns) within each seed (rows), rank 1 best, ties averaged.

    Seeds are the blocks of Demšar (JMLR 2006): only seeds on which every method has a score are
    kept, since a rank among fewer methods means something else.
    """
    return _complete(scores, metric).rank(axis=1, ascending=not higher_is_better, method="average")


def _complete(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    return _check(scores, metric).pivot(index="seed", columns="method", values=metric).dropna()


@dataclass(frozen=True)
class RankStability:
    """How often the observed top-k order recurs, and the mean Kendall τ-b of the rankings."""

    top: tuple[str, ...]
    held: int
    total: int
    mean_tau: float
    over: str  # "seeds", "query resamples" or "class resamples"
    tau_between: str  # what the τ compares, for the summary line

    @property
    def fraction(self) -> float:
        return self.held / self.total if self.total else math.nan


def _top(ranks: pd.Series, k: int) -> tuple[str, ...]:
    return tuple(sorted(ranks.index, key=lambda m: (ranks[m], str(m)))[:k])


def ranking_stability(
    scores: pd.DataFrame, metric: str, higher_is_better: bool = True, top: int = 3
) -> RankStability:
    """Would another seed reorder the board? Per-seed rankings against the ranking of the means.

    ``held`` counts the seeds whose top-``top`` order equals that of the means over the same
    seeds; ``mean_tau`` is the mean Kendall τ-b (``scipy.stats.kendalltau``) over all pairs of
    seeds (NaN with fewer than two seeds or two methods).
    """
    ranks = seed_ranks(scores, metric, higher_is_better)
    if ranks.empty:
        return RankStability((), 0, 0, math.nan, "seeds", "between seeds")
    means = _complete(scores, metric).mean()
    observed = _top(means.rank(ascending=not higher_is_better, method="average"), top)
    held = sum(_top(r, top) == observed for _, r in ranks.iterrows())
    taus = [
        _tau(ranks.iloc[i], ranks.iloc[j]) for i, j in itertools.combinations(range(len(ranks)), 2)
    ]
    return RankStability(observed, held, len(ranks), _nanmean(taus), "seeds", "between seeds")


def bootstrap_rank_stability(
    hits: Mapping[str, np.ndarray],
    groups: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    top: int = 3,
) -> RankStability:
    """Would other test queries reorder the board? Rankings of mean hits over joint resamples.

    ``hits`` maps method → per-query hits on the same queries (same order). All methods see the
    same resample of queries (or of classes, with ``groups``; see
    :func:`class_bootstrap_interval` for why). Unlike :func:`ranking_stability`, τ compares each
    resample's ranking with the observed one: all pairs of 1000 resamples would be half a
    million τ for the same information. Hits are "higher is better" by construction.
    """
    names = list(hits)
    values = np.stack([np.asarray(hits[m], dtype=np.float64).reshape(-1) for m in names])
    observed_ranks = pd.Series(values.mean(axis=1), names).rank(ascending=False, method="average")
    observed = _top(observed_ranks, top)
    boot = pd.DataFrame(_resampled_means(values, groups, n_boot, seed), columns=names)
    ranks = boot.rank(axis=1, ascending=False, method="average")
    held = sum(_top(r, top) == observed for _, r in ranks.iterrows())
    taus = [_tau(observed_ranks, r) for _, r in ranks.iterrows()]
    over = "query resamples" if groups is None else "class resamples"
    return RankStability(observed, held, n_boot, _nanmean(taus), over, "to the observed ranking")


def _tau(x: pd.Series, y: pd.Series) -> float:
    """Kendall τ-b; NaN with fewer than two methods or a ranking that ties them all."""
    if len(x) < 2:
        return math.nan
    return float(stats.kendalltau(x.to_numpy(), y[x.index].to_numpy()).statistic)


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def stability_summary(result: RankStability) -> str:
    """One line for a report, e.g. ``top-3 order (a > b > c) holds in 3 of 5 seeds; ...``."""
    if result.total < 2 and result.over == "seeds":
        return f"{result.total} complete seed(s): stability over seeds cannot be assessed"
    tau = "n/a" if math.isnan(result.mean_tau) else f"{result.mean_tau:.2f}"
    return (
        f"top-{len(result.top)} order ({' > '.join(result.top)}) holds in {result.held} of "
        f"{result.total} {result.over}; mean Kendall τ {result.tau_between} {tau}"
    )
